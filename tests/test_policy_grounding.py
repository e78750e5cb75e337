"""Grounding: under auto, a call takes something from the conversation, a later call
brings something new, and an answer after results states them."""

from __future__ import annotations

from typing import Any

import pytest

from agentfsm.core.choice import ToolChoice
from agentfsm.core.backend import Capabilities
from agentfsm.core.config import RunConfig
from agentfsm.engine.decide import Answer, CallTools, Correct, EngineConfig, plan, step
from agentfsm.core.messages import AssistantMessage, Message, ToolCall, ToolMessage, ToolResult, ToolSpec, UserMessage
from agentfsm.guards._history import conversation_text
from agentfsm.policy import grounding
from agentfsm.guards.base import Accept, Correction
from agentfsm.eval.fake_tools import get_capital, get_weather
from agentfsm.testing.example_tools import TOOLS
from agentfsm.runtime.tools import ToolRegistry

from tests._histories import MATH, PLACES, after, call, two_weathers

SPECS = ToolRegistry(TOOLS).specs
UNIT = ToolSpec(name="convert", description="", parameters={
    "type": "object",
    "properties": {"value": {"type": "number"}, "unit": {"enum": ["km", "mi"]}, "label": {"type": "string"}},
    "required": ["value", "unit"],
})


@pytest.mark.parametrize(
    ("value", "conversation", "expected"),
    [
        (12.5, "what is 12.5 times 4?", True),
        (4.0, "what is 12.5 times 4?", True),
        (1.5, "what is 12.5 times 4?", False),
        (2.0, "add two and three", False),  # number words: read by the opt-in English policies only
        (1000.0, "about 1,000 people", True),
        (50.0, "the result of multiply is 50.0.", True),  # a tool result
        ("oslo", "weather in oslo?", True),
        ("example city", "weather in example city?", True),
        ("paris, france", "weather in paris", True),  # one of its words
        ("mi", "how many miles is 42 km?", True),  # an abbreviation of a word said
        ("london, uk", "hello! how are you today?", False),
        ("example_city", "weather in example city?", True),  # its letters as written
        ("examplecity", "weather in example city?", True),
        # a value that trails off into prose: one "the" from the conversation is not enough
        ("london}}}\n\nthe output will be\n{", "what's the weather like in example city?", False),
        ("new york city", "weather in new york", True),  # most of its words
        (1.0, "write one short sentence about the sea.", False),  # digits only, in every language
        (6.0, "multiply six by seven", False),
        (6.0, "multipliziere 6 mit 7", True),
        ("", "convert the string to an integer", False),  # an empty string is made up
    ],
)
def test_what_counts_as_from_the_conversation(value: float | str, conversation: str, expected: bool) -> None:
    assert grounding.grounded(value, conversation) is expected


def test_a_call_with_no_value_from_the_conversation_is_refused_under_auto_only() -> None:
    history: list[Message] = [UserMessage(content="Hello! How are you today?")]
    text = "hello! how are you today?"
    verdict = grounding.check(history, [call("multiply", a=1, b=2)], ToolChoice.parse("auto"), SPECS[:1], text)
    assert isinstance(verdict, Correction) and verdict.reason == "ungrounded_call"
    assert "1" not in verdict.message  # nothing to copy into the answer
    assert '"Hello! How are you today?"' in verdict.message  # the request it should answer
    for choice in ("required", "multiply", "none"):
        assert isinstance(grounding.check(history, [call("multiply", a=1, b=2)], ToolChoice.parse(choice), SPECS, text), Accept)
    # one value from the conversation is enough; enum members and calls without values pass
    assert isinstance(grounding.check(history, [call("multiply", a=1, b=12.5)], ToolChoice.parse("auto"), SPECS, "12.5"), Accept)
    assert isinstance(grounding.check(history, [call("convert", value=3, unit="km")], ToolChoice.parse("auto"), [UNIT], "3 please"), Accept)
    assert isinstance(grounding.check(history, [call("convert", unit="km")], ToolChoice.parse("auto"), [UNIT], "hi"), Accept)


def _after_multiply() -> list[Message]:
    return [
        UserMessage(content="Multiply 12.5 by 4, then convert the result from km to miles."),
        AssistantMessage(content="", tool_calls=(call("multiply", a=12.5, b=4),)),
        ToolMessage(result=ToolResult(call_id="call_0", name="multiply", content="50.0")),
    ]


