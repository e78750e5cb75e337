"""Relevance: the first call of a turn, under auto, must be to a tool the request is
about; otherwise the retry offers the tools it is about, or the answer alone."""

from __future__ import annotations

from agentfsm.core._types import POLICY_NAMES
from agentfsm.core.backend import Capabilities
from agentfsm.engine.decide import CallTools, Correct, EngineConfig, plan, step
from agentfsm.core.messages import ToolSpec, UserMessage
from agentfsm.policy import relevance
from agentfsm.guards.base import Accept

from tests._histories import MATH, PLACES, after, call

BMI = ToolSpec(name="determine_body_mass_index",
               description="Calculate body mass index given weight and height. Note that it is Python.",
               parameters={"type": "object", "properties": {"weight": {"type": "number"}, "height": {"type": "number"}}})
ROOTS = ToolSpec(name="find_roots", description="Find the roots of a quadratic equation ax^2 + bx + c = 0.")
TRIANGLE = "Calculate the area of a triangle given the base is 10 meters and height is 5 meters."


def config(*tools: ToolSpec) -> EngineConfig:
    return EngineConfig(tools=tools, dialect="json-protocol", tool_choice="auto", grounding=True, policies=POLICY_NAMES)


def test_a_request_is_about_a_tool_when_it_uses_a_word_of_its_name_or_first_sentence() -> None:
    assert not relevance.about(BMI, TRIANGLE)  # "height" is a parameter, not what the tool is about
    assert relevance.about(BMI, "What is my body mass index at 80 kg?")
    assert relevance.about(ROOTS, "What is the root of x + 1 = 0?")  # by its first letters
    weather, capital = PLACES
    assert relevance.about(weather, "Weather in Lima?") and relevance.about(capital, "The capitals of Peru and Kenya?")
    multiply, add, convert = MATH
    assert relevance.about(multiply, "What is 1.5 times 2?")  # the description's "times"
    assert relevance.about(add, "Add 17 and 26.") and relevance.about(convert, "How many miles is 42 km?")
    # generic verbs say nothing: "calculate" is in both
    assert not relevance.about(ToolSpec(name="calculate_tax", description="Calculate the income tax."), TRIANGLE)


def test_a_call_to_a_tool_the_request_is_not_about_is_sent_back_for_the_answer() -> None:
    history = [UserMessage(content=TRIANGLE)]
    decision = step(history, '{"action": {"tool": "determine_body_mass_index", "args": {"weight": 10, "height": 5}}}',
                    config(BMI))
    assert isinstance(decision, Correct) and decision.reason == "irrelevant_tool"
    assert decision.message.content == (
        f'The request is not about determine_body_mass_index: "{TRIANGLE}"\nReply to the user\'s message directly.')
    history += [decision.assistant, decision.message]
    assert plan(history, config(BMI), Capabilities(json_schema=True), "constrained").tools == ()
    # once per turn: a second such call runs
    again = step(history, '{"action": {"tool": "determine_body_mass_index", "args": {"weight": 10, "height": 5}}}',
                 config(BMI))
    assert isinstance(again, CallTools)


def test_the_retry_offers_the_tools_the_request_is_about() -> None:
    tools = (*MATH, BMI)
    history = [UserMessage(content="Multiply 12.5 by 4.")]
    decision = step(history, '{"action": {"tool": "determine_body_mass_index", "args": {"weight": 12.5, "height": 4}}}',
                    config(*tools))
    assert isinstance(decision, Correct) and "Call multiply if the request needs it" in decision.message.content
    history += [decision.assistant, decision.message]
    assert [t.name for t in plan(history, config(*tools), Capabilities(json_schema=True), "constrained").tools] == [
        "multiply"]


def test_only_the_first_decision_under_auto_is_judged() -> None:
    chained = after("Find the capital of Norway, then tell me its weather.", (call("get_capital", country="Norway"), "Oslo"))
    assert isinstance(relevance.check(chained, [call("get_weather", 1, city="Oslo")], PLACES, "auto"), Accept)
    request = [UserMessage(content=TRIANGLE)]
    assert isinstance(relevance.check(request, [call("determine_body_mass_index", weight=10)], [BMI], "required"), Accept)
    plain = EngineConfig(tools=(BMI,), dialect="json-protocol", tool_choice="auto")  # grounding off
    assert isinstance(step(request, '{"action": {"tool": "determine_body_mass_index", "args": {"weight": 10}}}', plain),
                      CallTools)
