"""Run a function on many threads at once."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from ..errors import InvalidType, InvalidValue

__all__ = ["race"]

T = TypeVar("T")


def race(n: int, fn: Callable[[int], T], *, timeout: float = 30.0) -> list[T | Exception]:
    """Call ``fn(i)`` for i in 0..n-1, each on its own thread, released together.

    The threads wait behind a :class:`threading.Barrier` so the calls start as close together
    as the interpreter allows; a test then asserts on the outcomes ("exactly one winner, the
    others get None or the typed error"), never on timing.

    Args:
        n: How many threads (at least 1).
        fn: The function; it gets the thread's index.
        timeout: Seconds to wait for all threads to finish (a deadlock guard).

    Returns:
        For each index, what ``fn`` returned or the exception it raised.

    Raises:
        TimeoutError: A thread had not finished within `timeout`.
        ValueError: `n` is below 1.

    Example:
        >>> race(3, lambda i: i * 2)
        [0, 2, 4]
    """
    if isinstance(n, bool) or not isinstance(n, int):
        raise InvalidType(f"n must be int, not {type(n).__name__}")
    if n < 1:
        raise InvalidValue(f"n: must be at least 1, not {n}")
    barrier = threading.Barrier(n)
    results: list[T | Exception | None] = [None] * n
    done = [False] * n

    def run(i: int) -> None:
        try:
            barrier.wait(timeout)
            results[i] = fn(i)
        except Exception as err:  # the outcome of this call, handed back to the caller
            results[i] = err
        done[i] = True

    threads = [threading.Thread(target=run, args=(i,), name=f"race-{i}") for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    if not all(done):
        raise TimeoutError(f"race: {done.count(False)} of {n} calls did not finish in {timeout}s")
    return results  # type: ignore[return-value]