def test_after_results_a_call_must_bring_something_new() -> None:
    history = _after_multiply()
    text = "multiply 12.5 by 4, then convert the result from km to miles. 50.0"
    stale = grounding.check(history, [call("add", 1, a=12.5, b=4)], ToolChoice.parse("auto"), SPECS, text)
    assert isinstance(stale, Correction) and stale.reason == "stale_call"
    assert "The result of multiply is 50.0." in stale.message  # the results, right before the answer
    # a used value and a made-up one bring nothing new either
    made_up = grounding.check(history, [call("add", 1, a=12.5, b=1.0)], ToolChoice.parse("auto"), SPECS, text)
    assert isinstance(made_up, Correction) and made_up.reason == "stale_call"
    # the chain's next step carries the result: new
    assert isinstance(grounding.check(history, [call("convert_km_to_miles", 1, km=50.0)], ToolChoice.parse("auto"), SPECS, text), Accept)


CURRENCY = ToolSpec(name="convert_currency", description="", parameters={
    "type": "object",
    "properties": {"amount": {"type": "number"}, "from_currency": {"type": "string"}, "to_currency": {"type": "string"}},
    "required": ["amount", "from_currency", "to_currency"],
})


def _convert(i: int, amount: float) -> ToolCall:
    return call("convert_currency", i, amount=amount, from_currency="USD", to_currency="EUR")


@pytest.mark.parametrize("request_text", ["Wie viel sind 50 US-Dollar in Euro?", "How much is $50 in euros?"])
def test_a_tool_fed_its_own_result_unasked_is_stale(request_text: str) -> None:
    auto = ToolChoice.parse("auto")
    once = after(request_text, (_convert(0, 50), "46.0 EUR"))
    # "USD" and "EUR", kept unchanged, are written nowhere in the request: a feedback loop
    verdict = grounding.check(once, [_convert(1, 46.0)], auto, [CURRENCY], conversation_text(once))
    assert isinstance(verdict, Correction) and verdict.reason == "stale_call"
    assert "fed back, unasked" in verdict.detail and "The result of convert_currency is 46.0 EUR." in verdict.message
    # another argument changed too, or a number the result does not write: not a loop
    other = call("convert_currency", 1, amount=46.0, from_currency="EUR", to_currency="USD")
    assert isinstance(grounding.check(once, [other], auto, [CURRENCY], conversation_text(once)), Accept)
    unwritten = call("convert_currency", 1, amount=12.0, from_currency="USD", to_currency="EUR")
    assert isinstance(grounding.check(once, [unwritten], auto, [CURRENCY], conversation_text(once)), Correction)


MULTIPLY = ToolSpec(name="multiply", description="", parameters={
    "type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"],
})


@pytest.mark.parametrize("request_text", [
    "Multiply 3 by 2, then multiply the result by 2 again.",
    "Multipliziere 3 mit 2 und das Ergebnis noch einmal mit 2.",
])
def test_a_request_that_writes_the_kept_value_again_asks_for_the_feedback_once(request_text: str) -> None:
    auto = ToolChoice.parse("auto")
    once = after(request_text, (call("multiply", 0, a=3, b=2), "6.0"))
    # "2" is written twice: the request asks for the second multiplication
    assert isinstance(grounding.check(once, [call("multiply", 1, a=6.0, b=2)], auto, [MULTIPLY], conversation_text(once)), Accept)
    # a second time in a row is a loop, whatever the request writes
    twice = after(request_text, (call("multiply", 0, a=3, b=2), "6.0"), (call("multiply", 1, a=6.0, b=2), "12.0"))
    verdict = grounding.check(twice, [call("multiply", 2, a=12.0, b=2)], auto, [MULTIPLY], conversation_text(twice))
    assert isinstance(verdict, Correction) and verdict.reason == "stale_call"


