"""Summarizers: turning several memories into one text, for memory compaction.

A summarizer is any callable ``(memories, purpose) -> str``: typically a call to a language
model. `purpose` says which step of :func:`memcommit.tiers.compact_memory` asks:

* ``"fold"``: the traces of one finished task, oldest first;
* ``"consolidate"``: a cold mid-term segment (one task, or one time window);
* ``"merge"``: several summaries of one task.

The default, :class:`ExtractiveSummarizer`, needs no model and gives the same text for the
same memories every time. It keeps whole sentences, never invents any (its one text of its
own is a placeholder for memories that hold no words), and treats every purpose alike.

Example:
    >>> import memcommit
    >>> from memcommit.summarize import ExtractiveSummarizer
    >>> store = memcommit.open(":memory:")
    >>> ids = [
    ...     store.put("Searched flights from Paris to Lisbon for May 3.", kind="trace"),
    ...     store.put("Found 14 flights; TAP 1235 at 09:40 is the cheapest at 89 EUR.",
    ...               kind="trace"),
    ...     store.put("Booked TAP 1235 for May 3, seat 12A.", kind="trace"),
    ... ]
    >>> ExtractiveSummarizer(max_chars=120)(store.get_many(ids), "fold")
    'Searched flights from Paris to Lisbon for May 3. Booked TAP 1235 for May 3, seat 12A.'
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from itertools import chain, repeat
from operator import attrgetter

from ._native import Memory
from .errors import InvalidType, InvalidValue

__all__ = ["PURPOSES", "ExtractiveSummarizer", "Summarizer", "default_summarizer"]

#: A summarizer: ``summarizer(memories, purpose) -> text``.
Summarizer = Callable[[Sequence[Memory], str], str]

#: The purposes memory compaction passes to a summarizer, one per step.
PURPOSES = ("fold", "consolidate", "merge")

# The summary of memories none of which holds a word, when "(N memories without text.)" is
# longer than max_chars (which is at least 20).
_NO_TEXT = "(no text.)"
# What ends a sentence, besides a line break.
_SENTENCE_ENDS = ".!?…"
# What separates words: every ASCII punctuation character but "_", and common typographic ones.
_PUNCTUATION = str.maketrans(
    dict.fromkeys("!\"#$%&'()*+,-./:;<=>?@[\\]^`{|}~…—\u2013“”\u2018\u2019«»·", " ")
)
_TEXT = attrgetter("text")
_ENDS = frozenset(".!?…:;")
# Words that carry no content of their own: they neither make a sentence informative nor
# make two sentences say the same thing.
_STOPWORDS = frozenset(
    """
    a about above after again against all also am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is it
    its itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself
    yourselves s t d ll re ve m ok okay yes yeah sure thanks thank please hi hello
    """.split()
)
# The first sentence of a group usually says what was asked, and the last one how it ended.
_FIRST_BONUS = 1.5
_LAST_BONUS = 1.5
# A sentence whose content words are mostly in sentences already kept adds little: it needs
# at least this share of words not kept yet.
_NEW_WORDS_NEEDED = 1 / 3
# Word counts are taken over at most this many sentences of a group, spread evenly.
_SAMPLE = 64
# Once this many sentences were passed over as saying nothing new, the rest (scored lower
# still) are not looked at.
_PASS_OVER_AT_MOST = 16


class ExtractiveSummarizer:
    """The default summarizer: the most informative sentences, within a length budget.

    It splits the memories' texts into sentences (at a line break, or at . ! ? … followed by
    a space) and drops repeats (the same text but for case and punctuation). When they all fit in
    `max_chars`, it keeps them all. Otherwise it weighs each word by how many sentences use
    it, discounted when nearly every sentence does (the words of a template say little): a
    word used by `c` of `n` sentences weighs ``c * log((n + 1) / c)``, and common English
    words weigh nothing. (In groups of over 64 sentences, `c` is counted over 64 of them
    spread evenly and scaled up, which bounds the work.) A sentence scores the weight of its
    words over the square root of their number, with a bonus for the first sentence (usually
    what was asked) and the last (how it ended). It keeps the best-scoring sentences that fit,
    passing over one that says nothing new (under a third of its content words are not in
    the sentences already kept, or it has none, like "ok."), and prints them in their
    original order. Nothing is rewritten: each sentence is one a memory holds, with a full
    stop added where it had none.

    The result is deterministic and never empty while there are memories; when not even the
    best sentence fits, it is cut at a word and ends with "…". When no memory holds a word
    (all blank, or punctuation alone), the summary is a placeholder, "(2 memories without
    text.)", or "(no text.)" where that does not fit in `max_chars`: the one text not taken
    from the memories. `purpose` is not used.

    Args:
        max_chars: The longest summary, in characters (default 600).

    Raises:
        TypeError: `max_chars` is not an int.
        ValueError: `max_chars` is under 20.
    """

    def __init__(self, max_chars: int = 600) -> None:
        if isinstance(max_chars, bool) or not isinstance(max_chars, int):
            raise InvalidType(f"max_chars must be int, not {type(max_chars).__name__}")
        if max_chars < 20:
            raise InvalidValue(f"max_chars: must be at least 20, got {max_chars}")
        self.max_chars = max_chars

    def __repr__(self) -> str:
        return f"ExtractiveSummarizer(max_chars={self.max_chars})"

    def __call__(self, memories: Sequence[Memory], purpose: str) -> str:
        """Summarize `memories` (oldest first) in at most `max_chars` characters.

        Args:
            memories: The memories to summarize.
            purpose: ``"fold"``, ``"consolidate"`` or ``"merge"`` (all treated alike).

        Returns:
            The summary; empty only when `memories` is empty.
        """
        return self.summarize(list(map(_TEXT, memories)))

    def summarize(self, texts: Sequence[str]) -> str:
        """Summarize plain texts, oldest first: the work behind :meth:`__call__`."""
        if not texts:
            return ""
        sentences, words = _sentences(texts)
        n = len(sentences)
        if n == 0:
            count = len(texts)
            text = f"({count} {'memory' if count == 1 else 'memories'} without text.)"
            return text if len(text) <= self.max_chars else _NO_TEXT
        # How many sentences use each word, counted over at most _SAMPLE of them spread evenly
        # (a bound on the work for large groups) and scaled to all; a word the sample missed
        # is taken to be in one sentence. Counting the same str objects the scores look up
        # hashes each word once.
        step = -(-n // _SAMPLE)
        scale = n / -(-n // step)
        top, log, sqrt = n + 1, math.log, math.sqrt
        weights: dict[str, float] = {}
        for w, c in Counter(chain.from_iterable(words[::step])).items():
            k = c * scale
            weights[w] = k * log(top / k) if k < top else 0.0
        for w in _STOPWORDS.intersection(weights):
            weights[w] = 0.0
        weight, unseen = weights.get, repeat(log(top))
        scores = [sum(map(weight, w, unseen)) / sqrt(len(w)) for w in words]
        scores[0] *= _FIRST_BONUS
        scores[-1] *= _LAST_BONUS
        order = sorted(range(n), key=scores.__getitem__, reverse=True)
        return self._fit(order, sentences, words)

    def _fit(self, order: list[int], sentences: list[str], words: list[list[str]]) -> str:
        """Keep sentences in `order` of preference while they fit; join them in text order."""
        budget = self.max_chars
        # Everything fits: keep it all, repeats of words included. Each sentence costs at least
        # two characters (a word and a space or full stop), so a group that does not fit is
        # found so once at most budget / 2 sentences are measured.
        size = -1  # no space before the first sentence
        for sentence in sentences:
            size += len(_ended(sentence.strip())) + 1
            if size > budget:
                break
        else:
            return _joined(sentences, range(len(sentences)), budget)
        kept: list[int] = []
        covered: set[str] = set()
        room = budget + 1  # a kept sentence costs its length, one space, maybe a full stop
        cheapest = min(map(len, sentences)) // 2
        passed_over = 0
        for i in order:
            sentence = sentences[i].strip()
            cost = len(sentence) + 1 + (sentence[-1] not in _ENDS)
            if cost > room:
                continue
            content = set(words[i]).difference(_STOPWORDS)
            new = len(content - covered)
            if not new or new < _NEW_WORDS_NEEDED * len(content):
                # Says nothing new (or nothing at all: "ok.").
                passed_over += 1
                if passed_over > _PASS_OVER_AT_MOST:
                    break
                continue
            covered |= content
            kept.append(i)
            room -= cost
            if room < cheapest:
                break
        if not kept:
            # No sentence both fits and says something: the best one, cut at a word if even
            # it is longer than the budget.
            best = _ended(sentences[order[0]].strip())
            return best if len(best) <= budget else _cut(best, budget)
        return _joined(sentences, sorted(kept), budget)


def _sentences(texts: Sequence[str]) -> tuple[list[str], list[list[str]]]:
    """The sentences of `texts` that hold a word, each once, and their words.

    A sentence ends at a line break, or at . ! ? or … followed by a space (so "v1.2" and
    "money.py" end none). Its words are its text lower-cased and cut at white space and
    punctuation; two sentences the same but for case and punctuation are one (at the place
    of the first, with the spelling of the last). The work is a few passes of str methods over all
    the texts joined, several times faster than a loop or a regular expression: a sentence
    may have white space around it, which the caller strips from those it keeps.
    """
    joined = "\n".join(texts)
    if "\t" in joined:
        joined = joined.replace("\t", " ")
    for mark in _SENTENCE_ENDS:
        # A search for one character is a memchr; one for "! " probes at every space.
        if mark in joined:
            joined = joined.replace(mark + " ", mark + "\n")
    # Lower-casing and the translation never add or remove a line break, so the two splits
    # stay aligned.
    lowered = joined.lower().translate(_PUNCTUATION)
    unique = dict(zip(lowered.split("\n"), joined.split("\n"), strict=True))
    sentences = list(unique.values())
    words = list(map(str.split, unique))
    if [] in words:  # blank lines, or sentences of punctuation alone
        keep = [i for i, w in enumerate(words) if w]
        sentences = [sentences[i] for i in keep]
        words = [words[i] for i in keep]
    return sentences, words


def _joined(sentences: list[str], keep: Iterable[int], budget: int) -> str:
    """The sentences `keep`, stripped, each ending in punctuation, joined by spaces."""
    text = " ".join(_ended(sentences[i].strip()) for i in keep)
    assert len(text) <= budget, "the caller counted the costs"
    return text


def _ended(sentence: str) -> str:
    return sentence if sentence[-1] in _ENDS else sentence + "."


def _cut(sentence: str, budget: int) -> str:
    head = sentence[: budget - 1]
    space = head.rfind(" ")
    if space > budget // 2:
        head = head[:space]
    return head.rstrip(" ,;:-") + "…"


#: The summarizer memory compaction uses when given none.
default_summarizer: Summarizer = ExtractiveSummarizer()
