"""``agentfsm serve``: the OpenAI- and Anthropic-compatible proxy over HTTP.

Binds 127.0.0.1 by default and refuses any other address without ``--api-key``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentfsm.cli._common import ApiKeyOpt, BackendOpt, BaseUrlOpt, ModelOpt, make_backend
from agentfsm.cli._options import config_options
from agentfsm.core.config import DEFAULTS, RunConfig
from agentfsm.core.errors import AgentFSMError, UsageError
from agentfsm.server.settings import (
    DEFAULT_HEADER_TIMEOUT,
    DEFAULT_SHUTDOWN_TIMEOUT,
    NOT_FOR_THE_PROXY,
    Settings,
    StreamProse,
)

if TYPE_CHECKING:
    from agentfsm.core.backend import Backend
    from agentfsm.server.models import ModelTable

__all__ = ["build_app", "register"]

HostOpt = Annotated[str, typer.Option("--host", envvar="AGENTFSM_HOST", help="Address to bind. Anything but loopback needs --api-key.")]
PortOpt = Annotated[int, typer.Option("--port", envvar="AGENTFSM_PORT", min=0, max=65535, help="Port to listen on.")]
ProxyKeyOpt = Annotated[
    str | None,
    typer.Option("--api-key", envvar="AGENTFSM_API_KEY", help="Key clients must send (Authorization: Bearer or x-api-key). Never logged.", show_default=False),
]
TranscriptsOpt = Annotated[Path | None, typer.Option("--transcripts", envvar="AGENTFSM_TRANSCRIPTS", help="Write one JSONL transcript per request into this directory.")]
MaxBodyOpt = Annotated[int, typer.Option("--max-body-bytes", envvar="AGENTFSM_MAX_BODY_BYTES", min=1, help="Largest request body accepted (413 above).")]
TimeoutOpt = Annotated[float | None, typer.Option("--request-timeout", envvar="AGENTFSM_REQUEST_TIMEOUT", min=0.001, help="Seconds one whole request may take, retries included (504 after).")]
BodyTimeoutOpt = Annotated[float, typer.Option("--body-timeout", envvar="AGENTFSM_BODY_TIMEOUT", min=0.001, help="Seconds a client may take to send its request body (408 after).")]
ContextOpt = Annotated[
    int | None,
    typer.Option(
        "--context-tokens",
        envvar="AGENTFSM_CONTEXT_TOKENS",
        min=1,
        help="The model's context window in tokens: requests are fitted to it (compacted or refused with a 400) and a client's max_tokens clamped, less a safety margin. Default: local 8192 (SmolLM2's); openai unknown until the upstream reports it in a context-length error (then learned).",
        show_default=False,
    ),
]
MetricsOpt = Annotated[
    bool,
    typer.Option("--metrics", envvar="AGENTFSM_METRICS", help="Serve Prometheus metrics at GET /metrics (behind --api-key when one is set)."),
]
OtelOpt = Annotated[
    bool,
    typer.Option(
        "--otel",
        envvar="AGENTFSM_OTEL",
        help="OpenTelemetry spans per request and model call (pip install 'agentfsm\\[otel]'): to the provider "
        "opentelemetry-instrument configured, else to OTEL_TRACES_EXPORTER (otlp, console).",
    ),
]
AllowedHostsOpt = Annotated[
    str | None,
    typer.Option(
        "--allowed-hosts",
        envvar="AGENTFSM_ALLOWED_HOSTS",
        help="Comma-separated names a request's Host header may carry besides loopback ones ('*.example.com', '*' for any). Default: loopback names only; any once --api-key is set.",
        show_default=False,
    ),
]
AllowedOriginsOpt = Annotated[
    str | None,
    typer.Option(
        "--allowed-origins",
        envvar="AGENTFSM_ALLOWED_ORIGINS",
        help="Comma-separated browser origins (https://app.example.com, '*' for any) allowed besides loopback ones.",
        show_default=False,
    ),
]
MaxToolsOpt = Annotated[int, typer.Option("--max-tools", envvar="AGENTFSM_MAX_TOOLS", min=1, help="The most tools one request may offer (400 above).")]
ClientShareOpt = Annotated[
    int | None,
    typer.Option("--client-share", envvar="AGENTFSM_CLIENT_SHARE", min=1, help="Requests one client address may have at each upstream at once; its others wait. Default: half the upstream connection pool.", show_default=False),
]
StreamProseOpt = Annotated[
    StreamProse,
    typer.Option(
        "--stream-prose",
        envvar="AGENTFSM_STREAM_PROSE",
        help="How a streamed answer with tools sends its text. exact: once the reply is accepted, so the stream "
        "carries what the same request answered whole carries (a reply refused and asked again never reaches the "
        "client). live: as the model writes it (the first words sooner), where a refused reply's text has "
        "already reached the client when the accepted one follows.",
    ),
]
HeaderTimeoutOpt = Annotated[float, typer.Option("--header-timeout", envvar="AGENTFSM_HEADER_TIMEOUT", min=0.001, help="Seconds a client may take to send a request's headers (408 and closed after).")]
ShutdownTimeoutOpt = Annotated[
    float,
    typer.Option(
        "--shutdown-timeout",
        envvar="AGENTFSM_SHUTDOWN_TIMEOUT",
        min=0,
        help="Seconds the requests under way may take to finish once serve is told to stop (SIGTERM, Ctrl-C); "
        "then they are cancelled: each client is answered 503 (a stream ends with an error event) and each "
        "transcript ends cancelled. Keep it under the grace before SIGKILL (docker stop: 10 s).",
    ),
]
MaxConnectionsOpt = Annotated[
    int | None,
    typer.Option("--max-connections", envvar="AGENTFSM_MAX_CONNECTIONS", min=1, help="Client connections open at once; more are answered 503 and closed. Default: 1000, or half the process's descriptor limit where that is fewer.", show_default=False),
]
ServedModelOpt = Annotated[str | None, typer.Option("--served-model-name", envvar="AGENTFSM_SERVED_MODEL_NAME", help="Model name listed at /v1/models (default: the backend's).")]
ModelsOpt = Annotated[
    Path | None,
    typer.Option(
        "--models",
        envvar="AGENTFSM_MODELS",
        help="A models file (TOML): each client-visible model name, its upstream and its settings; requests are "
        "routed by their model. Replaces --backend, --base-url, --model, --upstream-api-key, --context-tokens "
        "and --served-model-name; the run options become every entry's starting settings.",
        show_default=False,
    ),
]
WorkersOpt = Annotated[
    int,
    typer.Option("--workers", envvar="AGENTFSM_WORKERS", min=1, help="Processes serving the one port (uvicorn workers; the proxy keeps no state between requests)."),
]



def _backend(
    backend: str, base_url: str | None, model: str | None, upstream_key: str | None, context_tokens: int | None = None
) -> Backend:
    if backend == "openai" and base_url and not upstream_key:
        # An upstream built without a key would fall back to $AGENTFSM_API_KEY, which here
        # is the proxy's own key: name the upstream key explicitly so it never travels on.
        from agentfsm.backends import create_backend
        from agentfsm.cli._logging import register_secret

        key = os.environ.get("OPENAI_API_KEY") or ""
        register_secret(key)
        return create_backend(
            "openai", base_url=base_url, model=model or "default", api_key=key, context_tokens=context_tokens
        )
    return make_backend(backend, base_url, model, upstream_key, context_tokens)


#: the single-backend options a models file replaces, with their variables, in ``_models``' order
_SINGLE = (
    ("--backend", "AGENTFSM_BACKEND"), ("--base-url", "AGENTFSM_BASE_URL"), ("--model", "AGENTFSM_MODEL"),
    ("--upstream-api-key", "AGENTFSM_UPSTREAM_API_KEY"), ("--context-tokens", "AGENTFSM_CONTEXT_TOKENS"),
    ("--served-model-name", "AGENTFSM_SERVED_MODEL_NAME"),
)


def _models(
    path: Path, config: RunConfig, backend: str, *single: str | int | None
) -> ModelTable:
    """The models file's table; the single-backend options are refused beside it."""
    from agentfsm.cli._logging import register_secret
    from agentfsm.server.models_file import load_models_file

    values = (None if backend == "local" else backend, *single)
    given = [
        f"{flag} from ${variable}" if os.environ.get(variable) == str(value) else flag
        for (flag, variable), value in zip(_SINGLE, values, strict=True) if value is not None
    ]
    if given:  # named as given: a variable left in the environment is not an option the operator typed
        raise UsageError(
            "--models replaces --backend, --base-url, --model, --upstream-api-key, --context-tokens and "
            f"--served-model-name: give each model's upstream in the models file (given: {', '.join(given)})"
        )
    return load_models_file(path, config, on_secret=register_secret)


