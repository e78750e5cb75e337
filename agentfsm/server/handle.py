"""One proxy request, end to end: checked, normalized, routed, fitted, answered or streamed.

:func:`serve` is what each of :mod:`agentfsm.server.app`'s model endpoints runs: the
client checked (host, origin, key), the body read within its limits and normalized by
the request's :class:`~agentfsm.server.wire.Wire` (the client's mistakes are its 400),
the model's backend and settings found, the prompt fitted to the context, then one
deciding turn (:mod:`agentfsm.server.exchange`) answered whole (:mod:`agentfsm.server.reply`) or streamed. Errors leave
in the caller's protocol shape; an unexpected one is a 500 naming the proxy, never the
client. The request holds a place in its client's share of its model's upstream while it
waits for it (:class:`~agentfsm.server.limits.ClientShare`).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import orjson
from loguru import logger
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse as _StarletteJSON
from starlette.responses import Response, StreamingResponse

from agentfsm.core.backend import Backend, counts_tokens
from agentfsm.core.client_json import LONE_SURROGATE
from agentfsm.core.errors import (
    AgentFSMError,
    BackendHTTPError,
    BodyTimeout,
    BodyTooLarge,
    ClientGone,
    NothingToDecide,
    PromptTooLong,
    RequestError,
    RunError,
    TooManyTools,
    TranscriptError,
    UsageError,
)
from agentfsm.protocols import IGNORED_HEADER, NormalizedRequest, settle
from agentfsm.protocols.sampling import ignored_header
from agentfsm.server.auth import check_api_key, check_host_and_origin, read_json_body
from agentfsm.server.exchange import Exchange
from agentfsm.server.fit import fit_exchange
from agentfsm.server.limits import ClientShare
from agentfsm.server.reply import Reply, complete, until_disconnect
from agentfsm.server.settings import Settings
from agentfsm.server.streaming import SHUT_DOWN, stream_events
from agentfsm.server.wire import Wire

__all__ = ["JSONResponse", "check_client", "error_response", "normalize", "off_loop", "serve"]

_R = TypeVar("_R")
#: status sent when the client went away (nobody reads it; it marks the access log)
_CLIENT_CLOSED = 499
_PRIME_GRACE = 1.0


class JSONResponse(_StarletteJSON):
    """Starlette's JSON response, rendered by orjson (compact UTF-8, as Starlette writes it)."""

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


async def serve(
    request: Request,
    wire: Wire,
    route: Callable[[NormalizedRequest], tuple[Backend, Settings]],
    settings: Settings,
    share: ClientShare,
    under_way: UnderWay,
) -> Response:
    under_way.enter()
    ex: Exchange | None = None
    client = request.client.host if request.client is not None else ""
    place = _Place(share, client)
    try:
        check_client(request, settings)
        mended: list[str] = []  # lone surrogates read as U+FFFD: named, not refused (one would fail every later turn)
        body = await read_json_body(request, settings.max_body_bytes, settings.body_timeout, mended)
        normalized = normalize(wire, body, settings)
        if mended:
            normalized = normalized.model_copy(update={"ignored": (*normalized.ignored, LONE_SURROGATE)})
        backend, settings = route(normalized)  # the model's own backend and settings (a 404 for an unknown name)
        place.upstream = id(backend)  # a share of each upstream apart: one that hangs holds none of another's
        normalized = settle(normalized, backend.capabilities)
        deadline = None
        if settings.request_timeout is not None:
            deadline = asyncio.get_running_loop().time() + settings.request_timeout
        ex = Exchange(backend, normalized, wire, settings, deadline=deadline)
        ex.open_transcript()
        if normalized.stream:
            fit = await off_loop(ex, fit_exchange)  # compacted, clamped, or PromptTooLong
            await until_disconnect(request, place.take(), deadline)
            return await _stream(request, ex, fit.prompt_tokens, place)
        if backend.capabilities.context_tokens is not None:
            # in an unknown context nothing is compacted, clamped or refused: the fit would
            # only measure the prompt (built in full, ~0.1 ms), which a whole answer never reports
            await off_loop(ex, fit_exchange)
        reply = await until_disconnect(request, _complete_in_place(place, ex), deadline)
        place.give_back()
        ex.end(reply)
        body = wire.response(
            model=ex.model,
            content=reply.content,
            calls=reply.calls,
            usage=ex.usage,
            response_id=ex.response_id,
            created=ex.created,
            finish_reason=reply.finish_reason,
            stop_sequence=reply.stop_sequence,
            custom_tools=ex.request.custom_tools,
            echo=ex.request.response_echo,
        )
        return JSONResponse(body, headers=_headers(ex))
    except ClientGone as gone:
        if ex is not None:
            ex.end(error=gone)
        return Response(status_code=_CLIENT_CLOSED)
    except asyncio.CancelledError as cancelled:
        # the server stopped before this request finished (serve's --shutdown-timeout
        # passed, or a second Ctrl-C): its transcript ends with run_end cancelled, cut off
        # where it was, and the client, still there, is told so in its protocol's shape
        if ex is not None:
            ex.end(error=cancelled)
        if not _stopped_here():
            raise
        return JSONResponse(wire.error(503, SHUT_DOWN), status_code=503, headers={"connection": "close"})
    except AgentFSMError as exc:
        if ex is not None:
            ex.end(error=exc)
        elif settings.watch is not None:
            settings.watch.rejected(wire.protocol, exc, wire.error_for(exc)[0])
        if isinstance(exc, UsageError):
            # settings were checked when the app was built: this one came from the request
            # (e.g. a tool schema the backend cannot turn into a grammar, or a history
            # that leaves nothing to decide)
            exc = RequestError(str(exc), param=wire.history_param if isinstance(exc, NothingToDecide) else None)
        elif isinstance(exc, PromptTooLong) and exc.param is None:
            exc.param = wire.history_param  # as OpenAI names it for context_length_exceeded
        return error_response(wire, exc, ex)
    except Exception as exc:
        logger.exception("unexpected error in {}", request.url.path)
        if ex is not None:
            ex.end(error=exc)
        return JSONResponse(wire.error(500, "internal error in the proxy"), status_code=500)
    finally:
        if not place.handed:
            place.give_back()


