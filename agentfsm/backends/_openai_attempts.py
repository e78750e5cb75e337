"""One attempt at ``POST chat/completions`` (sync and async), and the json_schema fallback.

An attempt sends one request and returns the answer (a parsed completion, or the open
streamed response) or raises: the retry policy of :mod:`._transport` decides whether
another attempt follows. A refusal of ``response_format: json_schema`` is raised as
:class:`SchemaRejected`, which no policy retries; :func:`with_fallback` catches it,
lets the backend switch its schema form once, and sends the rebuilt payload.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import NoReturn, TypeVar

import httpx
from loguru import logger

from agentfsm.backends._payload import context_error, rejects_json_schema
from agentfsm.backends._sse import parse_chat_completion
from agentfsm.backends._upstream import AsyncUpstream, UpstreamResponse
from agentfsm.backends._transport import (
    CallState,
    Timeouts,
    aread_body,
    bounded,
    map_transport_error,
    parse_retry_after,
    read_body,
)
from agentfsm.core._types import JSONObject
from agentfsm.core.backend import Completion
from agentfsm.core.errors import BackendHTTPError

__all__ = ["ChatAttempts", "SchemaRejected", "awith_fallback", "with_fallback"]

_T = TypeVar("_T")
#: how much of an error answer is read (enough for any message; a flood is cut)
_ERROR_BODY_LIMIT = 64 * 1024


class SchemaRejected(Exception):
    """Internal: the upstream refused ``response_format: json_schema`` (not retried)."""

    def __init__(self, error: BackendHTTPError) -> None:
        super().__init__(str(error))
        self.error = error


@dataclass(frozen=True)
class ChatAttempts:
    """Single attempts against one upstream; the backend owns the pools and the key.

    ``falls_back``: a json_schema refusal raises :class:`SchemaRejected` (mode ``auto``)
    instead of the HTTP error. ``redact`` removes the key from any text that leaves.
    """

    base_url: str
    model: str
    timeouts: Timeouts
    falls_back: bool
    redact: Callable[[str], str] = field(repr=False)
    client: Callable[[], httpx.Client] = field(repr=False)
    aclient: Callable[[], AsyncUpstream] = field(repr=False)
    #: the endpoint's URL, as the first client resolved it against its base URL (every
    #: pool of one backend has the same base); a relative URL is parsed twice per request
    _url: list[httpx.URL] = field(default_factory=list, repr=False, compare=False)

    def _chat_url(self, client: httpx.Client) -> httpx.URL:
        if not self._url:
            self._url.append(client.build_request("POST", "chat/completions").url)
        return self._url[0]

    def complete(self, payload: JSONObject, call: CallState) -> Completion:
        """One blocking request, its whole body parsed as a chat completion."""
        call.retry_after = None
        self._log(payload)
        client = self.client()
        try:
            with client.stream(
                "POST", self._chat_url(client), json=payload, timeout=call.httpx_timeout(self.timeouts)
            ) as response:
                if response.status_code >= 400:
                    self._fail(response, read_body(response, call, _ERROR_BODY_LIMIT), payload, call)
                body = read_body(response, call)
        except httpx.HTTPError as exc:
            raise map_transport_error(exc, self.redact) from exc
        return parse_chat_completion(body)

    def open_stream(self, payload: JSONObject, call: CallState) -> httpx.Response:
        """One blocking request, its successful response left open for streaming."""
        call.retry_after = None
        self._log(payload)
        client = self.client()
        request = client.build_request(
            "POST", self._chat_url(client), json=payload, timeout=call.httpx_timeout(self.timeouts)
        )
        try:
            response = client.send(request, stream=True)
            if response.status_code >= 400:
                try:
                    body = read_body(response, call, _ERROR_BODY_LIMIT)
                finally:
                    response.close()
                self._fail(response, body, payload, call)
        except httpx.HTTPError as exc:
            raise map_transport_error(exc, self.redact) from exc
        return response

    async def aopen_stream(self, payload: JSONObject, call: CallState) -> UpstreamResponse:
        """Async :meth:`open_stream`; every wait is bounded by the call's deadline."""
        return await bounded(lambda: self._aopen(payload, call), call)

    async def _aopen(self, payload: JSONObject, call: CallState) -> UpstreamResponse:
        """Send the request and check its status (the caller bounds the wait)."""
        call.retry_after = None
        self._log(payload)
        upstream = self.aclient()
        timeouts = call.attempt_timeouts(self.timeouts)
        try:
            response = await upstream.post_json("chat/completions", payload, timeouts)
            if response.status_code >= 400:
                try:
                    body = await aread_body(response, call, _ERROR_BODY_LIMIT)
                finally:
                    await response.aclose()
                self._fail(response, body, payload, call)
        except httpx.HTTPError as exc:
            raise map_transport_error(exc, self.redact) from exc
        return response

    async def acomplete(self, payload: JSONObject, call: CallState) -> Completion:
        """Async :meth:`complete`: sending, status and body under one bound (the deadline)."""
        return await bounded(lambda: self._acomplete(payload, call), call)

    async def _acomplete(self, payload: JSONObject, call: CallState) -> Completion:
        response = await self._aopen(payload, call)
        try:
            body = await response.aread()
        except httpx.HTTPError as exc:
            raise map_transport_error(exc, self.redact) from exc
        finally:
            await response.aclose()
        return parse_chat_completion(body)

    def _fail(
        self, response: UpstreamResponse, body: bytes, payload: JSONObject, call: CallState
    ) -> NoReturn:
        retry_after = parse_retry_after(response.headers)
        text = self.redact(body.decode("utf-8", "replace"))
        error = BackendHTTPError(response.status_code, text, retry_after=retry_after)
        too_long = context_error(error.status_code, error.body)
        if too_long is not None:
            raise too_long from error
        if self.falls_back and rejects_json_schema(error, payload):
            raise SchemaRejected(error)
        call.retry_after = retry_after
        raise error

    def _log(self, payload: JSONObject) -> None:
        logger.debug(
            "POST {}/chat/completions model={} stream={} max_tokens={}",
            self.base_url, self.model, payload.get("stream"), payload.get("max_tokens"),
        )


def with_fallback(
    run: Callable[[JSONObject], _T],
    payload: Callable[[], JSONObject],
    fall_back: Callable[[SchemaRejected], None],
) -> _T:
    """``run(payload())``; on :class:`SchemaRejected`, ``fall_back`` and run a rebuilt
    payload once (a second refusal raises the upstream's error)."""
    try:
        return run(payload())
    except SchemaRejected as rejected:
        fall_back(rejected)
    try:
        return run(payload())
    except SchemaRejected as rejected:
        raise rejected.error from None


async def awith_fallback(
    run: Callable[[JSONObject], Awaitable[_T]],
    payload: Callable[[], JSONObject],
    fall_back: Callable[[SchemaRejected], None],
) -> _T:
    """Async :func:`with_fallback`."""
    try:
        return await run(payload())
    except SchemaRejected as rejected:
        fall_back(rejected)
    try:
        return await run(payload())
    except SchemaRejected as rejected:
        raise rejected.error from None