def build_app(
    *,
    host: str,
    backend: str,
    base_url: str | None,
    model: str | None,
    upstream_api_key: str | None,
    api_key: str | None,
    config: RunConfig = DEFAULTS,
    transcripts: Path | None = Settings.transcripts_dir,
    max_body_bytes: int = Settings.max_body_bytes,
    request_timeout: float | None = Settings.request_timeout,
    body_timeout: float = Settings.body_timeout,
    served_model_name: str | None = None,
    context_tokens: int | None = None,
    metrics: bool = False,
    otel: bool = False,
    allowed_hosts: str | None = None,
    allowed_origins: str | None = None,
    max_tools: int = Settings.max_tools,
    client_share: int | None = None,
    stream_prose: StreamProse = Settings.stream_prose,
    models: Path | None = None,
) -> Any:
    """Check the options (the bind rule first) and build the ASGI app they describe."""
    from agentfsm.cli._logging import register_secret
    from agentfsm.server.app import create_app
    from agentfsm.server.auth import check_bind

    register_secret(api_key)
    register_secret(upstream_api_key)
    check_bind(host, api_key)
    if transcripts is not None:  # refused now, not as a failure of every request
        from agentfsm.runtime.transcript import prepare_transcripts_dir

        prepare_transcripts_dir(transcripts)
    tracer_provider = None
    if otel:
        from agentfsm.server.tracing import global_provider

        tracer_provider = global_provider()
    if models is None and base_url:
        from agentfsm.backends._transport import split_base_url, url_secrets

        for secret in url_secrets(base_url):  # a key in the query (?key=...) is a key
            register_secret(secret)
        split_base_url(base_url)  # at start-up, not as a 500 on every request
    served = (
        _models(models, config, backend, base_url, model, upstream_api_key, context_tokens, served_model_name)
        if models is not None
        else _backend(backend, base_url, model, upstream_api_key, context_tokens)
    )
    return create_app(
        served,
        config=config,
        api_key=api_key,
        max_body_bytes=max_body_bytes,
        transcripts_dir=transcripts,
        model_name=served_model_name or model,
        request_timeout=request_timeout,
        body_timeout=body_timeout,
        metrics=metrics,
        tracer_provider=tracer_provider,
        allowed_hosts=_names(allowed_hosts),
        allowed_origins=_names(allowed_origins) or (),
        max_tools=max_tools,
        client_share=client_share,
        stream_prose=stream_prose,
    )


