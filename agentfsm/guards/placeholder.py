"""Placeholder arguments: values copied from the contract's example, not the conversation.

The contract shows an example call whose arguments are placeholders: a string
parameter ``city`` is shown as ``"city"`` or ``"example city"``, a number as
:data:`~agentfsm.dialects._render.EXAMPLE_NUMBER`. A small model that finds no value in
the request copies them, so a call like ``{"city": "example city"}`` means "I have
nothing to put here". This guard rejects such a call, naming the argument.

A value counts as a placeholder only when the conversation itself does not contain
it (a user may well ask about a city called "city", or about 1.5 kg). Integers and
booleans are never judged: ``1`` and ``true`` are too often right.

Under constrained decoding the retry also leaves the tool out of the grammar (see
:mod:`agentfsm.runtime.turn`), so the model has to pick another tool or answer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from agentfsm.core._types import ToolChoice
from agentfsm.dialects._render import EXAMPLE_NUMBER, EXAMPLE_PREFIX
from agentfsm.dialects.base import ParsedReply
from agentfsm.guards.base import ACCEPT, Correction, Verdict
from agentfsm.core.messages import ToolSpec

__all__ = ["GUARD", "REASON", "check", "find_placeholder"]

GUARD = "placeholder"
REASON = "placeholder_argument"
_MAX_SHOWN = 60
_NUMBER = re.compile(r"(?<![\d.])" + re.escape(str(EXAMPLE_NUMBER)) + r"(?!\d)")


def _placeholder_text(name: str, value: str, source: str) -> bool:
    text = value.strip().lower()
    if text not in (name.lower(), f"{EXAMPLE_PREFIX}{name}".lower()):
        return False
    return text not in source


def find_placeholder(arguments: Mapping[str, Any], source: str) -> tuple[str, Any] | None:
    """The first ``(parameter, value)`` in ``arguments`` that is an example placeholder
    absent from ``source`` (the conversation's text, lowercased); nested objects and
    lists are searched too."""
    for name, value in arguments.items():
        found = _find(name, value, source)
        if found is not None:
            return found
    return None


def _find(name: str, value: Any, source: str) -> tuple[str, Any] | None:
    if isinstance(value, str):
        return (name, value) if _placeholder_text(name, value, source) else None
    if isinstance(value, float) and value == EXAMPLE_NUMBER:
        return None if _NUMBER.search(source) else (name, value)
    if isinstance(value, list):
        for item in value:
            found = _find(name, item, source)
            if found is not None:
                return found
    elif isinstance(value, dict):
        return find_placeholder(value, source)
    return None


def check(
    parsed: ParsedReply, tools: Sequence[ToolSpec], tool_choice: ToolChoice, source: str
) -> Verdict:
    """Reject the first call to an offered tool that carries a placeholder argument.

    ``source`` is the conversation's text (user turns, tool results, system prompts),
    lowercased.
    """
    offered = {t.name for t in tools}
    for index, call in enumerate(parsed.tool_calls):
        if call.name not in offered:
            continue  # the unknown_tool guard's business
        found = find_placeholder(call.arguments, source)
        if found is None:
            continue
        name, value = found
        shown = repr(value) if len(repr(value)) <= _MAX_SHOWN else repr(value)[:_MAX_SHOWN] + "..."
        message = (
            f"In your call to {call.name}, {name} = {shown} is the example value from the "
            "instructions, not a value from this conversation. Take every argument from the "
            "user's request."
        )
        if tool_choice in ("auto", "none"):
            message += " If no tool fits the request, answer it directly without calling a tool."
        return Correction(
            guard=GUARD,
            reason=REASON,
            message=message,
            detail=f"call {index}: {call.name}.{name} = {shown}",
            call_index=index,
        )
    return ACCEPT
