"""Clauses: a call takes its values from the part of the request that asks for it.

A request with several tasks, one per clause, is read by a small model as one bag of
values: "Multiply 3 by 7, and add 10 and 5" is called as ``add(3, 10)``, "Add 30 and
12, then convert the sum from km to miles" as ``convert_km_to_miles(12)``. The
request is cut into clauses at punctuation (``, ; : ! ?``, a sentence's full stop, a
line break); a clause *asks for* a tool when it holds a word of the tool's name
("add", "multiply", "convert", "miles", "weather"; :func:`name_words`).

A call's value is **misplaced** when every clause of the request that holds it asks
for other tools only, while some clause asks for the called tool: ``add(3, 10)`` takes
3 from "Multiply 3 by 7", which asks for ``multiply``. Values found in a clause that
names no tool, or in the called tool's own clause, or not in the request at all (a
result), pass; so does everything when the request has fewer than two clauses asking
for tools ("Paris weather and Tokyo time" is one clause: nothing to judge).

The correction names the clause the value came from and the tools it asks for; the
retry offers those tools (or, once they have run, the called tool again), their number
parameters held to that clause's numbers (:func:`retry_tools`), and the answer.

A value is misplaced too when it is an **optional** number argument that the request
holds only inside the text of another argument: "the derivative of 3x^2 + 2x - 1" called
with ``function="3x^2 + 2x - 1", x_value=3`` (the 3 is the formula's, not a point the
user gave; :func:`nested`). A number written on its own elsewhere in the request, or
found in a result, passes. The retry offers the called tool without that parameter.

Once per round: a second misplaced call runs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from agentfsm.core.choice import ToolChoice
from agentfsm.core.messages import Message, ToolCall, ToolSpec
from agentfsm.guards._history import called, results, told
from agentfsm.policy._hold import hold, numbers_for
from agentfsm.guards.base import ACCEPT, Correction, Verdict
from agentfsm.policy.base import Policy, correction_of, refused_calls
from agentfsm.policy.grounding import grounded, number_spans, numbers_in, request_of, values_of

__all__ = ["GUARD", "POLICY", "REASON", "ClausesPolicy", "Misplaced", "Nested", "check", "clauses", "misplaced", "name_words", "nested",
           "retry_tools", "words"]

GUARD = "clauses"
REASON: Final = "misplaced_value"
#: where a clause ends: punctuation, a full stop before a space or the end, a line break
_CUT = re.compile(r"[;:!?\n]|,(?!\d)|\.(?!\d)")
_WORD = re.compile(r"[a-z]+")
#: name words that say nothing about which task a clause asks for
_FILLER = frozenset("get set the and for from with into per tool info data value values by to of in on at".split())


def words(text: str) -> list[str]:
    """The lowercase words of ``text``, camelCase split ("getWeather" is get, weather)."""
    return _WORD.findall(re.sub(r"([a-z])([A-Z])", r"\1 \2", text).lower())


def name_words(tool: ToolSpec) -> set[str]:
    """The words of a tool's name that a request may use for it (3+ letters, no filler):
    ``convert_km_to_miles`` gives convert and miles."""
    return {w for w in words(tool.name) if len(w) >= 3 and w not in _FILLER}


def _asks_for(clause: str, tools: Sequence[ToolSpec]) -> set[str]:
    said = set(_WORD.findall(clause.lower()))
    return {
        t.name for t in tools
        if any(w in said or w + "s" in said or w + "es" in said for w in name_words(t))
    }


def clauses(request: str, tools: Sequence[ToolSpec]) -> list[tuple[str, set[str]]]:
    """The request's clauses (stripped, non-empty), each with the tools it asks for."""
    parts = (p.strip() for p in _CUT.split(request))
    return [(p, _asks_for(p, tools)) for p in parts if p]


@dataclass(frozen=True)
class Misplaced:
    """A call's value found only in clauses asking for other tools."""

    index: int
    call: ToolCall
    value: float | str
    clause: str
    #: the tools that clause asks for
    owners: frozenset[str]


def misplaced(history: Sequence[Message], calls: Sequence[ToolCall], tools: Sequence[ToolSpec]) -> Misplaced | None:
    """The first of ``calls`` with a value taken from a clause that asks for other
    tools only, or None."""
    parts = clauses(request_of(history), tools)
    if sum(1 for _, asked in parts if asked) < 2:
        return None
    for index, call in enumerate(calls):
        if not any(call.name in asked for _, asked in parts):
            continue  # the request never names this tool: its values cannot be placed
        for value in values_of(call.arguments):
            holding = [(text, asked) for text, asked in parts if grounded(value, text)]
            if holding and all(asked and call.name not in asked for _, asked in holding):
                return Misplaced(index, call, value, holding[0][0], frozenset(holding[0][1]))
    return None


@dataclass(frozen=True)
class Nested:
    """An optional number argument the request holds only inside another argument's text."""

    index: int
    call: ToolCall
    param: str
    value: float
    #: the argument whose text holds the value, and that text
    within: str
    text: str


def _spans(text: str, request: str) -> list[tuple[int, int]]:
    needle = text.strip().lower()
    return [(m.start(), m.end()) for m in re.finditer(re.escape(needle), request)] if len(needle) >= 2 else []