def test_a_number_taken_from_a_longer_result_is_not_fed_back_the_first_time() -> None:
    """Paging a file: the next offset is one of the page's line numbers, not the tool's
    output taken as its input; only the second time in a row is a loop."""
    auto = ToolChoice.parse("auto")
    read = ToolSpec(name="Read", description="", parameters={
        "type": "object",
        "properties": {"file_path": {"type": "string"}, "offset": {"type": "number"}, "limit": {"type": "number"}},
        "required": ["file_path"],
    })
    page = "\n".join(f"{n}\tline {n}" for n in range(1, 6))
    once = after("Read all of /src/app.py", (call("Read", 0, file_path="/src/app.py", offset=1, limit=5), page))
    following = call("Read", 1, file_path="/src/app.py", offset=4, limit=5)
    assert isinstance(grounding.check(once, [following], auto, [read], conversation_text(once)), Accept)


def test_a_tool_whose_only_argument_is_the_result_is_a_loop_the_second_time() -> None:
    auto = ToolChoice.parse("auto")
    km = [s for s in SPECS if s.name == "convert_km_to_miles"]
    once = after("How many miles is 100 km?", (call("convert_km_to_miles", 0, km=100), "62.14"))
    # nothing kept to count: once passes (the repeat and stale rules see the rest)
    assert isinstance(grounding.check(once, [call("convert_km_to_miles", 1, km=62.14)], auto, km, conversation_text(once)), Accept)
    twice = after("How many miles is 100 km?", (call("convert_km_to_miles", 0, km=100), "62.14"),
                  (call("convert_km_to_miles", 1, km=62.14), "38.61"))
    verdict = grounding.check(twice, [call("convert_km_to_miles", 2, km=38.61)], auto, km, conversation_text(twice))
    assert isinstance(verdict, Correction) and verdict.reason == "stale_call"
    # a kept boolean is the schema's, not something a request writes: nothing to count either
    flag = ToolSpec(name="scale", description="", parameters={
        "type": "object", "properties": {"x": {"type": "number"}, "exact": {"type": "boolean"}}, "required": ["x"],
    })
    scaled = after("Scale 100.", (call("scale", 0, x=100, exact=True), "200"))
    assert isinstance(grounding.check(scaled, [call("scale", 1, x=200, exact=True)], auto, [flag], conversation_text(scaled)), Accept)


def test_an_answer_after_results_must_state_one_of_them() -> None:
    history = _after_multiply()
    assert isinstance(grounding.check_answer(history, "12.5 times 4 is 50."), Accept)
    verdict = grounding.check_answer(history, "100.100")
    assert isinstance(verdict, Correction) and verdict.reason == "unsupported_answer"
    assert "The result of multiply is 50.0." in verdict.message
    # a long or multi-line result is summarised, not restated: not judged
    long = [*history[:2], ToolMessage(result=ToolResult(call_id="call_0", content="line one\nline two"))]
    assert isinstance(grounding.check_answer(long, "Done."), Accept)
    # a copied slot of the contract is the runtime-text guard's, for every run (below)
    assert isinstance(grounding.check_answer([UserMessage(content="Hi")], "<your answer>"), Accept)


@pytest.mark.parametrize("small", [True, False])
def test_a_copied_slot_of_the_contract_is_never_an_answer(small: bool) -> None:
    """``<your answer>`` copied from the contract is refused with the language policies on
    or off (a capable model's run has grounding off); with grounding on, the retry offers
    the answer only, as after any answer it refuses."""
    config = EngineConfig(tools=PLACES, dialect="json-protocol", tool_choice="auto", grounding=small)
    history: list[Any] = [UserMessage(content="Hi there")]
    decision = step(history, '{"final": {"content": "<your answer>"}}', config)
    assert isinstance(decision, Correct) and decision.reason == "runtime_text"
    assert decision.message.content == "Write your actual reply to the user's message, in plain words."
    history += [decision.assistant, decision.message]
    offered = plan(history, config, Capabilities(json_schema=True)).tools
    assert offered == (() if small else PLACES)
    # a slot the runtime never wrote is the model's own text
    assert isinstance(step([UserMessage(content="Hi there")], '{"final": {"content": "<3>"}}', config), Answer)


