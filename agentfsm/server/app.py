"""The HTTP proxy: OpenAI- and Anthropic-compatible endpoints in front of a text-only model.

::

    from agentfsm.server.app import create_app
    app = create_app(create_backend("openai", base_url="http://127.0.0.1:11434/v1", model="qwen"))
    # uvicorn.run(app, host="127.0.0.1", port=8765)

Endpoints: ``POST /v1/chat/completions`` and ``POST /v1/responses`` (OpenAI),
``POST /v1/messages`` and ``POST /v1/messages/count_tokens`` (Anthropic),
``GET /v1/models``, ``GET /health``, and ``GET`` / ``HEAD /``. A request with tools
(given, or recovered from its history) runs one deciding turn: the contract is
prepended, the model's text is parsed and guarded, corrections are sent upstream
within the budget, and the client receives real
``tool_calls`` / ``tool_use`` blocks. A request without tools is passed through. The
client's sampling settings go upstream unchanged; what is not honoured is named in
the ``x-agentfsm-ignored`` header (:mod:`agentfsm.protocols.sampling`). Streaming is
described in :mod:`agentfsm.server.streaming`. Before any model call a request is
fitted to the backend's context (:mod:`agentfsm.server.fit`): tool descriptions
compacted where needed, ``max_tokens`` clamped, or a 400 "prompt is too long".

Safety: an API key (``Authorization: Bearer`` or ``x-api-key``) when one is set; a
capped body (413); JSON decoded within limits (:mod:`agentfsm.core.client_json`);
errors in the caller's protocol shape, 4xx for client mistakes, never a 500 for them;
a client that disconnects cancels the upstream call; a ``request_timeout`` bounds each
whole request. With ``transcripts_dir`` every request writes a JSONL transcript named
by its run id.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import orjson
from loguru import logger
from pydantic import SecretStr, ValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse as _StarletteJSON
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from agentfsm.server.auth import check_api_key, check_host_and_origin, read_json_body
from agentfsm.server.limits import ClientShare
from agentfsm.server.streaming import stream_events
from agentfsm.server.exchange import ClientGone, Exchange, complete, until_disconnect
from agentfsm.server.fit import count_prompt_tokens, fit_exchange
from agentfsm.server.models import ModelTable
from agentfsm.server.observe import app_watches
from agentfsm.server.settings import DEFAULT_BODY_TIMEOUT, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_TOOLS, Settings
from agentfsm.server.wire import Wire, wire_for, wire_for_path
from agentfsm.core.backend import Backend, counts_tokens
from agentfsm.core.config import DEFAULTS, RunConfig
from agentfsm.core.errors import (
    AgentFSMError,
    BackendHTTPError,
    BodyTimeout,
    BodyTooLarge,
    RequestError,
    TooManyTools,
    UsageError,
)
from agentfsm.protocols import IGNORED_HEADER, NormalizedRequest, settle

__all__ = ["DEFAULT_BODY_TIMEOUT", "DEFAULT_MAX_BODY_BYTES", "DEFAULT_MAX_TOOLS", "Settings", "create_app"]


class JSONResponse(_StarletteJSON):
    """Starlette's JSON response, rendered by orjson (compact UTF-8, as Starlette writes it)."""

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


_R = TypeVar("_R")
_OPENAI = wire_for("openai")
_ANTHROPIC = wire_for("anthropic")
_RESPONSES = wire_for("responses")
#: status sent when the client went away (nobody reads it; it marks the access log)
_CLIENT_CLOSED = 499
_PRIME_GRACE = 1.0


@asynccontextmanager
async def _lifespan(app: Starlette) -> AsyncIterator[None]:
    """At shutdown, the backend's connection pools are closed on the loop that opened them
    (a pool left open holds sockets the closing loop cannot release; a backend used again
    opens new ones), and what watches requests hands on what it still holds."""
    yield
    for backend in app.state.models.backends():
        aclose = getattr(backend, "aclose", None)
        if aclose is not None:
            await aclose()
    if app.state.settings.watch is not None:
        app.state.settings.watch.close()


