"""Tests for the repeated-call loop guard."""

from __future__ import annotations

from typing import Any

from agentfsm.guards import loops
from agentfsm.guards.base import ACCEPT, Stop
from agentfsm.core.messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolMessage,
    ToolResult,
    UserMessage,
)

ASK = UserMessage(content="Weather in Paris?")


def _round(n: int, args: dict[str, Any], content: str, name: str = "get_weather") -> list[Message]:
    call = ToolCall(id=f"c{n}", name=name, arguments=args)
    return [
        AssistantMessage(tool_calls=(call,)),
        ToolMessage(result=ToolResult(call_id=f"c{n}", content=content)),
    ]


def _history(*rounds: list[Message]) -> list[Message]:
    out: list[Message] = [ASK]
    for r in rounds:
        out.extend(r)
    return out


PARIS = {"city": "Paris", "unit": "c"}
NEXT = ToolCall(id="new", name="get_weather", arguments={"unit": "c", "city": "Paris"})


def test_call_signature_is_canonical() -> None:
    a = ToolCall(id="1", name="f", arguments={"b": 1, "a": [1, {"y": 2, "x": 1}]})
    b = ToolCall(id="2", name="f", arguments={"a": [1, {"x": 1, "y": 2}], "b": 1})
    assert loops.call_signature(a) == loops.call_signature(b) == 'f{"a":[1,{"x":1,"y":2}],"b":1}'


def test_stops_after_threshold_identical_rounds() -> None:
    history = _history(*(_round(i, PARIS, "18C") for i in range(3)))
    verdict = loops.check(history, [NEXT], threshold=3)
    assert isinstance(verdict, Stop)
    assert verdict.reason == "loop"
    assert verdict.guard == "loops"
    assert verdict.tool == "get_weather"
    assert verdict.repeats == 3
    assert "3 times in a row" in verdict.detail


def test_below_threshold_is_accepted() -> None:
    history = _history(*(_round(i, PARIS, "18C") for i in range(2)))
    assert loops.check(history, [NEXT], threshold=3) == ACCEPT
    assert loops.repeats(history, NEXT) == 2


def test_a_different_result_breaks_the_run() -> None:
    history = _history(_round(0, PARIS, "18C"), _round(1, PARIS, "19C"), _round(2, PARIS, "19C"))
    assert loops.repeats(history, NEXT) == 2
    assert loops.check(history, [NEXT], threshold=3) == ACCEPT


def test_different_arguments_or_another_call_break_the_run() -> None:
    history = _history(
        _round(0, PARIS, "18C"), _round(1, {"city": "Rome"}, "20C"), _round(2, PARIS, "18C")
    )
    assert loops.repeats(history, NEXT) == 1
    other = ToolCall(id="x", name="get_weather", arguments={"city": "Oslo"})
    assert loops.repeats(history, other) == 0


def test_a_new_user_turn_resets_the_count() -> None:
    history = _history(*(_round(i, PARIS, "18C") for i in range(3)))
    history.append(AssistantMessage(content="It is 18C."))
    history.append(UserMessage(content="And again?"))
    assert loops.check(history, [NEXT]) == ACCEPT


def test_corrections_in_between_do_not_reset() -> None:
    history = _history(_round(0, PARIS, "18C"), _round(1, PARIS, "18C"))
    history.append(AssistantMessage(content="I cannot."))
    history.append(UserMessage(content="Call a tool.", correction="refusal"))
    history.extend(_round(2, PARIS, "18C"))
    assert isinstance(loops.check(history, [NEXT]), Stop)


def test_a_call_without_result_breaks_the_run() -> None:
    history = _history(_round(0, PARIS, "18C"), _round(1, PARIS, "18C"))
    pending = ToolCall(id="c2", name="get_weather", arguments=PARIS)
    history.append(AssistantMessage(tool_calls=(pending,)))
    assert loops.repeats(history, NEXT) == 0


def test_reused_call_ids_are_paired_per_round() -> None:
    # some models number calls from zero each time: results pair with their own round
    history = _history(
        _round(0, PARIS, "18C"),
        _round(0, PARIS, "19C"),
        _round(0, PARIS, "19C"),
        _round(0, PARIS, "19C"),
    )
    assert loops.repeats(history, NEXT) == 3
