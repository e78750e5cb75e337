"""Coverage: an answer after results must not leave part of the request undone.

A small model answers as soon as it holds one result: "What are the capitals of Peru
and Kenya?" ends with Nairobi alone, "Find the capital of Norway, then tell me its
weather" with the capital. Once per user turn, under ``auto``, an answer given after
results is checked against the request for what no call of the turn has used:

- **values**: a number, or a name written with a capital letter inside a sentence
  ("Peru", "Example City"), that no call's arguments hold;
- **tools**: a tool the request names by its subject ("weather" for ``get_weather``,
  "miles" for ``convert_km_to_miles``; generic verbs such as get or find do not count)
  that was not called in this turn.

The correction lists what is left with the results so far and lets the model call a
tool or answer (the retry offers every tool, its parameters held to the values left
and the turn's results: :func:`retry_tools`); a second answer passes whatever it says.
Parts of a request that need no tool ("in one sentence", "3 examples") cost one retry.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from agentfsm.core.choice import ToolChoice
from agentfsm.core.messages import AssistantMessage, Message, ToolMessage, ToolSpec
from agentfsm.guards._history import results, told, turn
from agentfsm.guards.base import ACCEPT, Correction, Verdict
from agentfsm.policy.base import Policy, correction_of
from agentfsm.policy._hold import hold, numbers_for
from agentfsm.policy.clauses import name_words
from agentfsm.guards._history import results_so_far
from agentfsm.policy.grounding import numbers_in, request_of, values_of

__all__ = ["GUARD", "POLICY", "REASON", "CoveragePolicy", "check", "retry_tools", "uncovered"]

GUARD = "coverage"
REASON: Final = "uncovered_request"
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.]*\w)")
#: a capitalised word run inside a sentence (not the sentence's first word)
_NAME = re.compile(r"(?<=[a-z0-9,;:] )[A-Z][\w'-]*(?: [A-Z][\w'-]*)*")
_WORD = re.compile(r"[a-z]+")
#: the longest result a retry offers as a value
_SHORT = 60
#: words of a tool name that say what it does, not what it is about
_GENERIC = frozenset(
    "get set find list search fetch make create compute calculate run do call lookup look up query read "
    "write update delete add remove check show tell give to of from by for in on at the and or a an "
    "with into per info data value values result results tool".split()
)


def _subjects(tool: ToolSpec) -> set[str]:
    return name_words(tool) - _GENERIC


def _unused(history: Sequence[Message]) -> tuple[list[float], list[str], set[str]]:
    """The request's numbers and capitalised names no call of its turn used, and the
    tools the turn called."""
    request = request_of(history)
    called: set[str] = set()
    used_numbers: set[float] = set()
    used_text: list[str] = []
    for msg in turn(history):
        if isinstance(msg, AssistantMessage):
            for call in msg.tool_calls:
                called.add(call.name)
                for value in values_of(call.arguments):
                    if isinstance(value, float):
                        used_numbers.add(value)
                    else:
                        used_text.append(value)
    used = " ".join(used_text)
    numbers: list[float] = []
    for match in _NUMBER.finditer(request):
        if float(match.group()) not in used_numbers and float(match.group()) not in numbers:
            numbers.append(float(match.group()))
    names = list(dict.fromkeys(m.group() for m in _NAME.finditer(request) if m.group().lower() not in used))
    return numbers, names, called


def uncovered(history: Sequence[Message], tools: Sequence[ToolSpec]) -> list[str]:
    """What the latest request names that no call of its turn has used: its values
    (numbers, capitalised names) and the tools it names by subject."""
    numbers, names, called = _unused(history)
    left = [f"{n:g}" for n in numbers] + names
    words = set(_WORD.findall(request_of(history).lower()))
    for tool in tools:
        named = sorted(w for w in _subjects(tool) if w in words or w + "s" in words)
        if tool.name not in called and named:
            subject = "/".join(named)
            left.append(tool.name if subject == tool.name else f"{subject} ({tool.name})")
    return left


def retry_tools(history: Sequence[Message], tools: Sequence[ToolSpec]) -> tuple[ToolSpec, ...]:
    """The tools a retry offers after this guard's correction (``history`` before the
    answer it sent back): every tool, its parameters held to the values left unused
    (numbers, names) and to the turn's short results, when some are left."""
    numbers, names, _ = _unused(history)
    if not numbers and not names:
        return tuple(tools)
    found = [" ".join(r.split()) for r in results(history)]
    shown = [r for r in found if r and len(r) <= _SHORT]
    in_results = {n for r in found for n in numbers_in(r)}
    return tuple(
        hold(t, numbers_for(t, set(numbers), in_results) if numbers else set(), names + shown if names else ())
        for t in tools
    )


def check(history: Sequence[Message], tools: Sequence[ToolSpec], tool_choice: ToolChoice) -> Verdict:
    """Correct an answer after results while the request names something no call used
    (once per user turn, under ``auto`` only)."""
    if tool_choice != ToolChoice.AUTO or not any(isinstance(m, ToolMessage) for m in turn(history)) or told(history, REASON):
        return ACCEPT
    left = uncovered(history, tools)
    if not left:
        return ACCEPT
    have = "\n".join(results_so_far(history))
    message = (
        f"The user asked: {request_of(history)}\n{have}\n"
        f"Not used by any call yet: {', '.join(left)}. If the request needs a tool for it, call that tool "
        "now, with values from the user's message or the results; otherwise answer the user."
    )
    return Correction(guard=GUARD, reason=REASON, message=message,
                      detail=f"the request names what no call used: {', '.join(left)}")


class CoveragePolicy(Policy):
    """An answer after results leaves no part of the request unused."""

    name = "coverage"
    needs_grounding = True

    def check_answer(
        self, history: Sequence[Message], content: str, tools: Sequence[ToolSpec], tool_choice: ToolChoice
    ) -> Verdict:
        return check(history, tools, tool_choice)

    def retry_offer(
        self, history: Sequence[Message], tools: Sequence[ToolSpec], tool_choice: ToolChoice
    ) -> tuple[ToolSpec, ...] | None:
        """Every tool, held to the values the request left (:func:`retry_tools`), and the answer."""
        return retry_tools(history[:-2], tools) if correction_of(history) == REASON else None


POLICY = CoveragePolicy()
