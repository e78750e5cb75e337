"""The proxy's safety edge: API-key checks, a capped body reader, and the bind rule.

Keys are compared in constant time and never logged; a body larger than the cap is
refused as soon as its declared or received length passes it, before it is decoded,
and one that does not arrive within the body timeout is refused (408), not held.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
from typing import Any

from pydantic import SecretStr
from starlette.requests import Request

from agentfsm.core.errors import AuthError, BodyTimeout, BodyTooLarge, RequestError, UsageError
from agentfsm.protocols.client_json import load_client_json

__all__ = [
    "AuthError",
    "BodyTimeout",
    "BodyTooLarge",
    "check_api_key",
    "check_bind",
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


async def read_json_body(request: Request, limit: int, timeout: float | None = None) -> Any:
    """The request body decoded as JSON; :class:`BodyTooLarge` past ``limit`` bytes.

    :class:`BodyTimeout` when the whole body has not arrived within ``timeout`` seconds:
    a sender that stalls mid-body would otherwise hold its connection forever.

    Decoded within the limits of :func:`~agentfsm.protocols.client_json.load_client_json`
    (depth, integer length, finite numbers, no lone surrogates): a :class:`RequestError` otherwise.
    """
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
    return load_client_json(bytes(received))


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
