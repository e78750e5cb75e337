"""One attempt at ``POST chat/completions`` (sync and async), and the fallbacks.

An attempt sends one request and returns the answer (a parsed completion, or the open
streamed response) or raises: the retry policy of :mod:`._transport` decides whether
another attempt follows. A refusal the request can be changed to avoid is raised as
:class:`Rejected`, which no policy retries: ``response_format: json_schema`` (the
backend switches its schema form), ``stream_options`` (it stops asking for stream
usage), a ``max_tokens`` the context cannot hold (the request is sent again with what
the upstream says is left). :func:`with_fallback` catches it, lets the backend decide
the next payload, and sends it (each kind at most once per call).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal, NoReturn, TypeAlias, TypeVar

import httpx
from loguru import logger

from agentfsm.backends._payload import context_error, rejects_json_schema, rejects_stream_options
from agentfsm.backends._sse import parse_chat_completion
from agentfsm.backends._upstream import AsyncUpstream, UpstreamResponse
from agentfsm.backends._body import aread_body, read_body, reply_limit
from agentfsm.backends._transport import (
    CallState,
    Timeouts,
    bounded,
    map_transport_error,
    parse_retry_after,
)
from agentfsm.core._types import JSONObject
from agentfsm.core.backend import Completion
from agentfsm.core.errors import BackendHTTPError, MaxTokensTooLarge

__all__ = ["ChatAttempts", "Fallback", "Rejected", "awith_fallback", "limit_for", "max_tokens_sent", "with_fallback"]

_T = TypeVar("_T")
#: how much of an error answer is read (enough for any message; a flood is cut)
_ERROR_BODY_LIMIT = 64 * 1024


#: what an upstream refused that a changed request can do without
RejectedPart: TypeAlias = Literal["json_schema", "stream_options", "max_tokens"]


class Rejected(Exception):
    """Internal: the upstream refused a part of the request (not retried as it was).
    ``error`` is what the client gets when no fallback applies."""

    def __init__(self, part: RejectedPart, error: BackendHTTPError | MaxTokensTooLarge) -> None:
        super().__init__(str(error))
        self.part = part
        self.error = error


#: the backend's decision after a refusal: the next payload from the refused one, or None
#: when it has none (the refusal is raised)
Fallback: TypeAlias = Callable[[Rejected, JSONObject], "JSONObject | None"]


@dataclass(frozen=True)
class ChatAttempts:
    """Single attempts against one upstream; the backend owns the pools and the key.

    ``falls_back``: a json_schema refusal raises :class:`Rejected` (mode ``auto``)
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
                    self._fail(response, read_body(response, call, _ERROR_BODY_LIMIT, cut=True), payload, call)
                body = read_body(response, call, limit_for(payload))
        except httpx.HTTPError as exc:
            raise map_transport_error(exc, self.redact) from exc
        return parse_chat_completion(body, self.redact)

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
                    body = read_body(response, call, _ERROR_BODY_LIMIT, cut=True)
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
                    body = await aread_body(response, call, _ERROR_BODY_LIMIT, cut=True)
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
            body = await aread_body(response, call, limit_for(payload))
        except httpx.HTTPError as exc:
            raise map_transport_error(exc, self.redact) from exc
        finally:
            await response.aclose()
        return parse_chat_completion(body, self.redact)

    def _fail(
        self, response: UpstreamResponse, body: bytes, payload: JSONObject, call: CallState
    ) -> NoReturn:
        retry_after = parse_retry_after(response.headers)
        text = self.redact(body.decode("utf-8", "replace"))
        error = BackendHTTPError(response.status_code, text, retry_after=retry_after)
        too_long = context_error(error.status_code, error.body)
        if isinstance(too_long, MaxTokensTooLarge) and "max_tokens" in payload:
            raise Rejected("max_tokens", too_long) from error
        if too_long is not None:
            raise too_long from error
        if self.falls_back and rejects_json_schema(error, payload):
            raise Rejected("json_schema", error)
        if rejects_stream_options(error, payload):
            raise Rejected("stream_options", error)
        call.retry_after = retry_after
        raise error

    def _log(self, payload: JSONObject) -> None:
        logger.debug(
            "POST {}/chat/completions model={} stream={} max_tokens={}",
            self.base_url, self.model, payload.get("stream"), payload.get("max_tokens"),
        )


def limit_for(payload: JSONObject) -> int:
    """The most bytes the answer to ``payload`` may take (without a ``max_tokens``, the
    upstream's own bound applies, and ours is the cap)."""
    max_tokens = payload.get("max_tokens")
    return reply_limit(max_tokens if isinstance(max_tokens, int) else None, bool(payload.get("stream")))


def _next(rejected: Rejected, sent: JSONObject, fall_back: Fallback, tried: set[str]) -> JSONObject:
    """The payload after ``rejected``, or the refusal raised (a part refused twice, or one
    the backend has no answer to)."""
    payload = None if rejected.part in tried else fall_back(rejected, sent)
    tried.add(rejected.part)
    if payload is None:
        raise rejected.error from None
    return payload


def with_fallback(
    run: Callable[[JSONObject], _T], payload: JSONObject, fall_back: Fallback
) -> tuple[_T, JSONObject]:
    """``run(payload)``; on :class:`Rejected`, run what ``fall_back`` makes of it (each
    refused part once; a second refusal of it raises the upstream's error). Returns the
    answer and the payload that got it."""
    tried: set[str] = set()
    while True:
        try:
            return run(payload), payload
        except Rejected as rejected:
            payload = _next(rejected, payload, fall_back, tried)


async def awith_fallback(
    run: Callable[[JSONObject], Awaitable[_T]], payload: JSONObject, fall_back: Fallback
) -> tuple[_T, JSONObject]:
    """Async :func:`with_fallback`."""
    tried: set[str] = set()
    while True:
        try:
            return await run(payload), payload
        except Rejected as rejected:
            payload = _next(rejected, payload, fall_back, tried)


def max_tokens_sent(asked: JSONObject, sent: JSONObject) -> int | None:
    """The ``max_tokens`` of ``sent`` when a fallback changed ``asked``'s (None: unchanged)."""
    limit = sent.get("max_tokens")
    return limit if isinstance(limit, int) and limit != asked.get("max_tokens") else None
