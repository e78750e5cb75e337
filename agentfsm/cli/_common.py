"""Options shared by the commands that talk to a model (run, chat, serve, batch, eval): the
backend, and (run, chat, batch) how each model call samples, the agent's
:class:`~agentfsm.core.backend.GenerationOptions`. The run configuration's options are
generated (:mod:`agentfsm.cli._options`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from pydantic import ValidationError

from agentfsm.core.backend import GenerationOptions
from agentfsm.core.errors import UsageError

if TYPE_CHECKING:
    from agentfsm.core.backend import Backend

__all__ = [
    "ApiKeyOpt",
    "BackendOpt",
    "BaseUrlOpt",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_SEED",
    "DEFAULT_TEMPERATURE",
    "MaxTokensOpt",
    "ModelOpt",
    "SeedOpt",
    "TemperatureOpt",
    "TopPOpt",
    "generation_options",
    "make_backend",
]

_V = TypeVar("_V")

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


def _within_bounds(name: str) -> Callable[[_V], _V]:
    """A value of option ``name`` checked as :class:`GenerationOptions` checks its field
    (the same bounds as ``Agent(options=...)``, NaN and infinities refused): a usage error
    naming the option otherwise."""

    def check(value: _V) -> _V:
        if value is not None:
            try:
                GenerationOptions.model_validate({name: value})
            except ValidationError as exc:
                raise typer.BadParameter(str(exc.errors()[0]["msg"])) from None
        return value

    return check


_DEFAULT = GenerationOptions()
#: the option defaults: the agent's (``Agent(options=None)``)
DEFAULT_MAX_TOKENS: int = GenerationOptions.model_fields["max_tokens"].default
DEFAULT_TEMPERATURE: float = GenerationOptions.model_fields["temperature"].default
DEFAULT_SEED: int = GenerationOptions.model_fields["seed"].default
MaxTokensOpt = Annotated[
    int,
    typer.Option(
        "--max-tokens", envvar="AGENTFSM_MAX_TOKENS", callback=_within_bounds("max_tokens"),
        help="Most tokens each model call may generate (at least 1).",
    ),
]
TemperatureOpt = Annotated[
    float,
    typer.Option(
        "--temperature", envvar="AGENTFSM_TEMPERATURE", callback=_within_bounds("temperature"),
        help="Sampling temperature of each model call (0 or more; 0 is greedy decoding, so a run repeats).",
    ),
]
SeedOpt = Annotated[
    int,
    typer.Option(
        "--seed", envvar="AGENTFSM_SEED", callback=_within_bounds("seed"),
        help="Sampling seed sent with each model call (above temperature 0, the same seed draws the same "
        "replies where the backend honours seeds).",
    ),
]
TopPOpt = Annotated[
    float | None,
    typer.Option(
        "--top-p", envvar="AGENTFSM_TOP_P", callback=_within_bounds("top_p"), show_default=False,
        help="Nucleus sampling: the smallest set of likeliest tokens whose probability reaches this "
        "(0 to 1). Default: none sent, the backend's own.",
    ),
]


def generation_options(max_tokens: int, temperature: float, seed: int, top_p: float | None) -> GenerationOptions:
    """The agent's generation options from the command line's (each checked by its option)."""
    return _DEFAULT.model_copy(update={"max_tokens": max_tokens, "temperature": temperature, "seed": seed,
                                       "top_p": top_p})


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