#: allocations between young garbage collections while the proxy serves (CPython's
#: default: 700), as a batch runs (agentfsm.batch.loop.YOUNG_COLLECTION_THRESHOLD)
YOUNG_COLLECTION_THRESHOLD = 50_000


def freeze_heap() -> None:
    """Leave what start-up built out of the collector's full passes: with the server, the
    backend and the pool's client imported (aiohttp is loaded on the first request
    otherwise), a full collection walked all of it whenever a large reply's objects set one
    off, and held every client for ~240 ms (measured here); frozen, it takes ~1 ms.

    Young collections run every :data:`YOUNG_COLLECTION_THRESHOLD` allocations: at 700,
    a proxied request (~3 ms of CPU at 10 clients) set off about one young collection in
    three and one full collection in 300 (~3.5% of the proxy's CPU, counted with
    gc.callbacks); cycles are still freed, a few MB later."""
    import gc
    import importlib

    try:
        importlib.import_module("agentfsm.backends._aio_transport")
    except ImportError:  # the async client is optional
        pass
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, *gc.get_threshold()[1:])


def _listenable(host: str, port: int) -> int:
    """The port to listen on, bound once now to see that it can be: ``--port 0`` gets a
    free one (the operator is told which; uvicorn, given 0, would bind one that no line
    names). A port taken, or a host this machine cannot listen on, is exit 3 here, with the
    address in the line, before any line says the proxy is on it."""
    import socket

    try:
        family, kind, proto, _, address = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds it
            sock.bind(address)
            return int(sock.getsockname()[1])
    except OSError as exc:
        typer.echo(f"agentfsm: error: cannot listen on http://{host}:{port}: {exc.strerror or exc}", err=True)
        raise typer.Exit(3) from None


def _names(value: str | None) -> tuple[str, ...] | None:
    """A comma-separated option as names (None when not given)."""
    if value is None:
        return None
    return tuple(name.strip() for name in value.split(",") if name.strip())