def test_an_answer_refused_for_its_wording_keeps_the_answer_only() -> None:
    """Once the results are judged in hand (a stale call, answer only), an answer refused
    for copying the runtime's text is retried with the answer only: its wording does not
    reopen the calls (the embedded model called again and spent the budget)."""
    config = EngineConfig(tools=MATH, dialect="json-protocol", tool_choice="auto", grounding=True)
    history: list[Message] = _after_multiply()
    stale = step(history, '{"action": {"tool": "add", "args": {"a": 12.5, "b": 4}}}', config)
    assert isinstance(stale, Correct) and stale.reason == "stale_call"
    history += [stale.assistant, stale.message]
    assert plan(history, config, Capabilities(json_schema=True)).tools == ()
    copied = step(history, '{"final": {"content": "Answer the user\'s request now, stating these results."}}', config)
    assert isinstance(copied, Correct) and copied.reason == "runtime_text"
    history += [copied.assistant, copied.message]
    assert plan(history, config, Capabilities(json_schema=True)).tools == ()
    # before any answer-only offer in the round, a refused wording leaves the offer alone
    fresh: list[Message] = [UserMessage(content="Hi there")]
    first = step(fresh, '{"final": {"content": "Take every argument value from the user\'s message or from a tool result."}}', config)
    assert isinstance(first, Correct) and first.reason == "runtime_text"
    fresh += [first.assistant, first.message]
    assert plan(fresh, config, Capabilities(json_schema=True)).tools == MATH


def test_a_missing_value_may_be_fetched_with_another_tool_once() -> None:
    # "the weather in the capital of France": the model calls get_weather(Paris) at once
    on = EngineConfig(tools=PLACES, dialect="json-protocol", tool_choice="auto", grounding=True)
    history: list[Message] = [UserMessage(content="What is the weather in the capital of France?")]
    decision = step(history, '{"action": {"tool": "get_weather", "args": {"city": "Paris"}}}', on)
    assert isinstance(decision, Correct) and decision.reason == "missing_value"
    assert "call it first" in decision.message.content
    history += [decision.assistant, decision.message]
    # the retry offers the tools it did not call, and the answer
    retry = plan(history, on, Capabilities(json_schema=True), "constrained")
    assert [t.name for t in retry.tools] == ["get_capital"]
    fetched = step(history, '{"action": {"tool": "get_capital", "args": {"country": "France"}}}', on)
    assert isinstance(fetched, CallTools)
    # a second made-up call in the turn: answer only
    again = step(history, '{"action": {"tool": "get_capital", "args": {"country": "Spain"}}}', on)
    assert isinstance(again, Correct) and again.reason == "ungrounded_call"
    history += [again.assistant, again.message]
    assert plan(history, on, Capabilities(json_schema=True), "constrained").tools == ()


def test_an_answer_after_several_results_must_state_each() -> None:
    history = two_weathers()
    partial = grounding.check_answer(history, "The weather in Oslo and Paris is sunny, 18 °C.")
    assert isinstance(partial, Correction) and "leaves out 1 of the 2" in partial.detail
    assert "get_weather(city='Oslo') is snowing, -3 °C." in partial.message
    assert isinstance(grounding.check_answer(history, "Oslo: snowing, -3 °C; Paris: sunny, 18 °C."), Accept)


def test_the_engine_answers_after_a_refused_call_and_the_setting_resolves_by_model_size() -> None:
    on = EngineConfig(tools=SPECS, dialect="json-protocol", tool_choice="auto", grounding=True)
    history: list[Message] = [UserMessage(content="Hello! How are you today?")]
    decision = step(history, '{"action": {"tool": "multiply", "args": {"a": 1, "b": 2}}}', on)
    assert isinstance(decision, Correct) and decision.reason == "missing_value"
    history += [decision.assistant, decision.message]
    assert isinstance(step(history, '{"final": {"content": "I am well, thanks!"}}', on), Answer)
    off = EngineConfig(tools=SPECS, dialect="json-protocol", tool_choice="auto")
    assert isinstance(step(history[:1], '{"action": {"tool": "multiply", "args": {"a": 1, "b": 2}}}', off), CallTools)
    run = RunConfig()
    assert run.grounding == "auto"
    assert EngineConfig.of(run, SPECS, capabilities=Capabilities(small_model=True)).grounding is True
    assert EngineConfig.of(run, SPECS, capabilities=Capabilities()).grounding is False
    assert EngineConfig.of(run.replace(grounding="on"), SPECS).grounding is True
    assert EngineConfig.of(run.replace(grounding="off"), SPECS, capabilities=Capabilities(small_model=True)).grounding is False
