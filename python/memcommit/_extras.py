"""The optional parts of memcommit and the packages each needs.

``pip install memcommit`` installs what the embedded store needs and nothing else. The rest
comes with an extra:

* ``memcommit[server]``: ``memcommit serve`` and :mod:`memcommit.server` (Starlette on
  uvicorn, with httptools and uvloop where they install);
* ``memcommit[langgraph]``: :mod:`memcommit.integrations.langgraph`;
* ``memcommit[postgres]``: stores in PostgreSQL, ``memcommit.open("postgresql://...")``
  (:mod:`memcommit.postgres`: psycopg 3 and its pool);
* ``memcommit[bench]``: the side-by-side benchmarks' peers (LMDB).

Code that needs an extra calls :func:`require` before it imports the extra's packages, so a
missing one is reported as the extra to install, not as a bare ``ModuleNotFoundError``.
"""

from __future__ import annotations

import importlib

from .errors import InvalidValue, NotSupported

__all__ = ["EXTRAS", "MissingExtra", "require"]

#: The modules each extra must make importable (its optional speed-ups left out).
EXTRAS: dict[str, tuple[str, ...]] = {
    "server": ("starlette", "uvicorn"),
    "langgraph": ("langgraph.checkpoint",),
    "postgres": ("psycopg",),
    "bench": ("lmdb",),
}


class MissingExtra(NotSupported, ImportError):
    """An optional part of memcommit was used without the extra that installs it.

    An :class:`ImportError` (code that guards its imports keeps working) and a
    :class:`~memcommit.errors.NotSupported`.

    Attributes:
        extra: The extra to install (``"server"``).
        missing: The modules that could not be imported.
    """

    def __init__(self, extra: str, missing: tuple[str, ...], reason: str) -> None:
        names = ", ".join(missing)
        super().__init__(
            f"this needs memcommit's {extra!r} extra, which is not installed ({names}: "
            f"{reason}); install it with: pip install 'memcommit[{extra}]'",
            name=missing[0],
        )
        self.extra = extra
        self.missing = missing


def require(extra: str, *modules: str) -> None:
    """Raise :class:`MissingExtra` unless the modules of `extra` import.

    Args:
        extra: One of :data:`EXTRAS` (``"server"``, ``"langgraph"``, ``"bench"``).
        *modules: The modules to check; the extra's own list when none is given.

    Raises:
        MissingExtra: A module failed to import; the message names the extra and the
            ``pip install`` command that brings it.
        ValueError: `extra` is not one of memcommit's extras.
    """
    if extra not in EXTRAS:
        known = ", ".join(sorted(EXTRAS))
        raise InvalidValue(f"extra: {extra!r} is not one of memcommit's extras ({known})")
    missing: list[str] = []
    reason = ""
    for module in modules or EXTRAS[extra]:
        try:
            importlib.import_module(module)
        except ImportError as e:
            missing.append(module)
            reason = reason or str(e)
    if missing:
        raise MissingExtra(extra, tuple(missing), reason)
