"""`@checked`: a role method's arguments are checked by their annotations, once each."""

from __future__ import annotations

from typing import Annotated, Any

import pytest

from memcommit.roles.values import Check, Count, OptionalText, Text, checked

seen: list[tuple[Any, str]] = []


def _noted(value: Any, name: str) -> Any:
    seen.append((value, name))
    return f"<{value}>"


Noted = Annotated[Any, Check(_noted)]


class Toy:
    @checked
    def call(self, a: Noted, b: int, c: Noted = "c0", *, d: Noted = "d0", e: str = "e0") -> Any:
        return a, b, c, d, e


def test_every_checked_parameter_is_checked_in_order_given_or_defaulted() -> None:
    seen.clear()
    assert Toy().call("a1", 2) == ("<a1>", 2, "<c0>", "<d0>", "e0")
    assert seen == [("a1", "a"), ("c0", "c"), ("d0", "d")]
    seen.clear()
    assert Toy().call(b=2, d="d1", a="a1", c="c1") == ("<a1>", 2, "<c1>", "<d1>", "e0")
    assert seen == [("a1", "a"), ("c1", "c"), ("d1", "d")]


def test_a_bad_call_gets_pythons_own_type_error() -> None:
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'b'"):
        Toy().call("a1")
    with pytest.raises(TypeError, match="positional arguments"):
        Toy().call("a1", 2, "c1", "d1")  # type: ignore[misc]


def test_the_aliases_name_the_argument() -> None:
    class Role:
        @checked
        def put(self, key: Text, *, note: OptionalText = None, n: Count = 0) -> Any:
            return key, note, n

    assert Role().put("k") == ("k", None, 0)
    with pytest.raises(TypeError, match=r"^key must be str"):
        Role().put(1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^n: must be at least 0"):
        Role().put("k", n=-1)
    with pytest.raises(TypeError, match=r"^note must be str"):
        Role().put("k", note=5)  # type: ignore[arg-type]


def test_an_annotation_that_is_not_postponed_is_read_as_it_is() -> None:
    def call(self: Any, a: Any) -> Any:
        return a

    call.__annotations__ = {"a": Noted}  # as a module without postponed annotations has it
    seen.clear()
    assert checked(call)(None, "a1") == "<a1>" and seen == [("a1", "a")]


def test_only_named_parameters_can_be_checked() -> None:
    with pytest.raises(TypeError, match="only named parameters"):

        class Bad:
            @checked
            def call(self, *values: Text) -> None: ...
