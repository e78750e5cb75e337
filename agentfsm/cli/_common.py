"""Options shared by the commands that talk to a model (run, chat, serve, batch, eval): the
backend. The run configuration's options are generated (:mod:`agentfsm.cli._options`)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentfsm.core.errors import UsageError

if TYPE_CHECKING:
    from agentfsm.core.backend import Backend

__all__ = [
    "ApiKeyOpt",
    "BackendOpt",
    "BaseUrlOpt",
    "ModelOpt",
    "make_backend",
]

BackendOpt = Annotated[
    str, typer.Option("--backend", envvar="AGENTFSM_BACKEND", help="local (embedded SmolLM2) or openai (any OpenAI-compatible upstream).")
]
BaseUrlOpt = Annotated[
    str | None, typer.Option("--base-url", envvar="AGENTFSM_BASE_URL", help="Upstream base URL, e.g. http://127.0.0.1:11434/v1")
]
ModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model",
        envvar="AGENTFSM_MODEL",
        help="Upstream model name (--backend openai). Without it, requests name the model \"default\".",
        show_default=False,
    ),
]
ApiKeyOpt = Annotated[
    str | None,
    typer.Option("--upstream-api-key", envvar="AGENTFSM_UPSTREAM_API_KEY", help="Key for the upstream (never logged). Falls back to OPENAI_API_KEY.", show_default=False),
]
def make_backend(
    backend: str, base_url: str | None, model: str | None, api_key: str | None, context_tokens: int | None = None
) -> Backend:
    """Build the backend the options describe; clear errors for missing pieces.
    ``context_tokens``: the model's context window (local: its n_ctx; openai: declared)."""
    from agentfsm.backends import create_backend
    from agentfsm.cli._logging import register_secret

    if backend == "local":
        return create_backend("local", **({"n_ctx": context_tokens} if context_tokens else {}))
    if backend == "openai":
        if not base_url:
            raise UsageError("--backend openai needs --base-url (or AGENTFSM_BASE_URL)")
        from agentfsm.backends._transport import url_secrets

        kwargs: dict[str, Any] = {"base_url": base_url, "model": model or "default", "context_tokens": context_tokens}
        key = api_key or os.environ.get("OPENAI_API_KEY")
        for secret in [key, *url_secrets(base_url)]:  # a key in the query (?key=...) is a key too
            register_secret(secret)
        if key:
            kwargs["api_key"] = key
        return create_backend("openai", **kwargs)
    raise UsageError(f"--backend must be 'local' or 'openai', got {backend!r}")
