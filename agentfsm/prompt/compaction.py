"""Fitting a request to a model's context: measure, compact, or refuse.

Decided before the model is called. The prompt (contract, the client's system text,
the history, the prefill) must leave room for a completion: ``max_tokens``, but at
most :data:`MIN_COMPLETION_TOKENS` of it, and at most half the context, is *reserved*;
a larger ``max_tokens`` (Claude Code sends 64,000) is clamped to what is left less a
safety ``margin`` (the caller's: a count that is off by a few tokens, or an estimate
that leaves out the chat template, must not make the upstream refuse), not refused. No ``max_tokens`` stays
none: the backend's own bound (what the context leaves) applies.

When the prompt does not fit, the tools are compacted, level by level, until it does.
No tool is ever dropped, and no schema's structure changes (the grammar and the
guards see the same constraints); only descriptions shrink:

1. a tool's description to its first sentence (at most 200 characters), each
   parameter's, nested ones too, to its first sentence (at most 100);
2. a tool's description to at most 100 characters; parameter descriptions removed
   (the contract lists each parameter's name, type and whether it is required);
3. every description removed: tool names and the schema summaries only.

When even level 3 does not fit, :class:`~agentfsm.core.errors.PromptTooLong` says by
how much: ``prompt is too long: N tokens > M maximum``, M being the context less the
reserve (never below 0). Pure code: the caller passes the function that measures a prompt.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agentfsm.core.errors import PromptTooLong
from agentfsm.core.messages import ToolSpec

__all__ = ["COMPACT_LEVELS", "MIN_COMPLETION_TOKENS", "Fit", "compact_tools", "fit_prompt"]

#: the most compact level :func:`compact_tools` knows
COMPACT_LEVELS = 3
#: completion tokens a prompt must leave room for (fewer when the client asks for fewer)
MIN_COMPLETION_TOKENS = 256

# (tool description limit, parameter description limit; None: removed) per level
_LIMITS: dict[int, tuple[int | None, int | None]] = {1: (200, 100), 2: (100, None), 3: (None, None)}
# keywords whose values are schemas keyed by a name (the keys are not keywords)
_NAMED_SCHEMAS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
# keywords whose values are data, not schemas
_DATA = frozenset({"enum", "const", "default", "examples", "required"})


@dataclass(frozen=True)
class Fit:
    """How a request fits: the tools as they will be offered, and the numbers."""

    tools: tuple[ToolSpec, ...]
    #: 0: as sent; 1 to :data:`COMPACT_LEVELS`: compacted
    level: int
    #: tokens of the prompt the model will see (the first call's)
    prompt_tokens: int
    #: the completion limit, clamped to what the context leaves (None: none asked for)
    max_tokens: int | None
    #: the context window; None when unknown (nothing was checked)
    context_tokens: int | None = None


def fit_prompt(
    tools: Sequence[ToolSpec],
    measure: Callable[[tuple[ToolSpec, ...]], int],
    context_tokens: int | None,
    max_tokens: int | None,
    margin: Callable[[int], int] = lambda _tokens: 0,
) -> Fit:
    """The least compacted ``tools`` whose prompt (``measure(tools)`` tokens) leaves room
    for the reserved completion in ``context_tokens``; ``max_tokens`` clamped to what is
    left less ``margin(prompt tokens)``. An unknown context (None) checks nothing.
    Raises :class:`PromptTooLong`."""
    offered = tuple(tools)
    if context_tokens is None:
        return Fit(offered, 0, measure(offered), max_tokens)
    # in a context too small for the whole reserve (one learned from an upstream's error
    # can be), half of it is reserved: the maximum a prompt may take is never negative
    wanted = MIN_COMPLETION_TOKENS if max_tokens is None else min(max_tokens, MIN_COMPLETION_TOKENS)
    reserve = max(1, min(wanted, context_tokens // 2))
    limit = max(0, context_tokens - reserve)
    tokens = 0
    for level in range(COMPACT_LEVELS + 1 if offered else 1):
        compacted = compact_tools(offered, level)
        tokens = measure(compacted)
        if tokens <= limit:
            left = max(1, context_tokens - tokens - margin(tokens))
            clamped = None if max_tokens is None else min(max_tokens, left)
            return Fit(compacted, level, tokens, clamped, context_tokens)
    raise PromptTooLong(tokens, limit)


def compact_tools(tools: Sequence[ToolSpec], level: int) -> tuple[ToolSpec, ...]:
    """``tools`` with descriptions shortened to compaction ``level`` (see the module
    docstring); every tool kept, every schema's structure unchanged."""
    if level <= 0:
        return tuple(tools)
    tool_limit, param_limit = _LIMITS[min(level, COMPACT_LEVELS)]
    return tuple(
        tool.model_copy(
            update={
                "description": _shorten(tool.description, tool_limit),
                "parameters": _schema(tool.parameters, param_limit),
            }
        )
        for tool in tools
    )


def _shorten(text: str, limit: int | None) -> str:
    """The first sentence of ``text``, whitespace collapsed, cut at ``limit`` (None: nothing)."""
    if limit is None:
        return ""
    flat = " ".join(text.split())
    sentence = re.match(r"(.+?[.!?])(?:\s|$)", flat)
    if sentence:
        flat = sentence[1]
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _schema(schema: Any, limit: int | None) -> Any:
    """A schema with every ``description`` shortened (``None``: removed)."""
    if isinstance(schema, list):
        return [_schema(s, limit) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "description" and isinstance(value, str):
            if limit is not None:
                out[key] = _shorten(value, limit)
        elif key in _NAMED_SCHEMAS and isinstance(value, dict):
            out[key] = {name: _schema(sub, limit) for name, sub in value.items()}
        elif key in _DATA:
            out[key] = value
        else:
            out[key] = _schema(value, limit)
    return out
