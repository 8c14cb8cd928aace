"""Who may talk to the server: the loopback rule, the bearer token and the TLS pair.

The server binds loopback unless told otherwise and refuses any other address without a
token; the token is compared in constant time (its SHA-256, so the time does not depend on
its length either) and a request without it gets 401, saying whether no token was sent or
the one sent is not the server's. ``/v1/health`` needs no token, so a
probe can ask; it says nothing but whether the server takes commits.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from .. import wire
from ..errors import InvalidValue

__all__ = [
    "MIN_TOKEN_CHARS",
    "App",
    "Receive",
    "Scope",
    "Send",
    "TokenGuard",
    "check_access",
    "is_loopback",
    "token_digest",
]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]
"""An ASGI application."""

MIN_TOKEN_CHARS = 16


def is_loopback(host: str) -> bool:
    """Return whether `host` names only this machine (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_access(host: str, token: str | None, tls_cert: str | None, tls_key: str | None) -> None:
    """Refuse a server that would be open to others, or half configured for TLS.

    Raises:
        ValueError: A short token, a non-loopback `host` without a token, one of `tls_cert`
            and `tls_key` without the other, or a certificate or key that cannot be read or
            loaded (the message names the file).
    """
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise InvalidValue(
            f"token: {len(token)} characters is too short; use at least {MIN_TOKEN_CHARS} "
            "(e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))')"
        )
    if not is_loopback(host) and token is None:
        raise InvalidValue(
            f"host: {host!r} is not a loopback address; serving it needs a token "
            "(--token-file), or bind 127.0.0.1"
        )
    if (tls_cert is None) != (tls_key is None):
        raise InvalidValue("tls: give both --tls-cert and --tls-key, or neither")
    if tls_cert is not None and tls_key is not None:
        _check_tls(tls_cert, tls_key)


def _check_tls(cert: str, key: str) -> None:
    """Load the certificate chain and its key: a bad one is refused now, by name.

    Now is before anything is opened, not when the server starts listening.
    """
    import ssl

    for option, name in (("--tls-cert", cert), ("--tls-key", key)):
        try:
            with open(name, "rb"):
                pass
        except OSError as e:
            raise InvalidValue(f"{option} {name}: cannot read it: {e.strerror or e}") from None
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert, key)
    except ssl.SSLError as e:
        raise InvalidValue(
            f"--tls-cert {cert} and --tls-key {key}: not a PEM certificate chain and its "
            f"private key ({e.reason or e})"
        ) from None


def token_digest(token: str | None) -> bytes | None:
    """The SHA-256 of `token`, which the guard compares requests' tokens with."""
    return None if token is None else hashlib.sha256(token.encode()).digest()


class TokenGuard:
    """ASGI middleware: the token check (constant time); tells `on_response` each status.

    Args:
        app: The application behind the guard.
        digest: The token's :func:`token_digest`; None lets every request through.
        on_response: Called with the path and status of every answer, 401s included.
    """

    def __init__(
        self, app: App, digest: bytes | None, on_response: Callable[[str, int], None]
    ) -> None:
        self._app = app
        self._digest = digest
        self._on_response = on_response

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer 401 to a request without the token; pass the others to the app."""
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        path = scope["path"]

        async def counting_send(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                self._on_response(path, int(message["status"]))
            await send(message)

        refused = None if self._digest is None or path == "/v1/health" else self._refusal(scope)
        if refused is not None:
            body = wire.dumps({"error": {"code": "unauthorized", "message": refused}})
            await counting_send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                        (b"www-authenticate", b'Bearer realm="memcommit"'),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self._app(scope, receive, counting_send)

    def _refusal(self, scope: Scope) -> str | None:
        """Why the request is refused (what was wrong, and what to do), or None: it may pass."""
        assert self._digest is not None
        given = None
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                given = value
                break
        if given is None:
            return (
                "no token was sent, and this server requires one: pass token= to RemoteStore "
                "(the server's --token-file), or send 'Authorization: Bearer TOKEN'"
            )
        scheme, _, token = given.partition(b" ")
        # Hash first so the comparison takes the same time whatever the token's length.
        digest = hashlib.sha256(token.strip()).digest()
        if hmac.compare_digest(digest, self._digest) and scheme.lower() == b"bearer":
            return None
        if scheme.lower() != b"bearer":
            return "the Authorization header is not 'Bearer TOKEN'; send the token that way"
        return (
            "the token sent is not the server's: pass RemoteStore the token in the server's "
            "--token-file"
        )