async def _complete_in_place(place: _Place, ex: Exchange) -> Reply:
    """The non-streamed answer, once the request's place is taken (one disconnect watcher
    over the wait and the work)."""
    await place.take()
    return await complete(ex)


class _Place:
    """This request's place in its client's share of the upstream (see ClientShare)."""

    __slots__ = ("client", "handed", "held", "share", "upstream")

    def __init__(self, share: ClientShare, client: str) -> None:
        self.share, self.client = share, client
        #: the upstream's backend (its id), once the request is routed
        self.upstream = 0
        self.held = self.handed = False

    async def take(self) -> None:
        await self.share.enter((self.client, self.upstream))
        self.held = True

    def give_back(self) -> None:
        if self.held:
            self.held = False
            self.share.leave((self.client, self.upstream))


class UnderWay:
    """The tasks answering requests now. Once the server's shutdown timeout has cancelled
    them, :meth:`ended` waits (bounded) for them to end before the upstream pools close:
    a pool closed under a stream still reading from it failed that stream with the
    transport's own error in place of the stop, and logged a traceback."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def enter(self) -> None:
        """Count the current task until it ends."""
        task = asyncio.current_task()
        if task is not None and task not in self._tasks:
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def ended(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the tasks under way to end."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout)


def _stopped_here() -> bool:
    """Whether the cancellation being handled was the server's stop (uvicorn cancels a
    request's task once the shutdown timeout passes), taken back so that the request can
    still answer: the task then ends on its own, as soon as the answer is written."""
    task = asyncio.current_task()
    return task is not None and task.uncancel() == 0


class _StreamWithPlace(StreamingResponse):
    """A stream that gives its request's place back when it ends, however it ends; one
    that the server's stop cut off has ended with the protocol's error event already
    (:mod:`agentfsm.server.streaming`), so the stop ends it without an error."""

    def __init__(self, *args: Any, place: _Place, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._place = place
        place.handed = True

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        except asyncio.CancelledError:
            if not _stopped_here():
                raise
        finally:
            self._place.give_back()


def check_client(request: Request, settings: Settings) -> None:
    """Host and Origin on the allow-lists, then the API key (when one is set)."""
    check_host_and_origin(request, settings.allowed_hosts, settings.allowed_origins)
    check_api_key(request, settings.api_key)


async def off_loop(ex: Exchange, measure: Callable[[Exchange], _R]) -> _R:
    """``measure(ex)`` in a worker thread where the backend counts tokens itself (its
    tokenizer may take a while); inline otherwise: the estimate (the first prompt built
    and its characters counted, ~50 µs) costs about what the thread hop would."""
    if counts_tokens(ex.backend):
        return await asyncio.to_thread(measure, ex)
    return measure(ex)


def normalize(wire: Wire, body: Any, settings: Settings) -> NormalizedRequest:
    """The body as a normalized request; whatever it gets wrong is the client's 400 (more
    tools than ``settings.max_tools`` too, counted before any is read)."""
    tools = body.get("tools") if isinstance(body, dict) else None
    if isinstance(tools, list) and len(tools) > settings.max_tools:
        raise TooManyTools(len(tools), settings.max_tools)
    try:
        return wire.normalize(body)
    except RequestError:
        raise
    except (UsageError, ValidationError, ValueError, TypeError) as exc:
        raise RequestError(f"invalid request: {_first_line(exc)}") from exc


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def error_response(wire: Wire, exc: AgentFSMError, ex: Exchange | None) -> Response:
    """``exc`` in the protocol's shape (logged whole: the client's message may leave out
    what concerns the proxy's operator alone, :func:`~agentfsm.protocols.common.client_message`)."""
    status, body = wire.error_for(exc, ex.model_entry if ex is not None else None)
    # the model entry and its backend: which upstream an operator has to look at
    where = f" (model {ex.model_entry}, {ex.backend.name})" if ex is not None else ""
    if status >= 500:
        logger.warning("{} -> {}{}: {}", type(exc).__name__, status, where, exc)
    else:
        logger.info("{} -> {}{}: {}", type(exc).__name__, status, where, exc)
    headers = _headers(ex) if ex is not None and ex.attempts else {}
    if isinstance(exc, BackendHTTPError) and exc.retry_after is not None and status in (429, 503):
        # the upstream's own wait, passed on: the client decides whether to wait that long
        headers["retry-after"] = str(math.ceil(exc.retry_after))
    if isinstance(exc, RunError | TranscriptError) or _fails_again(exc):
        # the proxy has re-asked the model within its budget already, the upstream refused
        # the request itself, or the proxy cannot write its transcripts: the SDKs' own
        # retries of a 5xx (both honour x-should-retry) would only multiply the upstream calls
        headers["x-should-retry"] = "false"
    if isinstance(exc, BodyTimeout | BodyTooLarge):
        # the rest of the body is never read: close rather than keep a half-read connection
        headers["connection"] = "close"
    return JSONResponse(body, status_code=status, headers=headers or None)


