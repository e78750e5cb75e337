"""A proxied request fitted to its backend's context, before any model call.

The prompt measured is the first model call's, exactly as the turn runner builds it
(:func:`~agentfsm.runtime.request.prepare_request`: contract, client system text,
history, prefill), counted by the backend where it can count
(:class:`~agentfsm.core.backend.CountsTokens`: the local model) and otherwise with the
estimate the usage falls back to. :func:`~agentfsm.prompt.compaction.fit_prompt` decides:
as sent, compacted, or :class:`~agentfsm.core.errors.PromptTooLong`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from loguru import logger

from agentfsm.core.backend import Backend, GenerationOptions, counts_tokens
from agentfsm.core.errors import PromptTooLong
from agentfsm.core.messages import PromptMessage, ToolSpec
from agentfsm.prompt.compaction import Fit, fit_prompt
from agentfsm.protocols import estimate_tokens
from agentfsm.runtime.request import prepare_request
from agentfsm.server.exchange import Exchange

__all__ = ["count_prompt_tokens", "fit_exchange", "prompt_tokens"]


def prompt_tokens(backend: Backend, prompt: Sequence[PromptMessage], options: GenerationOptions) -> int:
    """The tokens of ``prompt`` as ``backend`` counts them (an estimate where it cannot)."""
    if counts_tokens(backend):
        return backend.count_tokens(prompt, options)
    return sum(estimate_tokens(m.content) for m in prompt)


def _measure(ex: Exchange, tools: tuple[ToolSpec, ...]) -> int:
    options = ex.options
    if not ex.request.tool_mode:
        return prompt_tokens(ex.backend, ex.plain_prompt(), options)
    config = replace(ex.config, tools=tools)
    prompt, opts, _, _ = prepare_request(
        ex.backend, list(ex.request.messages), config, ex.settings.run.enforcement, options
    )
    return prompt_tokens(ex.backend, prompt, opts)


#: tokens a clamped ``max_tokens`` leaves unused when the backend counts the prompt itself
EXACT_MARGIN = 16
#: ... and when the prompt is estimated (its characters / 4, without the chat template):
#: the template's tokens per message, and a tenth of the estimate for the tokenizer's
TEMPLATE_TOKENS_PER_MESSAGE = 8


def _margin(ex: Exchange) -> Callable[[int], int]:
    """What a clamped ``max_tokens`` leaves unused, for a prompt of so many tokens."""
    if counts_tokens(ex.backend):
        return lambda _tokens: EXACT_MARGIN
    messages = len(ex.request.messages) + 2  # the contract's system turn and the reply's opener
    return lambda tokens: EXACT_MARGIN + TEMPLATE_TOKENS_PER_MESSAGE * messages + tokens // 10


def fit_exchange(ex: Exchange) -> Fit:
    """Fit ``ex.request`` to the backend's context: its tools compacted where needed and
    ``max_tokens`` clamped to what is left, less a safety margin (``ex.request`` is
    updated). Raises :class:`PromptTooLong` when even the most compact prompt does not fit."""
    request = ex.request
    wanted = ex.options.max_tokens
    fit = fit_prompt(
        request.tools, lambda tools: _measure(ex, tools), ex.backend.capabilities.context_tokens, wanted,
        _margin(ex),
    )
    update: dict[str, object] = {}
    if fit.level:
        update["tools"] = fit.tools
        logger.info(
            "tool descriptions compacted (level {}) to fit {} prompt tokens in a {}-token context",
            fit.level, fit.prompt_tokens, fit.context_tokens,
        )
    if fit.max_tokens != wanted:
        update["max_tokens"] = fit.max_tokens
    if update:
        ex.request = request.model_copy(update=update)
    return fit


def count_prompt_tokens(ex: Exchange) -> int:
    """The input tokens ``ex`` would be answered with: its fitted prompt's (the most
    compact one's when it does not fit: counting refuses nothing)."""
    try:
        return fit_exchange(ex).prompt_tokens
    except PromptTooLong as exc:
        return exc.tokens or 0
