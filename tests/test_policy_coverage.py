"""Coverage: an answer after results that leaves part of the request undone is sent
back once; and a repeated call is told its own result."""

from __future__ import annotations

from agentfsm.core._types import POLICY_NAMES
from agentfsm.core.choice import ToolChoice
from agentfsm.engine.decide import Answer, CallTools, Correct, EngineConfig, step
from agentfsm.guards import repeated_call
from agentfsm.policy import coverage
from agentfsm.guards.base import Accept, Correction

from tests._histories import MATH, PLACES, after, call, two_weathers

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
    config = EngineConfig(tools=PLACES, dialect="json-protocol", tool_choice="auto", grounding=True, policies=POLICY_NAMES)
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
    assert isinstance(coverage.check(history[:3], PLACES, ToolChoice.parse("required")), Accept)
    off = EngineConfig(tools=PLACES, dialect="json-protocol", tool_choice="auto")
    assert isinstance(step(history[:3], '{"final": {"content": "Oslo."}}', off), Answer)


def test_a_repeated_call_is_told_its_own_result_and_the_others() -> None:
    history = two_weathers()
    verdict = repeated_call.check(history, [call("get_weather", 2, city="Oslo")], ToolChoice.parse("auto"))
    assert isinstance(verdict, Correction)
    assert verdict.message.startswith("You already called get_weather with these arguments and the result was: snowing, -3 °C")
    assert "get_weather(city='Paris') is sunny, 18 °C." in verdict.message


def test_the_retry_after_coverage_holds_parameters_to_what_the_request_left() -> None:
    from agentfsm.core.backend import Capabilities
    from agentfsm.engine.decide import plan

    config = EngineConfig(tools=PLACES, dialect="json-protocol", tool_choice="auto", grounding=True, policies=POLICY_NAMES)
    history = after("What are the capitals of Peru and Kenya?", (call("get_capital", country="Kenya"), "Nairobi"))
    sent = step(history, '{"final": {"content": "Nairobi."}}', config)
    assert isinstance(sent, Correct) and sent.reason == "uncovered_request"
    history += [sent.assistant, sent.message]
    offered = {t.name: t.parameters["properties"] for t in plan(history, config, Capabilities(json_schema=True),
                                                                "constrained").tools}
    # the name no call used, and the result for a chain's next step
    assert offered["get_capital"]["country"]["enum"] == ["Peru", "Nairobi"]
    assert offered["get_weather"]["city"]["enum"] == ["Peru", "Nairobi"]
    # numbers: the request's unused ones, each once when they fill the parameters
    sums = after("Multiply 3 by 7, and add 10 and 5.", (call("multiply", a=3, b=7), "21.0"))
    held = {t.name: t.parameters for t in coverage.retry_tools(sums, MATH)}
    assert [{k: v["const"] for k, v in b["properties"].items()} for b in held["add"]["anyOf"]] == [
        {"a": 5, "b": 10}, {"a": 10, "b": 5}]
    assert held["convert_km_to_miles"]["properties"]["km"]["enum"] == [5, 10]
    # nothing left unused: the tools as they are
    done = after("What is the capital of Japan?", (call("get_capital", country="Japan"), "Tokyo"))
    assert coverage.retry_tools(done, PLACES) == tuple(PLACES)
