"""The default async connection pool: aiohttp's client, called directly.

httpcore's async pool spends CPU per request that grows with the number of open
connections (~9 ms a request at concurrency 64); httpx's request and response models
over aiohttp's connector (``httpx-aiohttp``) still cost ~0.45 ms of CPU a request,
about three times a bare aiohttp call, mostly in building the request, its cookie
handling and the response's byte stream. This module sends the one request the
backend needs (a JSON ``POST``) with aiohttp alone and maps aiohttp's errors onto the
httpx types the backend classifies (:func:`~agentfsm.backends._transport.map_transport_error`;
aiohttp's own names would read a dropped connection as a connect timeout).

Imported lazily (aiohttp costs ~100 ms to import), on the first async request.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import NoReturn

import aiohttp
import httpx
import orjson
from aiohttp.helpers import get_env_proxy_for_url
from multidict import CIMultiDictProxy
from yarl import URL

from agentfsm.backends._upstream import AttemptTimeouts
from agentfsm.core._types import JSONObject

__all__ = ["AioResponse", "AioUpstream"]

_FAILURES = (aiohttp.ClientError, asyncio.TimeoutError, ConnectionError)


def _as_httpx(exc: BaseException) -> httpx.TransportError:
    """The httpx error for an aiohttp (or asyncio) failure, by what actually happened."""
    detail = str(exc) or type(exc).__name__
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return httpx.ConnectTimeout(detail)
    if isinstance(exc, (aiohttp.SocketTimeoutError, aiohttp.ServerTimeoutError, asyncio.TimeoutError)):
        return httpx.ReadTimeout(detail)
    if isinstance(exc, (aiohttp.ClientProxyConnectionError, aiohttp.ClientHttpProxyError)):
        return httpx.ProxyError(detail)
    if isinstance(exc, aiohttp.ClientConnectorError):
        return httpx.ConnectError(detail)
    if isinstance(exc, (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError)):
        return httpx.RemoteProtocolError(detail)
    if isinstance(exc, aiohttp.ClientResponseError):
        return httpx.RemoteProtocolError(detail)
    if isinstance(exc, (aiohttp.ClientOSError, ConnectionError)):
        return httpx.ReadError(detail)
    if isinstance(exc, (aiohttp.InvalidURL, aiohttp.NonHttpUrlClientError)):
        return httpx.UnsupportedProtocol(detail)
    return httpx.TransportError(detail)


def _raise_mapped(exc: Exception) -> NoReturn:
    if isinstance(exc, _FAILURES):
        raise _as_httpx(exc) from exc
    raise exc


class AioResponse:
    """An aiohttp response behind :class:`~agentfsm.backends._upstream.UpstreamResponse`."""

    __slots__ = ("_response", "headers", "status_code")

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response
        self.status_code: int = response.status
        self.headers: CIMultiDictProxy[str] = response.headers

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        """The body as sent (the session does not decompress), each chunk as soon as it arrives."""
        try:
            async for chunk in self._response.content.iter_any():
                yield chunk
        except Exception as exc:  # noqa: BLE001 - re-raised as its httpx type
            _raise_mapped(exc)

    async def aclose(self) -> None:
        """Give the connection back to the pool (closed when the body was not read whole)."""
        self._response.release()
        await self._response.wait_for_close()  # the request body's writer, if still running


class AioUpstream:
    """One upstream's pool: ``limit`` connections, kept alive ``keepalive`` seconds;
    ``headers`` on every request; the environment's proxy for ``base_url``."""

    def __init__(
        self, base_url: str, headers: Mapping[str, str], *, limit: int, keepalive: float,
        params: Sequence[tuple[str, str]] = (),
    ) -> None:
        self._base = base_url.rstrip("/") + "/"
        #: the base URL's query parameters, sent with every request
        self._params = tuple(params)
        self._headers = {**headers, "content-type": "application/json"}
        self._limit = limit
        self._keepalive = keepalive
        self._proxy, self._proxy_auth = _env_proxy(base_url)
        self._urls: dict[str, URL] = {}
        #: one session per event loop (its connections cannot serve another): threads that
        #: each run an agent on one backend each have their own
        self._sessions: dict[asyncio.AbstractEventLoop, aiohttp.ClientSession] = {}

    async def _open(self, loop: asyncio.AbstractEventLoop) -> aiohttp.ClientSession:
        # made on the first request, inside the loop that will use it; the sessions of
        # loops that have ended (asyncio.run called again) are let go
        connector = aiohttp.TCPConnector(limit=self._limit, keepalive_timeout=self._keepalive)
        # in place before any await: a request arriving meanwhile uses it
        session = self._sessions[loop] = aiohttp.ClientSession(
            connector=connector,
            headers=self._headers,
            cookie_jar=aiohttp.DummyCookieJar(),  # an API client keeps no cookies
            auto_decompress=False,  # decoded within the reply's bound (backends._body)
        )
        await self._drop_ended()
        return session

    async def _drop_ended(self) -> None:
        for ended in [loop for loop in list(self._sessions) if loop.is_closed()]:
            # nothing of it can run any more: this only marks it closed, unwarned (another
            # thread's loop may have let it go first)
            session = self._sessions.pop(ended, None)
            if session is not None:
                await session.close()

    async def post_json(self, path: str, payload: JSONObject, timeouts: AttemptTimeouts) -> AioResponse:
        """Send ``payload`` (JSON, as httpx encodes it) to ``path``; the answer, body unread."""
        loop = asyncio.get_running_loop()
        session = self._sessions.get(loop)
        if session is None:
            session = await self._open(loop)
        url = self._urls.get(path)
        if url is None:
            url = URL(self._base + path)
            url = self._urls[path] = url.update_query(self._params) if self._params else url
        body = orjson.dumps(payload)  # compact UTF-8 (GenerationOptions refuses NaN, which orjson writes as null)
        timeout = aiohttp.ClientTimeout(
            total=None, connect=timeouts.pool, sock_connect=timeouts.connect, sock_read=timeouts.read
        )
        try:
            response = await session.post(
                url, data=body, timeout=timeout, allow_redirects=False,
                proxy=self._proxy, proxy_auth=self._proxy_auth,
            )
        except Exception as exc:  # noqa: BLE001 - re-raised as its httpx type
            _raise_mapped(exc)
        return AioResponse(response)

    async def aclose(self) -> None:
        """Close this loop's pool (a later request opens a new one) and those of loops that
        have ended; a pool of another loop that still runs is its loop's to close."""
        session = self._sessions.pop(asyncio.get_running_loop(), None)
        if session is not None:
            await session.close()
        await self._drop_ended()


def _env_proxy(base_url: str) -> tuple[URL | None, aiohttp.BasicAuth | None]:
    """The environment's proxy for ``base_url`` (``HTTP(S)_PROXY``, ``NO_PROXY``), read once:
    aiohttp's ``trust_env`` reads the environment again on every request."""
    try:
        return get_env_proxy_for_url(URL(base_url))
    except LookupError:
        return None, None
