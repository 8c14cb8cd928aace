"""Every error class is declared once: its code, fields and message give the constructor,
equality, pickling and the wire form, and each crosses the wire as the same class."""

from __future__ import annotations

import inspect
import json
import pickle
from typing import Any

import pytest

import memcommit
from memcommit import errors, wire
from memcommit._extras import MissingExtra
from memcommit.roles import errors as role_errors

_SAMPLES: dict[str, Any] = {
    "guard": errors.Guard("lsn", "m1", 5, 1),
    "path": "/data/store.log",
    "offset": 4096,
    "lsn": 17,
    "after_lsn": 12,
    "id": "m1",
    "by": "m2",
    "status": 409,
    "url": "http://127.0.0.1:7411",
    "commit_id": "c-1",
    "run_id": "run-1",
    "step_id": "step-1",
    "checkpoint_id": "cp-1",
    "conversation_id": "conv-1",
    "agent_id": "agent-1",
    "revision_id": "rev-1",
    "version": 3,
    "what": "state ('a',)/k",
    "expected": 5,
    "actual": 1,
    "reason": "expired",
    "effect_key": "charge",
    "key": "idem-1",
    "resource": "run-1",
    "holder": "worker-2",
    "expires_at_ms": 1_700_000_000_000,
    "token": 4,
    "current_token": 5,
    "current": "completed",
    "attempted": "claim",
    "errno": 28,
}


def _error_classes() -> list[type[BaseException]]:
    found = {
        value
        for module in (errors, role_errors)
        for name, value in vars(module).items()
        if isinstance(value, type) and issubclass(value, BaseException) and name[0] != "_"
    }
    return sorted(found, key=lambda cls: cls.__name__)


def _fields(cls: type[BaseException]) -> dict[str, Any]:
    """A value for every field of `cls`, none of them its default."""
    out = {}
    for name, parameter in inspect.signature(cls).parameters.items():
        if name == "message":
            continue
        if name == "code":  # an exit code (int) or a server failure's code (str)
            out[name] = 2 if isinstance(parameter.default, int) else "bad_request"
        else:
            out[name] = _SAMPLES[name]
    return out


def _same(copy: BaseException, err: BaseException) -> None:
    assert type(copy) is type(err)
    assert copy == err and str(copy) == str(err)
    assert getattr(copy, "fields") == getattr(err, "fields")  # noqa: B009


CLASSES = _error_classes()


def test_the_reflection_sees_every_family() -> None:
    names = {cls.__name__ for cls in CLASSES}
    assert {
        "MemcommitError",
        "CorruptLog",
        "CommandError",
        "ServerError",
    } <= names
    assert {
        "RoleError",
        "RunNotFoundError",
        "ClaimLostError",
        "CommitOutcomeUnknown",
    } <= names
    assert len(CLASSES) >= 40


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
def test_every_error_survives_the_wire_and_pickle_as_itself(cls: type[BaseException]) -> None:
    fields = _fields(cls)
    given = cls("a message naming the thing", **fields)
    errs = [given]
    if inspect.signature(cls).parameters["message"].default is None:
        errs.append(cls(**fields))  # described from its fields
    for err in errs:
        assert err.fields == fields  # type: ignore[attr-defined]
        assert {name: getattr(err, name) for name in fields} == fields
        assert str(err) == err.message  # type: ignore[attr-defined]
        described = errors.to_wire(err)
        assert described["code"] and described["class"] == cls.__name__
        assert err.to_wire() == described  # type: ignore[attr-defined]
        _same(errors.from_wire(described), err)
        _same(pickle.loads(pickle.dumps(err)), err)
        # Through the server's JSON, the guard of a errors.Rejected included.
        sent = json.loads(wire.dumps(wire.encode_error(err)))
        _same(wire.decode_error(sent, str(fields.get("url", ""))), err)
    assert str(given) == "a message naming the thing"


