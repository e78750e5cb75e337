"""Placeholder arguments: a value that names its own slot, not one from the conversation.

The contract shows no value of an offered tool (its format example uses a made-up tool)
and corrections show ``<name>`` where a value goes. A small model that finds no value
in the request may still write the slot's own name (``{"city": "city"}``) or the
template (``"<city>"``).

This guard only **flags** such a call (a note in the logs and the transcript's guard
detail); it never rejects it: ``"city"``, ``"example city"`` or ``1.5`` can be a user's
real value, and turning a real value into a refusal to call is worse than running a
doubtful call whose result the model then sees. A value counts only when the
conversation itself does not contain it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from agentfsm.core.choice import ToolChoice
from agentfsm.core.parsed import ParsedReply
from agentfsm.guards.base import ACCEPT, Accept, Verdict
from agentfsm.core.messages import ToolSpec

__all__ = ["GUARD", "REASON", "check", "find_placeholder"]

GUARD = "placeholder"
REASON: Final = "placeholder_argument"
_MAX_SHOWN = 60


def _placeholder_text(name: str, value: str, source: str) -> bool:
    text = value.strip().lower()
    if text not in (name.lower(), f"<{name}>".lower(), f"example {name}".lower()):
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
    """Flag the first call to an offered tool that carries a placeholder argument (an
    :class:`Accept` with a ``detail``; never a correction).

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
        return Accept(guard=GUARD, detail=f"{REASON} (flagged, call kept): call {index}: {call.name}.{name} = {shown}")
    return ACCEPT
