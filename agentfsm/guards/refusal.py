"""Refusal: a reply without calls that refuses, or says it has no tools, while tools exist.

Which words are a refusal is a language policy's to say
(:mod:`agentfsm.policy.refusal`, English phrases by category); the engine hands this
guard the matcher of its policies (:meth:`~agentfsm.policy.base.Policies.refusal`),
and without one (no language policy) nothing is read as a refusal.

A match is a failed tool turn when tools were offered, the reply has no call, and
either ``tool_choice`` forces a call (``required`` or a tool name), or the reply
claims no tools, an environment limitation, or refuses outright. A soft deflection
("you can check a weather website") under ``tool_choice=auto`` is accepted as a
legitimate prose answer, with a note for the logs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal, TypeAlias

from pydantic import BaseModel, ConfigDict

from agentfsm.core._types import DialectName
from agentfsm.core.choice import ToolChoice
from agentfsm.core.config import DEFAULTS
from agentfsm.core.parsed import ParsedReply
from agentfsm.guards.base import ACCEPT, Accept, Correction, Verdict, action_format, action_name
from agentfsm.core.messages import ToolSpec

__all__ = [
    "CATEGORIES",
    "GUARD",
    "RefusalCategory",
    "RefusalMatch",
    "RefusalMatcher",
    "check",
]

GUARD = "refusal"

RefusalCategory: TypeAlias = Literal[
    "no_tools", "environment_limitation", "hard_refusal", "soft_deflection"
]
#: categories in the order they are tried: the most specific first
CATEGORIES: tuple[RefusalCategory, ...] = (
    "no_tools",
    "environment_limitation",
    "hard_refusal",
    "soft_deflection",
)


class RefusalMatch(BaseModel):
    """Which category of refusal matched, and the normalized text that matched."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    category: RefusalCategory
    phrase: str
    pattern: str


#: what a language policy offers this guard: the refusal a reply's text makes, or None
RefusalMatcher: TypeAlias = Callable[[str], RefusalMatch | None]


def _message(
    found: RefusalMatch, tool_choice: ToolChoice, names: Sequence[str], dialect_name: DialectName
) -> str:
    listed = ", ".join(names[:30])
    lead = {
        "no_tools": f"You do have tools: {listed}.",
        "environment_limitation": f"Your tools can do this for you: {listed}.",
        "hard_refusal": f"You have tools for this: {listed}.",
        "soft_deflection": f"Do not send the user elsewhere. You have tools: {listed}.",
    }[found.category]
    missing = f"Your last response did not include any {action_name(dialect_name)}."
    how = f"Write {action_format(dialect_name)}."
    if tool_choice.mode == "required":
        ask = "You must call one tool now."
    elif tool_choice.name is not None:
        ask = f"You must call {tool_choice.name} now."
    else:
        ask = "Call the tool that fits now; answer directly only if no tool fits."
    return f"{lead} {missing} {ask} {how}"


def check(
    parsed: ParsedReply,
    tool_choice: ToolChoice,
    tools: Sequence[ToolSpec],
    *,
    dialect_name: DialectName = DEFAULTS.dialect,
    match: RefusalMatcher | None = None,
) -> Verdict:
    """Correct a reply without calls that refuses, or claims it has no tools, while tools
    exist; ``match`` reads the refusal (a language policy's; without one, nothing is)."""
    if parsed.tool_calls or not tools or tool_choice.mode == "none" or match is None:
        return ACCEPT
    text = parsed.content or ""
    if not text and parsed.final is not None:
        text = str(parsed.final)
    found = match(text)
    if found is None:
        return ACCEPT
    detail = f"{found.category}: {found.phrase!r}"
    if found.category == "soft_deflection" and not tool_choice.requires_call:
        return Accept(guard=GUARD, detail=f"{detail} accepted as an answer (tool_choice=auto)")
    names = [tool.name for tool in tools]
    return Correction(
        guard=GUARD,
        reason="refusal",
        message=_message(found, tool_choice, names, dialect_name),
        detail=detail,
    )
