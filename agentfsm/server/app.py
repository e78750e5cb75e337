"""The HTTP proxy: OpenAI- and Anthropic-compatible endpoints in front of a text-only model.

::

    from agentfsm.server.app import create_app
    app = create_app(create_backend("openai", base_url="http://127.0.0.1:11434/v1", model="qwen"))
    # uvicorn.run(app, host="127.0.0.1", port=8765)

Endpoints: ``POST /v1/chat/completions`` and ``POST /v1/responses`` (OpenAI),
``POST /v1/messages`` and ``POST /v1/messages/count_tokens`` (Anthropic),
``GET /v1/models`` and ``GET /v1/models/{id}``, ``GET /health``, and ``GET`` / ``HEAD /``. A request with tools
(given, or recovered from its history) runs one deciding turn: the contract is
prepended, the model's text is parsed and guarded, corrections are sent upstream
within the budget, and the client receives real
``tool_calls`` / ``tool_use`` blocks. A request without tools is passed through. The
client's sampling settings go upstream unchanged; what is not honoured is named in
the ``x-agentfsm-ignored`` header (:mod:`agentfsm.protocols.sampling`). Streaming is
described in :mod:`agentfsm.server.streaming`; one request, end to end, in
:mod:`agentfsm.server.handle`. Before any model call a request is
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

import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from pydantic import SecretStr
from starlette.applications import Starlette
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agentfsm.core.backend import Backend
from agentfsm.core.config import DEFAULTS, RunConfig
from agentfsm.core.errors import AgentFSMError, ModelNotFound, RequestError, UsageError
from agentfsm.protocols import NormalizedRequest, settle
from agentfsm.server.auth import read_json_body
from agentfsm.server.exchange import Exchange
from agentfsm.server.fit import count_prompt_tokens
from agentfsm.server.handle import (
    JSONResponse,
    UnderWay,
    check_client,
    error_response,
    normalize,
    off_loop,
    serve,
)
from agentfsm.server.limits import ClientShare
from agentfsm.server.models import ModelTable
from agentfsm.server.observe import app_watches
from agentfsm.server.settings import (
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_KEEP_ALIVE,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_TOOLS,
    STREAM_PROSE,
    Settings,
    StreamProse,
    check_served,
)
from agentfsm.server.wire import wire_for, wire_for_path

__all__ = ["DEFAULT_BODY_TIMEOUT", "DEFAULT_MAX_BODY_BYTES", "DEFAULT_MAX_TOOLS", "Settings", "create_app"]


_OPENAI = wire_for("openai")
_ANTHROPIC = wire_for("anthropic")
_RESPONSES = wire_for("responses")
#: how long the stop waits for the requests its shutdown timeout cancelled to end (each
#: writes its 503 or the stream's error event and its transcript's end, ~ms) before the
#: upstream pools close
_SETTLE = 1.0


@asynccontextmanager
async def _lifespan(app: Starlette) -> AsyncIterator[None]:
    """At shutdown, the backend's connection pools are closed on the loop that opened them
    (a pool left open holds sockets the closing loop cannot release; a backend used again
    opens new ones), once the requests the stop cancelled have ended; and what watches
    requests hands on what it still holds."""
    yield
    await app.state.under_way.ended(_SETTLE)
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
    stream_prose: StreamProse = "exact",
    keep_alive: float = DEFAULT_KEEP_ALIVE,
    **run_settings: Any,
) -> Starlette:
    """The proxy as an ASGI app serving ``backend``: one backend (under ``model_name``,
    answering any model name), or a :class:`~agentfsm.server.models.ModelTable` (requests
    routed by their ``model``, each entry with its own settings; ``config`` and
    ``model_name`` are then the table's business).

    ``config`` is the run configuration (``run_settings``, e.g. ``dialect="command"``,
    change it; the proxy uses the fields :class:`~agentfsm.server.settings.Settings` names,
    and a keyword naming one it does not take, such as ``tool_choice``, is a UsageError);
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
    each upstream at once; its others wait (default: half the smallest connection pool among
    the backends that have one). ``stream_prose`` says how a streamed tool-mode answer's
    prose leaves: ``exact`` (held until the engine accepts the reply: the stream carries
    what the whole answer carries) or ``live`` (as the model writes it; a refused reply's
    prose has then already gone out). A stream that has sent nothing for ``keep_alive``
    seconds sends a keep-alive (its headers first, when none have left), which clients
    ignore: a held stream is not taken for a dead one. Slow headers and the number of connections are the HTTP server's
    to bound: ``agentfsm serve`` runs uvicorn with
    :func:`~agentfsm.server.limits.guarded_protocol`.
    """
    check_served(run_settings)  # tool_choice=... here would be dropped: refused, as in a models file
    run = config.replace(**run_settings) if run_settings else config  # a UsageError now, not per request
    if max_body_bytes < 1:
        raise UsageError("max_body_bytes must be positive")
    if request_timeout is not None and request_timeout <= 0:
        raise UsageError("request_timeout must be positive")
    if body_timeout <= 0:
        raise UsageError("body_timeout must be positive")
    if max_tools < 1:
        raise UsageError("max_tools must be positive")
    if not keep_alive > 0:  # NaN too
        raise UsageError("keep_alive must be positive")
    if stream_prose not in STREAM_PROSE:
        raise UsageError(f"stream_prose must be one of {', '.join(STREAM_PROSE)}, got {stream_prose!r}")
    table = backend if isinstance(backend, ModelTable) else ModelTable.single(backend, run, model_name)
    if client_share is None:  # half the smallest connection pool among the models' backends
        pools = [p for m in table.models if isinstance(p := getattr(m.backend, "max_connections", None), int) and p > 0]
        client_share = max(1, min(pools) // 2) if pools else None
    elif client_share < 1:
        raise UsageError("client_share must be positive")
    share = ClientShare(client_share)
    under_way = UnderWay()
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
        stream_prose=stream_prose,
        keep_alive=keep_alive,
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
            check_client(request, settings)
        except RequestError as exc:
            return error_response(wire, exc, None)
        names = table.names
        items = [_model_object(name, anthropic) for name in names]
        if anthropic:
            return JSONResponse({"data": items, "has_more": False, "first_id": names[0], "last_id": names[-1]})
        return JSONResponse({"object": "list", "data": items})

    async def model(request: Request) -> Response:
        """One listed model, in the shape :func:`models` lists it; another name is the
        provider's 404 (even where a fallback answers any name: it is not listed)."""
        anthropic = "anthropic-version" in request.headers
        wire = _ANTHROPIC if anthropic else _OPENAI
        name = request.path_params["model_id"]
        try:
            check_client(request, settings)
            if name not in table.names:
                raise ModelNotFound(name, table.names)
        except RequestError as exc:
            return error_response(wire, exc, None)
        return JSONResponse(_model_object(name, anthropic))

    async def chat_completions(request: Request) -> Response:
        """OpenAI chat completions, with tool calls for a model that has none."""
        return await serve(request, _OPENAI, route, settings, share, under_way)

    async def responses(request: Request) -> Response:
        """OpenAI Responses API (stateless), with ``function_call`` items for a model that has none."""
        return await serve(request, _RESPONSES, route, settings, share, under_way)

    async def messages(request: Request) -> Response:
        """Anthropic messages, with ``tool_use`` for a model that has none."""
        return await serve(request, _ANTHROPIC, route, settings, share, under_way)

    async def count_tokens(request: Request) -> Response:
        """Anthropic token counting: the input tokens of the prompt the model would see
        (contract included, compacted as a real request would be)."""
        try:
            check_client(request, settings)
            body = await read_json_body(request, settings.max_body_bytes, settings.body_timeout, mended=[])
            normalized = normalize(_ANTHROPIC, body, settings)
            model_backend, model_settings = route(normalized)
            ex = Exchange(model_backend, settle(normalized, model_backend.capabilities), _ANTHROPIC, model_settings)
            return JSONResponse({"input_tokens": await off_loop(ex, count_prompt_tokens)})
        except AgentFSMError as exc:
            return error_response(_ANTHROPIC, RequestError(str(exc)) if isinstance(exc, UsageError) else exc, None)

    # a plain Starlette app: every endpoint reads its raw request itself, so FastAPI's
    # layers (dependency solving, its middleware) only added CPU to each request and
    # ~8 MB of imports to the process
    routes = [
        Route("/health", health, methods=["GET"]),
        Route("/", health, methods=["GET", "HEAD"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/models/{model_id:path}", model, methods=["GET"]),
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        Route("/v1/responses", responses, methods=["POST"]),
        Route("/v1/messages", messages, methods=["POST"]),
        Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),
    ]
    if proxy_metrics is not None:
        from agentfsm.server.metrics import metrics_endpoint

        routes.append(Route(
            "/metrics", metrics_endpoint(proxy_metrics, settings.api_key, check=lambda r: check_client(r, settings)),
            methods=["GET"],
        ))
    app = Starlette(routes=routes, exception_handlers={StarletteHTTPException: http_error}, lifespan=_lifespan)
    app.state.settings = settings
    app.state.models = table
    app.state.metrics = proxy_metrics
    app.state.under_way = under_way
    return app


def _model_object(name: str, anthropic: bool) -> dict[str, object]:
    """A served model as ``GET /v1/models`` lists it: Anthropic's shape or OpenAI's."""
    if anthropic:
        return {"type": "model", "id": name, "display_name": name, "created_at": "1970-01-01T00:00:00Z"}
    return {"id": name, "object": "model", "created": 0, "owned_by": "agentfsm"}
