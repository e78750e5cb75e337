"""Relevance: under ``auto``, a first call must be to a tool the request is about.

Offered a tool, a small model calls it whatever the request asks: "the area of a
triangle with base 10 and height 5" becomes ``determine_body_mass_index(weight=10,
height=5)``, "the perimeter of a rectangle" ``solve_quadratic_equation(5, 4, 5)``. The
values come from the request, so grounding passes them.

A tool is *about* a request when a word of its name (generic verbs such as get, find,
calculate left out) or of its description's first sentence (words of 5+ letters, with
the same filler left out) occurs in the request, a word matching another by its first
letters ("roots" and "root", "multiply" and "multiplied"). The description's words that
name the tool's parameters do not count: "Calculate body mass index given weight and
height" is about body mass, not about a height. The check runs on the first
decision of a user turn, before any result (a chain's later steps take their subject
from results), under ``auto`` only (an answer must be a valid outcome), with grounding
(small models). The correction asks for a tool the request is about, offered with the
answer, or, when none is, the answer alone.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from agentfsm.core.choice import ToolChoice
from agentfsm.core.messages import Message, ToolCall, ToolMessage, ToolSpec
from agentfsm.guards._history import told, turn
from agentfsm.guards.base import ACCEPT, Correction, Verdict
from agentfsm.policy.base import Policy, correction_of
from agentfsm.policy.clauses import name_words, words
from agentfsm.policy.grounding import request_of

__all__ = ["GUARD", "POLICY", "REASON", "RelevancePolicy", "about", "check", "retry_tools"]

GUARD = "relevance"
REASON: Final = "irrelevant_tool"
_SENTENCE = re.compile(r"(?<=[.!?])\s")
#: words that say what a tool does in general, not what it is about
_FILLER = frozenset(
    "get set the and for from with into per tool info data value values by to of in on at find make do run "
    "compute computes calculate calculates calculator determine determines given provided based function "
    "returns return using specified specific certain about which where there their other".split()
)


def _subject(tool: ToolSpec) -> set[str]:
    first = _SENTENCE.split(tool.description.strip(), maxsplit=1)[0] if tool.description.strip() else ""
    named = name_words(tool)
    props = tool.parameters.get("properties")
    inputs = {w for p in props for w in words(str(p))} if isinstance(props, dict) else set()
    # a description naming its inputs ("given weight and height") is not about them
    described = {w for w in words(first) if len(w) >= 5} - inputs
    return (named | described) - _FILLER


def _said(word: str, said: set[str]) -> bool:
    if word in said:
        return True
    stem = word[: max(4, len(word) - 2)]
    return len(word) >= 4 and any(len(s) >= 4 and s.startswith(stem) for s in said)


def about(tool: ToolSpec, request: str) -> bool:
    """Whether ``request`` is about ``tool`` (see the module's rule)."""
    said = set(words(request))
    return any(_said(w, said) for w in _subject(tool))


def retry_tools(history: Sequence[Message], tools: Sequence[ToolSpec]) -> tuple[ToolSpec, ...]:
    """The tools a retry offers after this guard's correction: those the request is
    about (with the answer); none when it is about none of them."""
    request = request_of(history)
    return tuple(t for t in tools if about(t, request))


def check(history: Sequence[Message], calls: Sequence[ToolCall], tools: Sequence[ToolSpec],
          tool_choice: ToolChoice) -> Verdict:
    """Correct the first of ``calls`` to a tool the request is not about (the first
    decision of a user turn, under ``auto``, once per turn)."""
    if tool_choice != ToolChoice.AUTO or any(isinstance(m, ToolMessage) for m in turn(history)) or told(history, REASON):
        return ACCEPT
    request = request_of(history)
    by_name = {t.name: t for t in tools}
    for index, call in enumerate(calls):
        tool = by_name.get(call.name)
        if tool is None or about(tool, request):
            continue
        fitting = [t.name for t in tools if about(t, request)]
        ask = (f"Call {', '.join(fitting)} if the request needs it, or reply to the user directly."
               if fitting else "Reply to the user's message directly.")
        return Correction(
            guard=GUARD, reason=REASON, call_index=index,
            message=f'The request is not about {call.name}: "{request}"\n{ask}',
            detail=f"call {index}: {call.name}: no word of its name or description is in the request",
        )
    return ACCEPT


class RelevancePolicy(Policy):
    """The first call of a user turn is to a tool the request is about."""

    name = "relevance"
    needs_grounding = True

    def check_call(
        self,
        history: Sequence[Message],
        calls: Sequence[ToolCall],
        tools: Sequence[ToolSpec],
        tool_choice: ToolChoice,
        conversation: str,
    ) -> Verdict:
        return check(history, calls, tools, tool_choice)

    def retry_offer(
        self, history: Sequence[Message], tools: Sequence[ToolSpec], tool_choice: ToolChoice
    ) -> tuple[ToolSpec, ...] | None:
        """The tools the request is about, or none (:func:`retry_tools`), and the answer."""
        return retry_tools(history[:-2], tools) if correction_of(history) == REASON else None


POLICY = RelevancePolicy()