def test_codes_are_unique_and_stable() -> None:
    codes = [
        errors.to_wire(cls(**_fields(cls)))["code"]
        for cls in CLASSES
        if cls is not errors.CommandError
    ]
    codes.append(errors.to_wire(errors.CommandError("m"))["code"])
    assert len(set(codes)) == len(codes) == len(CLASSES)
    assert errors.to_wire(errors.CorruptLog("m"))["code"] == "corrupt_log"
    assert errors.to_wire(errors.Rejected("m"))["code"] == "rejected"
    assert errors.to_wire(errors.RunNotFoundError(run_id="r"))["code"] == "run_not_found"
    assert (
        errors.RunNotFoundError.code == "run_not_found" and errors.CorruptLog.code == "corrupt_log"
    )  # type: ignore[attr-defined]
    # Built-in errors have codes of their own, apart from memcommit's.
    assert {errors.to_wire(e())["code"] for e in (TypeError, ValueError, KeyError)}.isdisjoint(
        codes
    )


def test_a_second_class_cannot_take_a_code() -> None:
    with pytest.raises(TypeError, match="'corrupt_log' is taken"):

        class Again(errors.MemcommitError, code="corrupt_log"):
            pass


def test_the_binding_builds_its_errors_by_position() -> None:
    corrupt = errors.CorruptLog("damaged", "/s.log", 64, 3)
    assert (corrupt.path, corrupt.offset, corrupt.lsn) == ("/s.log", 64, 3)
    seal = errors.SealMismatch("changed", "/s.log", 9, 128, 4)
    assert (seal.path, seal.lsn, seal.offset, seal.after_lsn) == ("/s.log", 9, 128, 4)
    forged = errors.ForgedReference("forged", "/s.log", "ghost", "m1", 7, 256)
    assert (forged.path, forged.id, forged.by, forged.lsn, forged.offset) == (
        "/s.log",
        "ghost",
        "m1",
        7,
        256,
    )
    assert errors.StoreLocked("locked", "/s.log").path == "/s.log"
    guard = errors.Guard("expect_lsn", None, 3, 4)
    rejected = errors.Rejected("expected LSN 3", guard)
    assert (rejected.reason, rejected.guard, str(rejected)) == (
        "expected LSN 3",
        guard,
        "expected LSN 3",
    )
    assert errors.CommandError("usage", 2).code == 2 and errors.CommandError("failed").code == 1
    assert isinstance(corrupt, errors.IntegrityError) and isinstance(
        corrupt, memcommit.MemcommitError
    )
    with pytest.raises(TypeError, match="takes 4 positional arguments but 5"):
        errors.CorruptLog("m", "p", 1, 2, 3)
    with pytest.raises(TypeError, match=r"unknown fields \['paht'\]"):
        errors.CorruptLog("m", paht="p")


class Mine(errors.CorruptLog):
    """An application's own error, declaring no code."""


def test_a_subclass_without_a_code_travels_as_its_parent() -> None:
    mine = Mine("m", "/s.log", 1, 2)
    assert isinstance(errors.from_wire(errors.to_wire(mine)), errors.CorruptLog)
    assert errors.from_wire(errors.to_wire(mine)).path == "/s.log"  # type: ignore[attr-defined]
    assert type(pickle.loads(pickle.dumps(mine))) is Mine
    missing = MissingExtra("server", ("starlette",), "No module named 'starlette'")
    assert (missing.name, missing.extra) == ("starlette", "server")  # ImportError's name= too
    back = wire.decode_error(wire.encode_error(missing))
    assert type(back) is errors.NotSupported and str(back) == str(missing)


def test_a_commit_outcome_unknown_keeps_its_commit_id_across_the_wire() -> None:
    sent = wire.encode_error(errors.CommitOutcomeUnknown("lost", commit_id="c-7"))
    assert sent["class"] == "CommitOutcomeUnknown"
    back = wire.decode_error(json.loads(wire.dumps(sent)), "http://h:1")
    assert type(back) is errors.CommitOutcomeUnknown
    assert (back.commit_id, back.url, back.code, back.status) == (
        "c-7",
        "http://h:1",
        "commit_outcome_unknown",
        None,
    )


