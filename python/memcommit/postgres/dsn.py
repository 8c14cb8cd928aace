"""What a ``postgresql://`` URL names: the database, the store in it and the schema.

``postgresql://user@host:5432/db?store=team-a&schema=memcommit``: everything but ``store``,
``schema`` and ``migrate`` goes to libpq as it is (``sslmode``, ``connect_timeout``...).
``store`` (default ``default``) names the store among the many one database holds; ``schema``
(default ``memcommit``) the PostgreSQL schema its tables live in; ``migrate=false`` opens
without creating or upgrading the tables (``memcommit migrate URL`` does that), refusing a
schema that needs it.
"""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass

__all__ = ["DEFAULT_SCHEMA", "DEFAULT_STORE", "Target", "is_postgres_url", "parse"]

DEFAULT_STORE = "default"
DEFAULT_SCHEMA = "memcommit"

_SCHEMES = ("postgresql", "postgres")
_SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_MAX_STORE = 128


@dataclass(frozen=True)
class Target:
    """A store in a PostgreSQL database.

    Attributes:
        conninfo: The URL libpq connects with (without ``store`` and ``schema``).
        store: The store's name in the database.
        schema: The PostgreSQL schema of memcommit's tables.
        shown: The URL without its password, for messages and ``info()``.
        migrate: Whether opening the store creates or upgrades the tables.
    """

    conninfo: str
    store: str
    schema: str
    shown: str
    migrate: bool = True


def is_postgres_url(path: str) -> bool:
    """Whether `path` is a ``postgresql://`` (or ``postgres://``) URL."""
    return path.split("://", 1)[0].lower() in _SCHEMES and "://" in path


def parse(url: str) -> Target:
    """The target `url` names.

    Raises:
        ValueError: A ``store`` or ``schema`` that is empty, repeated or not a name (the
            message names it and says what is allowed).
    """
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    store, schema, migrate = DEFAULT_STORE, DEFAULT_SCHEMA, True
    seen: set[str] = set()
    rest: list[tuple[str, str]] = []
    for key, value in query:
        if key in ("store", "schema", "migrate"):
            if key in seen:
                raise ValueError(f"{key}: given twice in {_hide_password(url)!r}")
            seen.add(key)
            if key == "store":
                store = value
            elif key == "schema":
                schema = value
            elif value.lower() in ("true", "1", "yes", "false", "0", "no"):
                migrate = value.lower() in ("true", "1", "yes")
            else:
                raise ValueError(f"migrate: {value!r} is not true or false")
        else:
            rest.append((key, value))
    if not store or len(store) > _MAX_STORE or "\x00" in store:
        raise ValueError(
            f"store: {store!r} is not a store name (1 to {_MAX_STORE} characters, no NUL)"
        )
    if not _SCHEMA_NAME.fullmatch(schema):
        raise ValueError(
            f"schema: {schema!r} is not a schema name (a letter or _, then letters, digits or _; "
            "at most 63)"
        )
    conninfo = urllib.parse.urlunsplit(
        (parts.scheme, parts.netloc, parts.path, urllib.parse.urlencode(rest), parts.fragment)
    )
    return Target(conninfo, store, schema, _hide_password(conninfo), migrate)


def _hide_password(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
