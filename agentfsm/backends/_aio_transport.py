"""The async connection pool: httpx's API over aiohttp's connector (``httpx-aiohttp``).

httpcore's async pool spends CPU per request that grows with the number of open
connections: at concurrency 64 against a 50 ms upstream it took ~9 ms of client CPU
per request (110 requests/s on 2 cores), where aiohttp's connector takes ~0.6 ms
(bench/bench_batch.py measures both paths' floor). The backend keeps httpx's
request/response API and its error types; this module only swaps the transport and
maps aiohttp's errors onto the httpx types the backend classifies (the library maps
every dropped connection to ``ConnectTimeout``, which would read as "never reached").

Imported lazily (aiohttp costs ~100 ms to import), on the first async request.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import httpx
from aiohttp.helpers import get_env_proxy_for_url
from httpx_aiohttp import AiohttpTransport
from yarl import URL

__all__ = ["async_transport"]


def _as_httpx(exc: BaseException) -> httpx.TransportError:
    """The httpx error for an aiohttp (or asyncio) failure, by what actually happened."""
    detail = str(exc) or type(exc).__name__
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return httpx.ConnectTimeout(detail)
    if isinstance(exc, (aiohttp.SocketTimeoutError, aiohttp.ServerTimeoutError, asyncio.TimeoutError)):
        return httpx.ReadTimeout(detail)
    if isinstance(exc, aiohttp.ClientConnectorError):
        return httpx.ConnectError(detail)
    if isinstance(exc, (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError)):
        return httpx.RemoteProtocolError(detail)
    if isinstance(exc, aiohttp.ClientResponseError):
        return httpx.RemoteProtocolError(detail)
    if isinstance(exc, (aiohttp.ClientOSError, ConnectionError)):
        return httpx.ReadError(detail)
    return httpx.TransportError(detail)


def _aiohttp_cause(exc: BaseException) -> BaseException | None:
    if isinstance(exc, (aiohttp.ClientError, asyncio.TimeoutError, ConnectionError)):
        return exc
    cause = exc.__cause__
    if isinstance(cause, (aiohttp.ClientError, asyncio.TimeoutError, ConnectionError)):
        return cause
    return None


class _Stream(httpx.AsyncByteStream):
    """The response body, its failures raised as httpx errors."""

    def __init__(self, inner: httpx.AsyncByteStream) -> None:
        self._inner = inner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._inner:
                yield chunk
        except Exception as exc:  # noqa: BLE001 - re-raised as its httpx type
            cause = _aiohttp_cause(exc)
            if cause is None:
                raise
            raise _as_httpx(cause) from cause

    async def aclose(self) -> None:
        await self._inner.aclose()


class _Transport(AiohttpTransport):
    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        try:
            response = await super().handle_async_request(request)
        except Exception as exc:  # noqa: BLE001 - re-raised as its httpx type
            cause = _aiohttp_cause(exc)
            if cause is None:
                raise
            raise _as_httpx(cause) from cause
        stream = response.stream
        assert isinstance(stream, httpx.AsyncByteStream)
        response.stream = _Stream(stream)
        return response


def _env_proxy(base_url: str) -> httpx.Proxy | None:
    """The environment's proxy for ``base_url`` (``HTTP(S)_PROXY``, ``NO_PROXY``), read once:
    aiohttp's ``trust_env`` reads the environment again on every request."""
    try:
        url, auth = get_env_proxy_for_url(URL(base_url))
    except LookupError:
        return None
    return httpx.Proxy(str(url), auth=(auth.login, auth.password) if auth is not None else None)


def async_transport(limits: httpx.Limits, base_url: str) -> httpx.AsyncBaseTransport:
    """A pooled aiohttp transport for ``base_url``, honouring ``limits`` and the
    environment's proxy settings."""
    keepalive = limits.keepalive_expiry

    def session() -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(
            limit=limits.max_connections or 0,
            keepalive_timeout=keepalive if keepalive is not None else 5.0,
        )
        return aiohttp.ClientSession(connector=connector)

    return _Transport(limits=limits, client=session, proxy=_env_proxy(base_url))
