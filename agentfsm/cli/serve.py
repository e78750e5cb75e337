"""``agentfsm serve``: the OpenAI- and Anthropic-compatible proxy over HTTP.

Binds 127.0.0.1 by default and refuses any other address without ``--api-key``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer

from agentfsm._server_auth import check_bind
from agentfsm.backends.base import Backend
from agentfsm.cli._common import (
    ApiKeyOpt,
    BackendOpt,
    BaseUrlOpt,
    DialectOpt,
    EnforcementOpt,
    ModelOpt,
    make_backend,
)
from agentfsm.errors import AgentFSMError

__all__ = ["build_app", "register"]

HostOpt = Annotated[str, typer.Option("--host", envvar="AGENTFSM_HOST", help="Address to bind. Anything but loopback needs --api-key.")]
PortOpt = Annotated[int, typer.Option("--port", envvar="AGENTFSM_PORT", min=0, max=65535, help="Port to listen on.")]
ProxyKeyOpt = Annotated[
    str | None,
    typer.Option("--api-key", envvar="AGENTFSM_API_KEY", help="Key clients must send (Authorization: Bearer or x-api-key). Never logged.", show_default=False),
]
TranscriptsOpt = Annotated[Path | None, typer.Option("--transcripts", help="Write one JSONL transcript per request into this directory.")]
MaxBodyOpt = Annotated[int, typer.Option("--max-body-bytes", min=1, help="Largest request body accepted (413 above).")]
TimeoutOpt = Annotated[float | None, typer.Option("--request-timeout", min=0.001, help="Seconds one whole request may take, retries included (504 after).")]
CorrectionsOpt = Annotated[int, typer.Option("--max-corrections", min=0, help="Corrections sent upstream per request before giving up (422).")]
ServedModelOpt = Annotated[str | None, typer.Option("--served-model-name", help="Model name listed at /v1/models (default: the backend's).")]


def _backend(backend: str, base_url: str | None, model: str | None, upstream_key: str | None) -> Backend:
    if backend == "openai" and base_url and not upstream_key:
        # An upstream built without a key would fall back to $AGENTFSM_API_KEY, which here
        # is the proxy's own key: name the upstream key explicitly so it never travels on.
        from agentfsm.backends import create_backend

        key = os.environ.get("OPENAI_API_KEY") or ""
        return create_backend("openai", base_url=base_url, model=model or "default", api_key=key)
    return make_backend(backend, base_url, model, upstream_key)


def build_app(
    *,
    host: str,
    backend: str,
    base_url: str | None,
    model: str | None,
    upstream_api_key: str | None,
    api_key: str | None,
    dialect: str,
    enforcement: str,
    transcripts: Path | None,
    max_body_bytes: int,
    request_timeout: float | None,
    max_corrections: int,
    served_model_name: str | None,
) -> Any:
    """Check the options (the bind rule first) and build the ASGI app they describe."""
    from agentfsm.server import create_app

    check_bind(host, api_key)
    return create_app(
        _backend(backend, base_url, model, upstream_api_key),
        dialect=dialect,
        enforcement=enforcement,
        api_key=api_key,
        max_body_bytes=max_body_bytes,
        transcripts_dir=transcripts,
        max_corrections=max_corrections,
        model_name=served_model_name or model,
        request_timeout=request_timeout,
    )


def register(app: typer.Typer) -> None:
    """Add ``serve`` to the CLI."""

    @app.command("serve")
    def serve(
        host: HostOpt = "127.0.0.1",
        port: PortOpt = 8765,
        backend: BackendOpt = "local",
        base_url: BaseUrlOpt = None,
        model: ModelOpt = None,
        upstream_api_key: ApiKeyOpt = None,
        api_key: ProxyKeyOpt = None,
        dialect: DialectOpt = "json-action",
        enforcement: EnforcementOpt = "auto",
        transcripts: TranscriptsOpt = None,
        max_body_bytes: MaxBodyOpt = 4 * 1024 * 1024,
        request_timeout: TimeoutOpt = None,
        max_corrections: CorrectionsOpt = 3,
        served_model_name: ServedModelOpt = None,
    ) -> None:
        """Serve OpenAI /v1/chat/completions and Anthropic /v1/messages with tool calling.

        Point any OpenAI or Anthropic client at http://HOST:PORT (OpenAI: base URL
        http://HOST:PORT/v1). Tool definitions in a request become a prompt contract
        for the model; its replies come back as real tool calls.
        """
        import uvicorn

        try:
            asgi = build_app(
                host=host,
                backend=backend,
                base_url=base_url,
                model=model,
                upstream_api_key=upstream_api_key,
                api_key=api_key,
                dialect=dialect,
                enforcement=enforcement,
                transcripts=transcripts,
                max_body_bytes=max_body_bytes,
                request_timeout=request_timeout,
                max_corrections=max_corrections,
                served_model_name=served_model_name,
            )
        except AgentFSMError as exc:
            typer.echo(f"agentfsm: error: {exc}", err=True)
            raise typer.Exit(2) from None
        typer.echo(f"agentfsm proxy on http://{host}:{port} (OpenAI base URL http://{host}:{port}/v1)", err=True)
        uvicorn.run(asgi, host=host, port=port, log_level="warning", access_log=False)
