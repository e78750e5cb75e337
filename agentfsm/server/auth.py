"""The proxy's safety edge: Host/Origin allow-lists, API-key checks, a capped JSON body
reader, and the bind rule.

A web page can reach a proxy on this machine two ways: by DNS rebinding (its own name
resolving to 127.0.0.1, so the request carries ``Host: evil.example``) and by posting to
it from another site (a form or ``text/plain`` body, which needs no CORS preflight).
Both would spend the user's upstream key. So a request's ``Host`` must be a loopback
name or an allowed one (any, when clients must send an API key: a page cannot), its
``Origin``, when a browser sent one, must be a loopback origin or an allowed one, and its
body must be declared JSON (415 otherwise).

Keys are compared in constant time and never logged; a body larger than the cap is
refused as soon as its declared or received length passes it, before it is decoded,
and one that does not arrive within the body timeout is refused (408), not held.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
from functools import lru_cache
from typing import Any

from pydantic import SecretStr
from starlette.requests import Request

from agentfsm.core.errors import (
    AuthError,
    BodyTimeout,
    BodyTooLarge,
    NotAllowedOrigin,
    RequestError,
    UnsupportedMediaType,
    UsageError,
)
from agentfsm.core.client_json import load_client_json

__all__ = [
    "AuthError",
    "BodyTimeout",
    "BodyTooLarge",
    "check_api_key",
    "check_bind",
    "check_host_and_origin",
    "host_allowed",
    "is_loopback",
    "presented_key",
    "read_json_body",
]


def presented_key(request: Request) -> str | None:
    """The key a client sent: ``Authorization: Bearer KEY`` or ``x-api-key: KEY``."""
    auth = request.headers.get("authorization")
    if auth:
        scheme, _, value = auth.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip()
    key = request.headers.get("x-api-key")
    return key.strip() if key else None


def check_api_key(request: Request, expected: SecretStr | None) -> None:
    """Raise :class:`AuthError` unless ``expected`` is None or the client sent it."""
    if expected is None:
        return
    given = presented_key(request)
    # compare_digest on bytes: constant time whatever the lengths or contents
    wanted = expected.get_secret_value().encode("utf-8")
    if given is None or not hmac.compare_digest(given.encode("utf-8"), wanted):
        raise AuthError()


def _name_of(host: str) -> str:
    """The host name of a ``Host`` value or of an origin's authority (no port, lower case)."""
    host = host.strip().lower()
    if host.startswith("["):  # [::1]:8765
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


@lru_cache(maxsize=256)
def _loopback_name(name: str) -> bool:
    """Whether ``name`` (a ``Host`` or origin's host) names this machine; kept for the
    names seen last (a client sends the same ``Host`` on every request, and parsing it
    as an address costs ~30 µs)."""
    return name == "localhost" or name.endswith(".localhost") or is_loopback(name)


def host_allowed(name: str, allowed: tuple[str, ...]) -> bool:
    """Whether host ``name`` is a loopback name or matches ``allowed`` (names, ``*.suffix``, ``*``)."""
    if _loopback_name(name):
        return True
    for pattern in allowed:
        pattern = pattern.strip().lower()
        if pattern == "*" or pattern == name or (pattern.startswith("*.") and name.endswith(pattern[1:])):
            return True
    return False


def check_host_and_origin(
    request: Request, allowed_hosts: tuple[str, ...] | None, allowed_origins: tuple[str, ...]
) -> None:
    """Raise :class:`NotAllowedOrigin` for a ``Host`` or ``Origin`` not allowed.

    ``allowed_hosts`` None: any host (clients must send a key), else loopback names and
    those listed. An ``Origin`` is allowed when its host is a loopback name or it is
    listed in ``allowed_origins`` (an origin such as ``https://app.example``, or ``*``).
    """
    host = request.headers.get("host")
    if host is not None and allowed_hosts is not None and not host_allowed(_name_of(host), allowed_hosts):
        raise NotAllowedOrigin("Host", host)
    origin = request.headers.get("origin")
    if origin is None:
        return  # not a browser, or a same-origin GET
    value = origin.strip().lower().rstrip("/")
    if "*" in allowed_origins or value in (o.strip().lower().rstrip("/") for o in allowed_origins):
        return
    scheme, sep, authority = value.partition("://")
    if not (sep and scheme in ("http", "https") and _loopback_name(_name_of(authority))):
        raise NotAllowedOrigin("Origin", origin)


def _check_json_type(request: Request) -> None:
    """A body declared JSON (``application/json`` or ``application/*+json``), else 415."""
    declared = request.headers.get("content-type")
    media = (declared or "").split(";", 1)[0].strip().lower()
    if media != "application/json" and not (media.startswith("application/") and media.endswith("+json")):
        raise UnsupportedMediaType(declared)


async def read_json_body(
    request: Request, limit: int, timeout: float | None = None, mended: list[str] | None = None
) -> Any:
    """The request body decoded as JSON; :class:`BodyTooLarge` past ``limit`` bytes;
    :class:`UnsupportedMediaType` unless it is declared JSON.

    :class:`BodyTimeout` when the whole body has not arrived within ``timeout`` seconds:
    a sender that stalls mid-body would otherwise hold its connection forever.

    Decoded within the limits of :func:`~agentfsm.core.client_json.load_client_json`
    (depth, integers in the 64-bit range, finite numbers, no lone surrogates): a
    :class:`RequestError` otherwise. With ``mended``, a lone surrogate is read as U+FFFD
    and said there.
    """
    _check_json_type(request)
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(limit)
    received = bytearray()
    try:
        async with asyncio.timeout(timeout):
            async for chunk in request.stream():
                received += chunk
                if len(received) > limit:
                    raise BodyTooLarge(limit)
    except TimeoutError:
        raise BodyTimeout(timeout or 0.0) from None
    if not received.strip():
        raise RequestError("the request body is empty; send a JSON object")
    return load_client_json(bytes(received), int64=True, mended=mended)  # what an upstream (and orjson) can read


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the proxy reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, api_key: str | None) -> None:
    """Refuse to listen beyond loopback without an API key (:class:`UsageError`)."""
    if not is_loopback(host) and not api_key:
        raise UsageError(
            f"refusing to bind {host!r} without an API key: anyone who can reach it could "
            "use the upstream; pass --api-key (or AGENTFSM_API_KEY), or bind 127.0.0.1"
        )
