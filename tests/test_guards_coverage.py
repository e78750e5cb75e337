"""Coverage: an answer after results that leaves part of the request undone is sent
back once; and a repeated call is told its own result."""

from __future__ import annotations

from typing import Any

from agentfsm.core.engine import Answer, CallTools, Correct, EngineConfig, step
from agentfsm.core.messages import AssistantMessage, Message, ToolCall, ToolMessage, ToolResult, UserMessage
from agentfsm.eval.tasks import add, get_capital, get_weather
from agentfsm.guards import coverage, repeated_call
from agentfsm.guards.base import Accept, Correction
from agentfsm.runtime.tools import ToolRegistry
from agentfsm.testing.example_tools import convert_km_to_miles, multiply

PLACES = ToolRegistry([get_weather, get_capital]).specs
MATH = ToolRegistry([multiply, add, convert_km_to_miles]).specs


def call(name: str, i: int = 0, **args: Any) -> ToolCall:
    return ToolCall(id=f"call_{i}", name=name, arguments=args)


def after(request: str, *done: tuple[ToolCall, str]) -> list[Message]:
    history: list[Message] = [UserMessage(content=request)]
    for made, result in done:
        history += [
            AssistantMessage(content="", tool_calls=(made,)),
            ToolMessage(result=ToolResult(call_id=made.id, name=made.name, content=result)),
        ]
    return history


def test_what_a_request_names_that_no_call_used() -> None:
    capitals = after("What are the capitals of Peru and Kenya?", (call("get_capital", country="Kenya"), "Nairobi"))
    assert coverage.uncovered(capitals, PLACES) == ["Peru"]
    chain = after("Find the capital of Norway, then tell me its weather.", (call("get_capital", country="Norway"), "Oslo"))
    assert coverage.uncovered(chain, PLACES) == ["weather (get_weather)"]
    sums = after("Multiply 3 by 7, and add 10 and 5.", (call("add", a=3, b=10), "13.0"))
    assert coverage.uncovered(sums, MATH) == ["7", "5", "multiply"]
    # the first word of a sentence is not a name; a request fully used leaves nothing
    done = after("What's the weather in Example City?", (call("get_weather", city="Example City"), "overcast"))
    assert coverage.uncovered(done, PLACES) == []
    converted = after("Convert 100 km to miles.", (call("convert_km_to_miles", km=100), "62.14"))
    assert coverage.uncovered(converted, MATH) == []


def test_an_answer_leaving_part_of_the_request_undone_is_sent_back_once() -> None:
    config = EngineConfig(tools=PLACES, dialect="json-protocol", tool_choice="auto", grounding=True)
    history = after("Find the capital of Norway, then tell me its weather.", (call("get_capital", country="Norway"), "Oslo"))
    early = step(history, '{"final": {"content": "The capital of Norway is Oslo."}}', config)
    assert isinstance(early, Correct) and early.reason == "uncovered_request"
    assert "The result of get_capital is Oslo." in early.message.content
    assert "weather (get_weather)" in early.message.content
    history += [early.assistant, early.message]
    # the retry may call: the next step of the chain runs
    assert isinstance(step(history, '{"action": {"tool": "get_weather", "args": {"city": "Oslo"}}}', config), CallTools)
    # or answer again: told once per turn, the second answer stands
    assert isinstance(step(history, '{"final": {"content": "The capital of Norway is Oslo."}}', config), Answer)
    # only under auto, and only with grounding on (small models)
    assert isinstance(coverage.check(history[:3], PLACES, "required"), Accept)
    off = EngineConfig(tools=PLACES, dialect="json-protocol", tool_choice="auto")
    assert isinstance(step(history[:3], '{"final": {"content": "Oslo."}}', off), Answer)


def test_a_repeated_call_is_told_its_own_result_and_the_others() -> None:
    history: list[Message] = [
        UserMessage(content="What is the weather in Oslo and in Paris?"),
        AssistantMessage(content="", tool_calls=(call("get_weather", 0, city="Oslo"), call("get_weather", 1, city="Paris"))),
        ToolMessage(result=ToolResult(call_id="call_0", name="get_weather", content="snowing, -3 °C")),
        ToolMessage(result=ToolResult(call_id="call_1", name="get_weather", content="sunny, 18 °C")),
    ]
    verdict = repeated_call.check(history, [call("get_weather", 2, city="Oslo")], "auto")
    assert isinstance(verdict, Correction)
    assert verdict.message.startswith("You already called get_weather with these arguments and the result was: snowing, -3 °C")
    assert "get_weather(city='Paris') is sunny, 18 °C." in verdict.message