#: upstream statuses that a client may well see pass when it asks again
_TRANSIENT = frozenset({408, 409, 429})


def _fails_again(exc: AgentFSMError) -> bool:
    """An upstream's answer that the same request would get again: a 4xx (the upstream
    refused the request as sent: a client setting it does not take ...), or 501/505."""
    if not isinstance(exc, BackendHTTPError):
        return False
    code = exc.status_code
    return (400 <= code < 500 and code not in _TRANSIENT) or code in (501, 505)


def _headers(ex: Exchange) -> dict[str, str]:
    """The exchange's headers, and the client fields it did not honour (when any: the
    names made safe to send and the list bounded, :func:`~agentfsm.protocols.sampling.ignored_header`)."""
    headers = ex.headers()
    if ex.request.ignored:
        headers[IGNORED_HEADER] = ignored_header(ex.request.ignored)
    return headers


async def _stream(request: Request, ex: Exchange, input_tokens: int, place: _Place) -> Response:
    """Prime the stream (so that an early failure is a plain HTTP error), then stream on.
    The first event may be a keep-alive: a held stream's headers leave with it."""
    r = ex.request
    sink = ex.wire.sink(
        model=ex.model,
        response_id=ex.response_id,
        created=ex.created,
        include_usage=r.stream_include_usage,
        input_tokens=input_tokens,
        custom_tools=r.custom_tools,
        echo=r.response_echo,
    )
    events = stream_events(ex, sink)
    # the stream bounds its own upstream waits by the deadline; the grace lets it say so first
    deadline = None if ex.deadline is None else ex.deadline + _PRIME_GRACE
    try:
        first: str | None = await until_disconnect(request, anext(events), deadline)
    except StopAsyncIteration:
        first = None
    headers = {**_headers(ex), "cache-control": "no-cache", "x-accel-buffering": "no"}
    return _StreamWithPlace(_chain(first, events), media_type="text/event-stream", headers=headers, place=place)


async def _chain(first: str | None, rest: AsyncIterator[str]) -> AsyncIterator[str]:
    try:
        if first is not None:
            yield first
        async for event in rest:
            yield event
    finally:
        # a client gone while we were writing: stop reading the upstream now, not at GC
        aclose = getattr(rest, "aclose", None)
        if aclose is not None:
            await aclose()
