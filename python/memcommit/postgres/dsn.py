"""What a ``postgresql://`` URL names: the database, the store in it and the schema.

``postgresql://user@host:5432/db?store=team-a&schema=memcommit``: everything but ``store``,
``schema`` and ``migrate`` goes to libpq as it is (``sslmode``, ``connect_timeout``...).
``store`` (default ``default``) names the store among the many one database holds; ``schema``
(default ``memcommit``) the PostgreSQL schema its tables live in; ``migrate=false`` opens
without creating or upgrading the tables (``memcommit migrate URL`` does that), refusing a
schema that needs it.

:func:`of_source` makes the same target from a ``psycopg`` connection or connection pool
(``memcommit.open(pool, store="team-a")``), whose parameters say where the database is.
"""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidType, InvalidValue

__all__ = [
    "DEFAULT_SCHEMA",
    "DEFAULT_STORE",
    "Target",
    "hide_password",
    "is_connection_source",
    "is_postgres_url",
    "of_source",
    "parse",
    "with_names",
]

DEFAULT_STORE = "default"
DEFAULT_SCHEMA = "memcommit"

_SCHEMES = ("postgresql", "postgres")
_SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_MAX_STORE = 128
# The query parameters libpq takes a secret in, hidden by hide_password.
_SECRET_PARAMETERS = frozenset({"password", "sslpassword"})


@dataclass(frozen=True)
class Target:
    """A store in a PostgreSQL database.

    Attributes:
        conninfo: The URL libpq connects with (without ``store`` and ``schema``).
        store: The store's name in the database.
        schema: The PostgreSQL schema of memcommit's tables.
        shown: The URL without its password (:func:`hide_password`), for messages and
            ``info()``.
        migrate: Whether opening the store creates or upgrades the tables.
        source: The ``psycopg`` connection or pool the store was opened with, or None (a URL):
            the engine takes its connection from it.
        connect_kwargs: What new connections are made with besides `conninfo` (a pool's
            ``kwargs``; a connection's password).
    """

    conninfo: str
    store: str
    schema: str
    shown: str
    migrate: bool = True
    source: Any = None
    connect_kwargs: dict[str, Any] = field(default_factory=dict)


def is_postgres_url(path: str) -> bool:
    """Whether `path` is a ``postgresql://`` (or ``postgres://``) URL."""
    return path.split("://", 1)[0].lower() in _SCHEMES and "://" in path


def is_connection_source(value: object) -> bool:
    """Whether `value` is a ``psycopg`` connection or pool, sync or async (:func:`of_source`)."""
    if isinstance(value, (str, bytes)) or hasattr(value, "__fspath__"):
        return False
    try:
        import psycopg
    except ImportError:
        return False
    if isinstance(value, (psycopg.Connection, psycopg.AsyncConnection)):
        return True
    try:
        import psycopg_pool
    except ImportError:
        return False
    return isinstance(value, (psycopg_pool.ConnectionPool, psycopg_pool.AsyncConnectionPool))


def of_source(
    source: Any, store: str | None = None, schema: str | None = None, migrate: bool = True
) -> Target:
    """The target of the store `store` in the database a connection or pool is connected to.

    Raises:
        TypeError: `source` is an async connection or pool (open the store with a sync one;
            :class:`~memcommit.AsyncMemoryStore` wraps the store for asyncio).
        ValueError: `store` or `schema` is not a name, as for a URL; or `source` is a closed
            connection.
    """
    name = type(source).__name__
    if name.startswith("Async"):
        raise InvalidType(
            f"{name}: memcommit.open takes a psycopg Connection or ConnectionPool (sync); "
            "wrap the store in memcommit.AsyncMemoryStore for asyncio"
        )
    from psycopg.conninfo import conninfo_to_dict

    if hasattr(source, "getconn"):  # a pool
        conninfo = str(source.conninfo)
        kwargs = dict(source.kwargs or {})
    elif source.closed:  # its parameters are gone with it
        raise InvalidValue(
            f"path: the psycopg {name} given is closed, so where it connected cannot be read; "
            "give memcommit.open an open connection, a pool or the database's URL"
        )
    else:
        conninfo = str(source.info.dsn)
        password = source.info.password
        kwargs = {"password": password} if password else {}
    for key in ("autocommit", "prepare_threshold", "row_factory", "context", "cursor_factory"):
        kwargs.pop(key, None)  # the engine's own choices (see PostgresEngine)
    params = {**conninfo_to_dict(conninfo), **kwargs}
    shown = "postgresql://{}@{}:{}/{}".format(
        params.get("user", ""),
        params.get("host", ""),
        params.get("port", "5432"),
        params.get("dbname", ""),
    )
    target = parse(
        f"{shown}?"
        + urllib.parse.urlencode(
            {
                "store": DEFAULT_STORE if store is None else store,
                "schema": DEFAULT_SCHEMA if schema is None else schema,
            }
        )
    )
    return Target(conninfo, target.store, target.schema, shown, migrate, source, kwargs)


