"""Options shared by the commands that talk to a model (run, chat, serve, batch, eval)."""

from __future__ import annotations

import os
from typing import Annotated, Any

import typer

from agentfsm.backends.base import Backend
from agentfsm.errors import UsageError

__all__ = [
    "ApiKeyOpt",
    "BackendOpt",
    "BaseUrlOpt",
    "DialectOpt",
    "EnforcementOpt",
    "ModelOpt",
    "ToolChoiceOpt",
    "make_backend",
]

BackendOpt = Annotated[
    str, typer.Option("--backend", envvar="AGENTFSM_BACKEND", help="local (embedded SmolLM2) or openai (any OpenAI-compatible upstream).")
]
BaseUrlOpt = Annotated[
    str | None, typer.Option("--base-url", envvar="AGENTFSM_BASE_URL", help="Upstream base URL, e.g. http://127.0.0.1:11434/v1")
]
ModelOpt = Annotated[str | None, typer.Option("--model", envvar="AGENTFSM_MODEL", help="Upstream model name.")]
ApiKeyOpt = Annotated[
    str | None,
    typer.Option("--upstream-api-key", envvar="AGENTFSM_UPSTREAM_API_KEY", help="Key for the upstream (never logged). Falls back to OPENAI_API_KEY.", show_default=False),
]
DialectOpt = Annotated[
    str, typer.Option("--dialect", envvar="AGENTFSM_DIALECT", help="json-action, json-protocol, command or smiley.")
]
EnforcementOpt = Annotated[
    str, typer.Option("--enforcement", envvar="AGENTFSM_ENFORCEMENT", help="auto, prompt, prefill or constrained.")
]
ToolChoiceOpt = Annotated[
    str, typer.Option("--tool-choice", envvar="AGENTFSM_TOOL_CHOICE", help="auto, none, required, or a tool name.")
]


def make_backend(backend: str, base_url: str | None, model: str | None, api_key: str | None) -> Backend:
    """Build the backend the options describe; clear errors for missing pieces."""
    from agentfsm.backends import create_backend

    if backend == "local":
        return create_backend("local")
    if backend == "openai":
        if not base_url:
            raise UsageError("--backend openai needs --base-url (or AGENTFSM_BASE_URL)")
        kwargs: dict[str, Any] = {"base_url": base_url, "model": model or "default"}
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if key:
            kwargs["api_key"] = key
        return create_backend("openai", **kwargs)
    raise UsageError(f"--backend must be 'local' or 'openai', got {backend!r}")
