"""Contract: artifacts (research/roles.md 4.8; ROLES.md decision 5)."""

# Test methods say what they check in their names; only some need a docstring.
# ruff: noqa: D102

from __future__ import annotations

import hashlib
import re

import pytest

from ...errors import InvalidValue
from ...roles import ArtifactVersion, VersionConflictError
from ..race import race
from .harness import Harness, fresh_id, fresh_sized_id, stated_most


class TestArtifacts:
    """Versioned blobs."""

    def test_save_and_load_versions(self, harness: Harness) -> None:
        store, clock = harness.store, harness.clock
        owner = ("run", fresh_id("r"))
        assert store.artifacts.load(owner, "doc") is None
        v1 = store.artifacts.save(owner, "doc", b"one", media_type="text/plain")
        clock.advance(7)
        v2 = store.artifacts.save(owner, "doc", b"two", metadata={"lang": "en"})
        assert (v1.version, v2.version) == (1, 2)
        latest = store.artifacts.load(owner, "doc")
        assert latest is not None and (latest.data, latest.meta) == (b"two", v2)
        first = store.artifacts.load(owner, "doc", version=1)
        assert first is not None and (first.data, first.meta) == (b"one", v1)
        assert store.artifacts.load(owner, "doc", version=3) is None
        assert store.artifacts.head(owner, "doc") == v2
        assert store.artifacts.head(owner, "doc", version=1) == v1

    def test_metadata_of_a_version(self, harness: Harness) -> None:
        store, clock = harness.store, harness.clock
        owner = ("agent", fresh_id("a"))
        data = b"hello"
        meta = store.artifacts.save(owner, "greeting", data, media_type="text/plain")
        assert (meta.owner, meta.name, meta.media_type) == (owner, "greeting", "text/plain")
        assert meta.size == 5 and meta.sha256 == hashlib.sha256(data).hexdigest()
        assert meta.created_at_ms == clock.now_ms() and meta.metadata == {}
        default = store.artifacts.save(owner, "bin", b"\x01")
        assert default.media_type == "application/octet-stream"

    def test_nested_names_do_not_leak(self, harness: Harness) -> None:
        store = harness.store
        owner = ("run", fresh_id("r"))
        store.artifacts.save(owner, "doc", b"a")
        nested = store.artifacts.save(owner, "doc/nested", b"b")
        store.artifacts.save(owner, "docs", b"c")
        assert [v.name for v in store.artifacts.list_versions(owner, "doc")] == ["doc"]
        assert store.artifacts.save(owner, "doc", b"a2").version == 2
        assert store.artifacts.delete(owner, "doc") == 2
        assert store.artifacts.load(owner, "doc") is None
        loaded = store.artifacts.load(owner, "doc/nested")
        assert loaded is not None and loaded.meta == nested
        assert store.artifacts.list_names(owner) == ["doc/nested", "docs"]

    def test_delete_and_versions_are_never_reused(self, harness: Harness) -> None:
        """Decision 5: a save after delete gets the next never-used version."""
        store = harness.store
        owner = ("run", fresh_id("r"))
        for n in range(3):
            store.artifacts.save(owner, "doc", bytes([n]))
        assert store.artifacts.delete(owner, "doc") == 3
        assert store.artifacts.load(owner, "doc") is None
        assert store.artifacts.list_versions(owner, "doc") == []
        assert store.artifacts.list_names(owner) == []
        assert store.artifacts.delete(owner, "doc") == 0
        again = store.artifacts.save(owner, "doc", b"new")
        assert again.version == 4
        assert store.artifacts.load(owner, "doc", version=1) is None

    def test_listing(self, harness: Harness) -> None:
        store = harness.store
        owner = ("run", fresh_id("r"))
        for name in ("b", "a", "c/d"):
            store.artifacts.save(owner, name, b"x")
        saved = [store.artifacts.save(owner, "a", bytes([n])) for n in range(2)]
        assert store.artifacts.list_names(owner) == ["a", "b", "c/d"]
        assert [v.version for v in store.artifacts.list_versions(owner, "a")] == [1, 2, 3]
        assert store.artifacts.list_versions(owner, "a")[1:] == saved
        assert store.artifacts.list_names(("run", fresh_id("empty"))) == []

    def test_byte_fidelity(self, harness: Harness) -> None:
        store = harness.store
        owner = ("run", fresh_id("r"))
        big = bytes(range(256)) * 4096  # 1 MiB
        for name, data in (("empty", b""), ("edges", b"\x00\xff"), ("big", big)):
            store.artifacts.save(owner, name, data)
            loaded = store.artifacts.load(owner, name)
            assert loaded is not None and loaded.data == data
            assert loaded.meta.size == len(data)
        store.artifacts.save(owner, "ba", bytearray(b"ba"))
        loaded = store.artifacts.load(owner, "ba")
        assert loaded is not None and loaded.data == b"ba" and type(loaded.data) is bytes
        for wrong in ("text", None, [1, 2]):
            with pytest.raises(TypeError):
                store.artifacts.save(owner, "bad", wrong)
        assert store.artifacts.load(owner, "bad") is None

    def test_owners_are_isolated(self, harness: Harness) -> None:
        store = harness.store
        a, b = ("run", fresh_id("r")), ("run", fresh_id("r"))
        store.artifacts.save(a, "doc", b"a")
        store.artifacts.save(a, "doc", b"a2")
        only = store.artifacts.save(b, "doc", b"b")
        assert only.version == 1
        loaded = store.artifacts.load(b, "doc")
        assert loaded is not None and loaded.data == b"b"
        assert store.artifacts.list_names((a[0],)) == []

    def test_concurrent_saves(self, harness: Harness) -> None:
        store = harness.store
        owner = ("run", fresh_id("r"))
        outcomes = race(8, lambda i: store.artifacts.save(owner, "doc", bytes([i])))
        assert all(isinstance(o, ArtifactVersion) for o in outcomes)
        assert sorted(o.version for o in outcomes) == list(range(1, 9))  # type: ignore[union-attr]
        for outcome in outcomes:
            assert isinstance(outcome, ArtifactVersion)
            loaded = store.artifacts.load(owner, "doc", version=outcome.version)
            assert loaded is not None and loaded.meta == outcome

    def test_expected_version(self, harness: Harness) -> None:
        store = harness.store
        owner = ("run", fresh_id("r"))
        first = store.artifacts.save(owner, "doc", b"1", expected_version=0)
        with pytest.raises(VersionConflictError) as caught:
            store.artifacts.save(owner, "doc", b"x", expected_version=0)
        assert (caught.value.expected, caught.value.actual) == (0, 1)
        second = store.artifacts.save(owner, "doc", b"2", expected_version=1)
        with pytest.raises(VersionConflictError):
            store.artifacts.save(owner, "doc", b"x", expected_version=1)
        assert store.artifacts.list_versions(owner, "doc") == [first, second]

    def test_a_name_or_owner_too_long_for_the_keys_is_refused_naming_it(
        self, harness: Harness
    ) -> None:
        store = harness.store
        owner = ("run", fresh_id("r"))
        with pytest.raises(InvalidValue) as caught:
            store.artifacts.save(owner, fresh_sized_id("doc", 1000), b"x")
        message = str(caught.value)
        assert message.startswith("name: 1000 bytes is too long; an artifact's name (with its ")
        most = stated_most(message)
        longest, longer = fresh_sized_id("doc", most), fresh_sized_id("doc", most + 1)
        assert store.artifacts.save(owner, longest, b"x").version == 1
        loaded = store.artifacts.load(owner, longest)
        assert loaded is not None and loaded.data == b"x"
        with pytest.raises(InvalidValue, match=f"^name: {most + 1} bytes is too long;"):
            store.artifacts.save(owner, longer, b"x")
        assert store.artifacts.list_names(owner) == [longest]
        wide = ("run", fresh_sized_id("r", 1200))
        with pytest.raises(InvalidValue) as labels:
            store.artifacts.save(wide, "doc", b"x")
        assert str(labels.value).startswith(
            "owner: its labels are 1203 bytes together, too long; an artifact's owner"
        )
        assert store.artifacts.list_names(wide) == []

    def test_data_too_large_for_one_record_is_refused_naming_it(self, harness: Harness) -> None:
        """Data is kept base64-encoded in one record: about 3/4 of max_record_bytes fits."""
        store = harness.store
        owner = ("run", fresh_id("r"))
        with pytest.raises(InvalidValue) as caught:
            store.artifacts.save(owner, "blob", b"\x01" * (12 * 2**20))
        message = str(caught.value)
        assert message.startswith(
            "data: 12582912 bytes is too large; an artifact's data is stored base64-encoded "
            "in one record, so the largest artifact is "
        )
        assert "three quarters of the store's max_record_bytes" in message
        assert store.artifacts.list_versions(owner, "blob") == []
        largest = re.search(r"the largest artifact is (\d+) bytes", message)
        assert largest is not None
        most = int(largest.group(1))
        saved = store.artifacts.save(owner, "blob", bytes(most))
        assert (saved.version, saved.size) == (1, most)
        with pytest.raises(InvalidValue, match=f"^data: {most + 1} bytes is too large;"):
            store.artifacts.save(owner, "blob", bytes(most + 1))
        assert store.artifacts.list_versions(owner, "blob") == [saved]
        assert store.artifacts.save(owner, "blob", b"next").version == 2