def test_built_in_errors_cross_by_their_code() -> None:
    for err in (TypeError("kind must be str"), ValueError("tier: 'x'"), KeyError("k")):
        back = errors.from_wire(errors.to_wire(err))
        assert type(back) is type(err) and back.args == err.args
    back = errors.from_wire(errors.to_wire(json.JSONDecodeError("bad", "doc", 0)))
    assert type(back) is ValueError


def test_what_no_code_names_is_a_server_failure() -> None:
    described = errors.to_wire(OSError(5, "Input/output error"))
    assert described["code"] == "internal" and described["class"] == "OSError"
    with pytest.raises(KeyError, match="'internal'"):
        errors.from_wire(described)
    back = wire.decode_error(wire.encode_error(OSError(5, "Input/output error")), "http://h:1")
    assert type(back) is errors.ServerError and (back.status, back.code) == (500, "internal")
    assert str(back) == "the server at http://h:1 failed: OSError: [Errno 5] Input/output error"
    odd = wire.decode_error({"code": "run_not_found", "fields": {"no_such_field": 1}}, "")
    assert type(odd) is errors.ServerError and odd.status == 500


def test_equal_errors_are_equal_and_hash_alike() -> None:
    a, b = errors.CorruptLog("m", "/s.log", 1, 2), errors.CorruptLog("m", "/s.log", 1, 2)
    assert a == b and hash(a) == hash(b)
    assert a != errors.CorruptLog("m", "/s.log", 1, 3)
    assert a != errors.SealMismatch("m", "/s.log", 1, 2)


def test_an_error_without_fields_takes_several_arguments_as_exception_does() -> None:
    class Mine(memcommit.MemcommitError):
        pass

    for cls in (memcommit.MemcommitError, Mine):
        err = cls("a", 2)
        assert err.args == ("a", 2)
        assert str(err) == str(Exception("a", 2)) == err.message
        assert isinstance(err, memcommit.MemcommitError)


def test_a_bad_argument_is_a_memcommit_error_and_the_builtin_error(tmp_path: Any) -> None:
    """Every error derives from MemcommitError and carries a code (SPEC 10, ROLES 12); a bad
    argument is also the TypeError or ValueError Python code expects, raised by the Python
    layer or by the Rust binding alike, and nothing is written."""
    with memcommit.open(str(tmp_path / "m.db")) as store:
        locks, state = store.locks, store.state
        cases: list[tuple[type[Exception], type[Exception], Any, str]] = [
            (memcommit.InvalidType, TypeError, lambda: store.put(5), "text"),
            (memcommit.InvalidValue, ValueError, lambda: store.put("x", tier="nope"), "tier"),
            (memcommit.InvalidValue, ValueError, lambda: store.put("x", id=""), "id"),
            (memcommit.InvalidType, TypeError, lambda: _put_many(store, "abc"), "texts"),
            (memcommit.InvalidValue, ValueError, lambda: locks.acquire("k", "o", 0), "ttl_ms"),
            (memcommit.InvalidType, TypeError, lambda: state.put(("a",), "k", {1, 2}), "set"),
        ]
        for cls, builtin, call, named in cases:
            with pytest.raises(builtin) as caught:
                call()
            assert isinstance(caught.value, cls), (named, type(caught.value))
            assert isinstance(caught.value, memcommit.MemcommitError)
            assert caught.value.code == cls.code
            assert named in str(caught.value)
            back = errors.from_wire(errors.to_wire(caught.value))
            assert type(back) is cls and str(back) == str(caught.value)
        assert store.lsn == 0


def _put_many(store: Any, texts: Any) -> None:
    with store.commit() as c:
        c.put_many(texts)