def create_app(
    backend: Backend | ModelTable,
    *,
    config: RunConfig = DEFAULTS,
    api_key: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    transcripts_dir: str | Path | None = None,
    model_name: str | None = None,
    request_timeout: float | None = None,
    body_timeout: float = DEFAULT_BODY_TIMEOUT,
    metrics: bool = False,
    tracer_provider: Any = None,
    allowed_hosts: tuple[str, ...] | None = None,
    allowed_origins: tuple[str, ...] = (),
    max_tools: int = DEFAULT_MAX_TOOLS,
    client_share: int | None = None,
    **run_settings: Any,
) -> Starlette:
    """The proxy as an ASGI app serving ``backend``: one backend (under ``model_name``,
    answering any model name), or a :class:`~agentfsm.server.models.ModelTable` (requests
    routed by their ``model``, each entry with its own settings; ``config`` and
    ``model_name`` are then the table's business).

    ``config`` is the run configuration (``run_settings``, e.g. ``dialect="command"``,
    change it; the proxy uses the fields :class:`~agentfsm.server.settings.Settings` names);
    ``api_key`` (when set) is required from every client on the ``/v1`` endpoints;
    ``request_timeout`` (seconds) bounds a whole request, retries included;
    ``body_timeout`` bounds the reading of its body (408 after: a body that never
    finishes would otherwise hold its connection forever). ``metrics`` serves Prometheus
    metrics at ``GET /metrics`` (behind ``api_key`` too; :mod:`agentfsm.server.metrics`);
    ``tracer_provider`` (an OpenTelemetry one; the ``otel`` extra) gets a span per request
    (:mod:`agentfsm.server.tracing`). ``allowed_hosts`` and
    ``allowed_origins`` extend the loopback names a request's ``Host`` and ``Origin`` may
    carry (:func:`~agentfsm.server.auth.check_host_and_origin`; by default any host is
    allowed once an ``api_key`` is set). A request offering more than ``max_tools`` tools
    is the client's 400. ``client_share`` bounds the requests one client (address) has at
    the upstream at once; its others wait (default: half the smallest connection pool among
    the backends that have one). Slow headers and the number of connections are the HTTP server's
    to bound: ``agentfsm serve`` runs uvicorn with
    :func:`~agentfsm.server.limits.guarded_protocol`.
    """
    run = config.replace(**run_settings) if run_settings else config  # a UsageError now, not per request
    if max_body_bytes < 1:
        raise UsageError("max_body_bytes must be positive")
    if request_timeout is not None and request_timeout <= 0:
        raise UsageError("request_timeout must be positive")
    if body_timeout <= 0:
        raise UsageError("body_timeout must be positive")
    if max_tools < 1:
        raise UsageError("max_tools must be positive")
    table = backend if isinstance(backend, ModelTable) else ModelTable.single(backend, run, model_name)
    if client_share is None:  # half the smallest connection pool among the models' backends
        pools = [p for m in table.models if isinstance(p := getattr(m.backend, "max_connections", None), int) and p > 0]
        client_share = max(1, min(pools) // 2) if pools else None
    elif client_share < 1:
        raise UsageError("client_share must be positive")
    share = ClientShare(client_share)
    proxy_metrics, watch = app_watches(metrics, tracer_provider)
    settings = Settings(
        run=run,
        api_key=SecretStr(api_key) if api_key else None,
        max_body_bytes=max_body_bytes,
        transcripts_dir=Path(transcripts_dir) if transcripts_dir is not None else None,
        model_name=model_name,
        request_timeout=request_timeout,
        body_timeout=body_timeout,
        watch=watch,
        allowed_hosts=tuple(allowed_hosts) if allowed_hosts is not None else (None if api_key else ()),
        allowed_origins=tuple(allowed_origins),
        max_tools=max_tools,
        client_share=client_share,
    )
    routes_by_name = {  # each entry's settings, made once
        m.name: (m.backend, dataclasses.replace(settings, run=m.run, model_name=m.name, settings_from=m.settings_from))
        for m in table.models
    }

    def route(normalized: NormalizedRequest) -> tuple[Backend, Settings]:
        return routes_by_name[table.route(normalized.model).name]

    async def http_error(request: Request, exc: Exception) -> Response:
        """Unknown routes and wrong methods, in the shape of the protocol the path suggests."""
        assert isinstance(exc, StarletteHTTPException)
        wire = wire_for_path(request.url.path)
        message = f"{exc.detail}: {request.method} {request.url.path}"
        return JSONResponse(wire.error(exc.status_code, message), status_code=exc.status_code)

    async def health(request: Request) -> Response:
        """Liveness: no key needed, nothing revealed. Also at ``/`` (Claude Code sends
        ``HEAD /`` before its first request)."""
        return JSONResponse({"status": "ok"})

    async def models(request: Request) -> Response:
        """The models this proxy serves, as an OpenAI or (with ``anthropic-version``) Anthropic list."""
        anthropic = "anthropic-version" in request.headers
        wire = _ANTHROPIC if anthropic else _OPENAI
        try:
            _check_client(request, settings)
        except RequestError as exc:
            return _error(wire, exc, None)
        names = table.names
        if anthropic:
            items = [
                {"type": "model", "id": name, "display_name": name, "created_at": "1970-01-01T00:00:00Z"}
                for name in names
            ]
            return JSONResponse({"data": items, "has_more": False, "first_id": names[0], "last_id": names[-1]})
        entries = [{"id": name, "object": "model", "created": 0, "owned_by": "agentfsm"} for name in names]
        return JSONResponse({"object": "list", "data": entries})

    async def chat_completions(request: Request) -> Response:
        """OpenAI chat completions, with tool calls for a model that has none."""
        return await _serve(request, _OPENAI, route, settings, share)

    async def responses(request: Request) -> Response:
        """OpenAI Responses API (stateless), with ``function_call`` items for a model that has none."""
        return await _serve(request, _RESPONSES, route, settings, share)

    async def messages(request: Request) -> Response:
        """Anthropic messages, with ``tool_use`` for a model that has none."""
        return await _serve(request, _ANTHROPIC, route, settings, share)

    async def count_tokens(request: Request) -> Response:
        """Anthropic token counting: the input tokens of the prompt the model would see
        (contract included, compacted as a real request would be)."""
        try:
            _check_client(request, settings)
            body = await read_json_body(request, settings.max_body_bytes, settings.body_timeout)
            normalized = _normalize(_ANTHROPIC, body, settings)
            model_backend, model_settings = route(normalized)
            ex = Exchange(model_backend, settle(normalized, model_backend.capabilities), _ANTHROPIC, model_settings)
            return JSONResponse({"input_tokens": await _off_loop(ex, count_prompt_tokens)})
        except AgentFSMError as exc:
            return _error(_ANTHROPIC, RequestError(str(exc)) if isinstance(exc, UsageError) else exc, None)

    # a plain Starlette app: every endpoint reads its raw request itself, so FastAPI's
    # layers (dependency solving, its middleware) only added CPU to each request and
    # ~8 MB of imports to the process
    routes = [
        Route("/health", health, methods=["GET"]),
        Route("/", health, methods=["GET", "HEAD"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        Route("/v1/responses", responses, methods=["POST"]),
        Route("/v1/messages", messages, methods=["POST"]),
        Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),
    ]
    if proxy_metrics is not None:
        from agentfsm.server.metrics import metrics_endpoint

        routes.append(Route("/metrics", metrics_endpoint(proxy_metrics, settings.api_key), methods=["GET"]))
    app = Starlette(routes=routes, exception_handlers={StarletteHTTPException: http_error}, lifespan=_lifespan)
    app.state.settings = settings
    app.state.models = table
    app.state.metrics = proxy_metrics
    return app


async def _serve(
    request: Request,
    wire: Wire,
    route: Callable[[NormalizedRequest], tuple[Backend, Settings]],
    settings: Settings,
    share: ClientShare,
) -> Response:
    ex: Exchange | None = None
    client = request.client.host if request.client is not None else ""
    place = _Place(share, client)
    try:
        _check_client(request, settings)
        normalized = _normalize(wire, await read_json_body(request, settings.max_body_bytes, settings.body_timeout), settings)
        backend, settings = route(normalized)  # the model's own backend and settings (a 404 for an unknown name)
        normalized = settle(normalized, backend.capabilities)
        deadline = None
        if settings.request_timeout is not None:
            deadline = asyncio.get_running_loop().time() + settings.request_timeout
        ex = Exchange(backend, normalized, wire, settings, deadline=deadline)
        ex.open_transcript()
        if normalized.stream:
            fit = await _off_loop(ex, fit_exchange)  # compacted, clamped, or PromptTooLong
            await until_disconnect(request, place.take(), deadline)
            return await _stream(request, ex, fit.prompt_tokens, place)
        if backend.capabilities.context_tokens is not None:
            # in an unknown context nothing is compacted, clamped or refused: the fit would
            # only measure the prompt (built in full, ~0.1 ms), which a whole answer never reports
            await _off_loop(ex, fit_exchange)
        await until_disconnect(request, place.take(), deadline)
        reply = await until_disconnect(request, complete(ex), deadline)
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
            custom_tools=ex.request.custom_tools,
        )
        return JSONResponse(body, headers=_headers(ex))
    except ClientGone:
        if ex is not None:
            ex.end(error=ConnectionAbortedError("client disconnected"))
        return Response(status_code=_CLIENT_CLOSED)
    except AgentFSMError as exc:
        if ex is not None:
            ex.end(error=exc)
        elif settings.watch is not None:
            settings.watch.rejected(wire.protocol, exc, wire.error_for(exc)[0])
        if isinstance(exc, UsageError):
            # settings were checked when the app was built: this one came from the request
            # (e.g. a tool schema the backend cannot turn into a grammar)
            exc = RequestError(str(exc))
        return _error(wire, exc, ex)
    except Exception as exc:
        logger.exception("unexpected error in {}", request.url.path)
        if ex is not None:
            ex.end(error=exc)
        return JSONResponse(wire.error(500, "internal error in the proxy"), status_code=500)
    finally:
        if not place.handed:
            place.give_back()


class _Place:
    """This request's place in its client's share of the upstream (see ClientShare)."""

    __slots__ = ("client", "handed", "held", "share")

    def __init__(self, share: ClientShare, client: str) -> None:
        self.share, self.client = share, client
        self.held = self.handed = False

    async def take(self) -> None:
        await self.share.enter(self.client)
        self.held = True

    def give_back(self) -> None:
        if self.held:
            self.held = False
            self.share.leave(self.client)


class _StreamWithPlace(StreamingResponse):
    """A stream that gives its request's place back when it ends, however it ends."""

    def __init__(self, *args: Any, place: _Place, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._place = place
        place.handed = True

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._place.give_back()


def _check_client(request: Request, settings: Settings) -> None:
    """Host and Origin on the allow-lists, then the API key (when one is set)."""
    check_host_and_origin(request, settings.allowed_hosts, settings.allowed_origins)
    check_api_key(request, settings.api_key)


async def _off_loop(ex: Exchange, measure: Callable[[Exchange], _R]) -> _R:
    """``measure(ex)`` in a worker thread where the backend counts tokens itself (its
    tokenizer may take a while); inline otherwise: the estimate (the first prompt built
    and its characters counted, ~50 µs) costs about what the thread hop would."""
    if counts_tokens(ex.backend):
        return await asyncio.to_thread(measure, ex)
    return measure(ex)


def _normalize(wire: Wire, body: Any, settings: Settings) -> NormalizedRequest:
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


def _error(wire: Wire, exc: AgentFSMError, ex: Exchange | None) -> Response:
    status, body = wire.error_for(exc)
    if status >= 500:
        logger.warning("{} -> {}: {}", type(exc).__name__, status, exc)
    else:
        logger.info("{} -> {}: {}", type(exc).__name__, status, exc)
    headers = _headers(ex) if ex is not None and ex.attempts else {}
    if isinstance(exc, BackendHTTPError) and exc.retry_after is not None and status in (429, 503):
        # the upstream's own wait, passed on: the client decides whether to wait that long
        headers["retry-after"] = str(math.ceil(exc.retry_after))
    if isinstance(exc, BodyTimeout | BodyTooLarge):
        # the rest of the body is never read: close rather than keep a half-read connection
        headers["connection"] = "close"
    return JSONResponse(body, status_code=status, headers=headers or None)


def _headers(ex: Exchange) -> dict[str, str]:
    """The exchange's headers, and the client fields it did not honour (when any)."""
    headers = ex.headers()
    if ex.request.ignored:
        headers[IGNORED_HEADER] = ",".join(dict.fromkeys(ex.request.ignored))
    return headers


async def _stream(request: Request, ex: Exchange, input_tokens: int, place: _Place) -> Response:
    """Prime the stream (so that an early failure is a plain HTTP error), then stream on."""
    r = ex.request
    sink = ex.wire.sink(
        model=ex.model,
        response_id=ex.response_id,
        created=ex.created,
        include_usage=r.stream_include_usage,
        input_tokens=input_tokens,
        custom_tools=r.custom_tools,
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
