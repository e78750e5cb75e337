"""The async seam of the HTTP backends: one POST of a JSON body, and the answer it opens.

Two implementations: :class:`~agentfsm.backends._aio_transport.AioUpstream` (aiohttp,
called directly: the default) and :class:`HttpxUpstream` (an ``httpx.AsyncClient``,
used when the caller hands the backend its own ``async_transport``, e.g. httpx's
``MockTransport`` in a test). Both raise httpx's error types, which
:func:`~agentfsm.backends._transport.map_transport_error` and the retry policy read.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Mapping
from typing import NamedTuple, Protocol

import httpx

from agentfsm.core._types import JSONObject

__all__ = ["AsyncUpstream", "AttemptTimeouts", "HttpxUpstream", "UpstreamResponse"]


class AttemptTimeouts(NamedTuple):
    """Seconds one attempt may take: to connect, between two reads, and to get a pooled
    connection (the time left before the call's deadline)."""

    connect: float
    read: float
    pool: float


class UpstreamResponse(Protocol):
    """An upstream's answer, its body not read yet (``httpx.Response`` is one)."""

    @property
    def status_code(self) -> int:
        """The HTTP status."""

    @property
    def headers(self) -> Mapping[str, str]:
        """The response headers (names case-insensitive)."""

    def aiter_raw(self) -> AsyncIterator[bytes]:
        """The body as sent, chunk by chunk as it arrives (not decompressed:
        :class:`~agentfsm.backends._body.BoundedBody` decodes it within its bound)."""

    def aclose(self) -> Awaitable[None]:
        """Release the connection (closed when the body was not read to its end)."""


class AsyncUpstream(Protocol):
    """A pool of connections to one upstream."""

    async def post_json(self, path: str, payload: JSONObject, timeouts: AttemptTimeouts) -> UpstreamResponse:
        """``POST`` ``payload`` to ``path`` (relative to the base URL); the answer, unread."""

    async def aclose(self) -> None:
        """Close every connection of the pool."""


class _ReadAlready:
    """An httpx response whose body was read before it was handed over (a transport that
    answers with content, as ``MockTransport`` does): its body, decoded, as the raw one."""

    def __init__(self, response: httpx.Response) -> None:
        self._response = response
        self.status_code = response.status_code
        self.headers = {k: v for k, v in response.headers.items() if k.lower() != "content-encoding"}

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        """The content, once."""
        yield self._response.content

    async def aclose(self) -> None:
        """Close the response."""
        await self._response.aclose()


class HttpxUpstream:
    """:class:`AsyncUpstream` over an ``httpx.AsyncClient``."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client
        #: resolved URLs by path (a relative URL is parsed twice per request otherwise)
        self._urls: dict[str, httpx.URL] = {}

    async def post_json(self, path: str, payload: JSONObject, timeouts: AttemptTimeouts) -> UpstreamResponse:
        """Send the request; the response is left open for its body to be read."""
        url = self._urls.get(path)
        if url is None:
            url = self._urls[path] = self.client.build_request("POST", path).url
        timeout = httpx.Timeout(
            connect=timeouts.connect, read=timeouts.read, write=timeouts.read, pool=timeouts.pool
        )
        request = self.client.build_request("POST", url, json=payload, timeout=timeout)
        response = await self.client.send(request, stream=True)
        return response if not response.is_stream_consumed else _ReadAlready(response)

    async def aclose(self) -> None:
        """Close the client's pool."""
        await self.client.aclose()
