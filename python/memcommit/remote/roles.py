"""The roles of a RemoteStore: each public method of a role runs on the server.

A remote role class has the in-memory role's public methods, with their signatures and
docstrings; each sends the call (its arguments as wire values) and returns what the
server's role returned, or raises the same error class.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from ..roles.roleset import RoleSet

__all__ = ["RemoteRole", "RoleCall", "remote_role"]

RoleCall = Callable[[str, str, tuple[Any, ...], dict[str, Any]], Any]
"""Runs ``role.method(*args, **kwargs)`` on the server: ``call(role, method, args, kwargs)``."""


class RemoteRole:
    """A role of a RemoteStore: each public method runs on the server.

    Args:
        call: Sends one call to the server and returns its value.
        url: The server (for the repr).
    """

    _role = ""

    def __init__(self, call: RoleCall, url: str) -> None:
        self._call = call
        self._url = url

    def __repr__(self) -> str:
        return f"<remote {self._role} of {self._url}>"


def _forwarder(role: str, name: str, original: Any) -> Any:
    def method(self: RemoteRole, *args: Any, **kwargs: Any) -> Any:
        return self._call(role, name, args, kwargs)

    functools.update_wrapper(method, original)
    del method.__wrapped__  # type: ignore[attr-defined]  # the signature stays, the code is ours
    method.__signature__ = inspect.signature(original)  # type: ignore[attr-defined]
    return method


@functools.cache
def remote_role(role: str) -> type[RemoteRole]:
    """The class of role `role` on a RemoteStore: the in-memory class's methods, forwarded."""
    local = type(getattr(RoleSet(), role))
    namespace: dict[str, Any] = {"_role": role, "__doc__": local.__doc__}
    for name, function in inspect.getmembers(local, inspect.isfunction):
        if not name.startswith("_"):
            namespace[name] = _forwarder(role, name, function)
    return type(f"Remote{local.__name__.removeprefix('Memory')}", (RemoteRole,), namespace)