def with_names(url: str, store: str | None, schema: str | None) -> Target:
    """:func:`parse` `url`, with the `store` and `schema` given beside it where it has none.

    Raises:
        ValueError: As :func:`parse`; or a name both in the URL and beside it.
    """
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query))
    extra = {}
    for key, value in (("store", store), ("schema", schema)):
        if value is None:
            continue
        if key in query:
            raise InvalidValue(
                f"{key}: given both in the URL ({query[key]!r}) and as {key}={value!r}; "
                "give it once"
            )
        extra[key] = value
    if extra:
        url += ("&" if "?" in url else "?") + urllib.parse.urlencode(extra)
    return parse(url)


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
                raise InvalidValue(f"{key}: given twice in {hide_password(url)!r}")
            seen.add(key)
            if key == "store":
                store = value
            elif key == "schema":
                schema = value
            elif value.lower() in ("true", "1", "yes", "false", "0", "no"):
                migrate = value.lower() in ("true", "1", "yes")
            else:
                raise InvalidValue(f"migrate: {value!r} is not true or false")
        else:
            rest.append((key, value))
    if not store or len(store) > _MAX_STORE or "\x00" in store:
        raise InvalidValue(
            f"store: {store!r} is not a store name (1 to {_MAX_STORE} characters, no NUL)"
        )
    if not _SCHEMA_NAME.fullmatch(schema):
        raise InvalidValue(
            f"schema: {schema!r} is not a schema name (a letter or _, then letters, digits or _; "
            "at most 63)"
        )
    # Joined by hand: urlunsplit drops the "//" of a URL without a host part
    # (postgresql:///db?host=/run/postgresql, a Unix socket), which libpq then refuses.
    conninfo = f"{parts.scheme}://{parts.netloc}{parts.path}"
    if rest:
        conninfo += "?" + urllib.parse.urlencode(rest)
    if parts.fragment:
        conninfo += "#" + parts.fragment
    return Target(conninfo, store, schema, hide_password(conninfo), migrate)


def hide_password(url: str) -> str:
    """`url` with every password in it hidden, for messages: ``***`` in its place.

    The password of the user part (``postgresql://user:***@host/db``) and the value of a
    ``password=`` (or ``sslpassword=``) query parameter (``...?password=***&store=a``), which
    libpq takes as well. The rest is kept as it was written (``store=`` and all). A string that
    is not a URL (no ``://``, a file's path say) is returned as it is.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    # The user part ends where urllib.parse.urlsplit (and so :func:`parse`) ends it: at the
    # last "@" before the first "/", "?" or "#"; its password after its first ":".
    host_end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    userinfo, at, host = rest[:host_end].rpartition("@")
    if at and ":" in userinfo:
        userinfo = userinfo.split(":", 1)[0] + ":***"
    netloc = f"{userinfo}{at}{host}"
    tail = rest[host_end:]
    before, question, query = tail.partition("?")
    if question:
        params = []
        for param in query.split("&"):
            key, equals, _value = param.partition("=")
            secret = urllib.parse.unquote(key).strip().lower() in _SECRET_PARAMETERS
            params.append(f"{key}=***" if equals and secret else param)
        tail = f"{before}?{'&'.join(params)}"
    return f"{scheme}://{netloc}{tail}"