def register(app: typer.Typer) -> None:
    """Add ``serve`` to the CLI."""

    @app.command("serve")
    @config_options(exclude=NOT_FOR_THE_PROXY)
    def serve(
        host: HostOpt = "127.0.0.1",
        port: PortOpt = 8765,
        backend: BackendOpt = "local",
        base_url: BaseUrlOpt = None,
        model: ModelOpt = None,
        upstream_api_key: ApiKeyOpt = None,
        api_key: ProxyKeyOpt = None,
        transcripts: TranscriptsOpt = Settings.transcripts_dir,
        max_body_bytes: MaxBodyOpt = Settings.max_body_bytes,
        request_timeout: TimeoutOpt = Settings.request_timeout,
        body_timeout: BodyTimeoutOpt = Settings.body_timeout,
        served_model_name: ServedModelOpt = None,
        context_tokens: ContextOpt = None,
        metrics: MetricsOpt = False,
        otel: OtelOpt = False,
        allowed_hosts: AllowedHostsOpt = None,
        allowed_origins: AllowedOriginsOpt = None,
        max_tools: MaxToolsOpt = Settings.max_tools,
        client_share: ClientShareOpt = None,
        stream_prose: StreamProseOpt = Settings.stream_prose,
        header_timeout: HeaderTimeoutOpt = DEFAULT_HEADER_TIMEOUT,
        max_connections: MaxConnectionsOpt = None,
        shutdown_timeout: ShutdownTimeoutOpt = DEFAULT_SHUTDOWN_TIMEOUT,
        models: ModelsOpt = None,
        workers: WorkersOpt = 1,
        config: RunConfig = DEFAULTS,
    ) -> None:
        """Serve OpenAI /v1/chat/completions and /v1/responses and Anthropic /v1/messages with tool calling.

        Point any OpenAI or Anthropic client at http://HOST:PORT (OpenAI: base URL
        http://HOST:PORT/v1). Tool definitions in a request become a prompt contract
        for the model; its replies come back as real tool calls.

        Told to stop (SIGTERM, Ctrl-C) it takes no new connection and gives the
        requests under way --shutdown-timeout; then SIGTERM ends it by the signal
        (a shell says 143) and Ctrl-C with 0, with --workers or without. It exits
        3 when it cannot start: its port taken, or a worker that failed to start.
        SIGHUP reads the models file again (a file that no longer loads changes
        nothing, and a line says why); the requests under way end as they began.
        """
        import uvicorn

        from agentfsm.cli._reload import Reloadable
        from agentfsm.cli._workers import graceful
        from agentfsm.server.limits import default_max_connections, guarded_protocol

        options: dict[str, Any] = {
            "host": host, "backend": backend, "base_url": base_url, "model": model, "config": config,
            "transcripts": transcripts, "max_body_bytes": max_body_bytes, "request_timeout": request_timeout,
            "body_timeout": body_timeout, "served_model_name": served_model_name, "context_tokens": context_tokens,
            "metrics": metrics, "otel": otel, "models": models, "allowed_hosts": allowed_hosts,
            "allowed_origins": allowed_origins, "max_tools": max_tools, "client_share": client_share,
            "stream_prose": stream_prose,
        }
        try:
            asgi = build_app(upstream_api_key=upstream_api_key, api_key=api_key, **options)
        except AgentFSMError as exc:
            typer.echo(f"agentfsm: error: {exc}", err=True)
            raise typer.Exit(2) from None
        freeze_heap()
        port = _listenable(host, port)  # --port 0: a free one, chosen now so that the line below names it
        typer.echo(f"agentfsm proxy on http://{host}:{port} (OpenAI base URL http://{host}:{port}/v1)", err=True)
        if workers > 1:  # the options checked above; each worker builds the same app
            from agentfsm.cli._workers import serve_workers

            del asgi
            serve_workers(options, workers=workers, port=port, api_key=api_key, upstream_api_key=upstream_api_key,
                          guard=(header_timeout, max_connections or default_max_connections()),
                          shutdown_timeout=shutdown_timeout)
            return
        # loop/http "auto": uvloop and httptools (dependencies) where installed, else asyncio and h11
        # http: uvicorn's own protocol (httptools where installed), with a header deadline and
        # a connection limit (agentfsm.server.limits)
        http = guarded_protocol(header_timeout, max_connections or default_max_connections())
        # SIGHUP builds the app again (the models file read again), as uvicorn's workers are restarted
        asgi = Reloadable(asgi, lambda: build_app(upstream_api_key=upstream_api_key, api_key=api_key, **options))
        uvicorn.run(asgi, host=host, port=port, log_level="warning", access_log=False, loop="auto", http=http,
                    **graceful(shutdown_timeout))