def nested(history: Sequence[Message], calls: Sequence[ToolCall], tools: Sequence[ToolSpec]) -> Nested | None:
    """The first optional number argument of ``calls`` that the request writes only
    inside the text another argument of the same call carries, or None."""
    request = request_of(history).lower()
    specs = {t.name: t for t in tools}
    earlier = results(history)
    for index, call in enumerate(calls):
        spec = specs.get(call.name)
        if spec is None or not isinstance(call.arguments, dict):
            continue
        required = set(spec.parameters.get("required") or ())
        texts = {n: v for n, v in call.arguments.items() if isinstance(v, str)}
        for name, value in call.arguments.items():
            if name in required or isinstance(value, bool) or not isinstance(value, int | float):
                continue
            at = number_spans(float(value), request)
            if not at or any(grounded(float(value), r) for r in earlier):  # a result's number
                continue
            for within, text in texts.items():
                covers = _spans(text, request)
                if covers and all(any(s <= a and b <= e for s, e in covers) for a, b in at):
                    return Nested(index, call, name, float(value), within, text)
    return None


def _without(tool: ToolSpec, param: str) -> ToolSpec:
    """``tool`` with ``param`` (an optional parameter) taken out of its schema."""
    props = tool.parameters.get("properties")
    if not isinstance(props, dict):
        return tool
    parameters = {**tool.parameters, "properties": {n: s for n, s in props.items() if n != param}}
    return tool.model_copy(update={"parameters": parameters})


def retry_tools(history: Sequence[Message], refused: Sequence[ToolCall], tools: Sequence[ToolSpec]) -> tuple[ToolSpec, ...]:
    """The tools a retry offers after a misplaced value (``refused``: the rejected
    reply's calls, ``history`` before it): those the value's clause asks for, their
    number parameters held to the numbers of that clause and of the turn's results."""
    found = misplaced(history, refused, tools)
    if found is None:
        inner = nested(history, refused, tools)
        if inner is not None:  # the called tool, without the parameter it filled from another's text
            return tuple(_without(t, inner.param) for t in tools if t.name == inner.call.name)
        return tuple(tools)
    in_results = {n for r in results(history) for n in numbers_in(r)}
    if not found.owners & called(history):
        # the value's own task is not done: its tools, on its clause's numbers
        offered = [t for t in tools if t.name in found.owners]
        given = numbers_in(found.clause)
    else:
        # its task is done: the called tool again, on the numbers of its own clauses
        offered = [t for t in tools if t.name == found.call.name]
        own = [text for text, asked in clauses(request_of(history), tools) if found.call.name in asked]
        given = {n for text in own for n in numbers_in(text)}
    return tuple(hold(t, numbers_for(t, given, in_results)) for t in offered)


def check(history: Sequence[Message], calls: Sequence[ToolCall], tools: Sequence[ToolSpec]) -> Verdict:
    """Correct the first of ``calls`` with a value taken from a clause that asks for
    other tools only (once per round: a second such call runs)."""
    if told(history, REASON, this_round=True):
        return ACCEPT
    found = misplaced(history, calls, tools)
    if found is None:
        return _check_nested(history, calls, tools)
    shown = f"{found.value:g}" if isinstance(found.value, float) else repr(found.value)
    owners = ", ".join(sorted(found.owners))
    message = (
        f'{found.call.name} took {shown} from "{found.clause}", the part of the request for {owners}. '
        f'Call {owners} with the values of "{found.clause}", or answer the user.'
    )
    return Correction(guard=GUARD, reason=REASON, message=message, call_index=found.index,
                      detail=f"call {found.index}: {found.call.name} took {shown} from {found.clause!r} ({owners})")


def _check_nested(history: Sequence[Message], calls: Sequence[ToolCall], tools: Sequence[ToolSpec]) -> Verdict:
    found = nested(history, calls, tools)
    if found is None:
        return ACCEPT
    name, param = found.call.name, found.param
    message = (
        f'{param}={found.value:g} is part of {found.within} "{found.text}", not a value the user gave '
        f"for {param}. Call {name} without {param}, or answer the user."
    )
    return Correction(guard=GUARD, reason=REASON, message=message, call_index=found.index,
                      detail=f"call {found.index}: {name}.{param}={found.value:g} lies inside {found.within}={found.text!r}")


class ClausesPolicy(Policy):
    """A call takes its values from the part of the request that asks for its tool."""

    name = "clauses"
    needs_grounding = True

    def check_call(
        self,
        history: Sequence[Message],
        calls: Sequence[ToolCall],
        tools: Sequence[ToolSpec],
        tool_choice: ToolChoice,
        conversation: str,
    ) -> Verdict:
        return check(history, calls, tools)

    def retry_offer(
        self, history: Sequence[Message], tools: Sequence[ToolSpec], tool_choice: ToolChoice
    ) -> tuple[ToolSpec, ...] | None:
        """The tools the value's clause asks for, held to its numbers (:func:`retry_tools`)."""
        if correction_of(history) != REASON:
            return None
        return retry_tools(history[:-2], refused_calls(history, tools), tools)

    def wants_vote(self, reason: str, first_decision: bool) -> bool | None:
        # the correction names the clause and the retry is held to its numbers: no vote first
        return False if reason == REASON else None


POLICY = ClausesPolicy()
