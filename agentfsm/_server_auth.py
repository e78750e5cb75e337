"""The proxy's safety edge: API-key checks, a capped body reader, and the bind rule.

Keys are compared in constant time and never logged; a body larger than the cap is
refused as soon as its declared or received length passes it, before it is decoded.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from typing import Any

from starlette.requests import Request

from agentfsm.errors import RequestError, UsageError

__all__ = [
    "AuthError",
    "BodyTooLarge",
    "check_api_key",
    "check_bind",
    "is_loopback",
    "presented_key",
    "read_json_body",
]


class BodyTooLarge(RequestError):
    """The request body is larger than the proxy accepts (HTTP 413)."""

    status_code = 413

    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(f"request body exceeds the limit of {limit} bytes")


class AuthError(RequestError):
    """No API key, or a wrong one (HTTP 401)."""

    status_code = 401

    def __init__(self) -> None:
        super().__init__("invalid or missing API key (send 'Authorization: Bearer KEY' or 'x-api-key: KEY')")


def presented_key(request: Request) -> str | None:
    """The key a client sent: ``Authorization: Bearer KEY`` or ``x-api-key: KEY``."""
    auth = request.headers.get("authorization")
    if auth:
        scheme, _, value = auth.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip()
    key = request.headers.get("x-api-key")
    return key.strip() if key else None


def check_api_key(request: Request, expected: str | None) -> None:
    """Raise :class:`AuthError` unless ``expected`` is None or the client sent it."""
    if expected is None:
        return
    given = presented_key(request)
    # compare_digest on bytes: constant time whatever the lengths or contents
    if given is None or not hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8")):
        raise AuthError()


async def read_json_body(request: Request, limit: int) -> Any:
    """The request body decoded as JSON; :class:`BodyTooLarge` past ``limit`` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(limit)
    received = bytearray()
    async for chunk in request.stream():
        received += chunk
        if len(received) > limit:
            raise BodyTooLarge(limit)
    if not received.strip():
        raise RequestError("the request body is empty; send a JSON object")
    try:
        return json.loads(received)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RequestError(f"the request body is not valid JSON: {exc}") from exc


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
