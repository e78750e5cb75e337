"""A listed value written where the request names another member of the list is sent
back, in any language: the test is a verbatim copy of the member, not a word list."""

from __future__ import annotations

import pytest

from agentfsm.core.choice import ToolChoice
from agentfsm.core.messages import AssistantMessage, Message, ToolCall, ToolMessage, ToolResult, ToolSpec, UserMessage
from agentfsm.guards.base import ACCEPT, Correction
from agentfsm.policy import grounding
from agentfsm.policy._members import MEMBER_REASON, held_to_named

WEATHER = ToolSpec(name="get_current_weather", description="The weather in a place.", parameters={
    "type": "object",
    "properties": {"location": {"type": "string"},
                   "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
    "required": ["location"],
})
CONVERT = ToolSpec(name="convert_temperature", description="Convert a temperature.", parameters={
    "type": "object",
    "properties": {"value": {"type": "number"},
                   "units": {"type": "object", "properties": {
                       "source": {"type": "string", "enum": ["celsius", "fahrenheit", "kelvin"]},
                       "target": {"type": "string", "enum": ["celsius", "fahrenheit", "kelvin"]}}}},
})
ROOMS = ToolSpec(name="book", description="Book rooms.", parameters={
    "type": "object",
    "properties": {"city": {"type": "string"}, "priority": {"type": "string", "enum": ["1", "2", "3"]},
                   "time": {"type": "string", "enum": ["am", "pm"]},
                   "format": {"type": "string", "enum": ["json", "xml"]}},
})
TOOLS = [WEATHER, CONVERT, ROOMS]


def _check(request: str, call: ToolCall, history: list[Message] | None = None,
           choice: ToolChoice = ToolChoice.AUTO) -> object:
    history = history or [UserMessage(content=request)]
    return grounding.check(history, [call], choice, TOOLS, request)


def _weather(location: str, unit: str) -> ToolCall:
    return ToolCall(id="call_0", name="get_current_weather", arguments={"location": location, "unit": unit})


@pytest.mark.parametrize("request_text", [
    "weather today in Boston in fahrenheit?",
    "Wie ist das Wetter in Boston, in Fahrenheit?",
    "¿Qué tiempo hace en Boston? En fahrenheit, por favor.",
    "Quel temps fait-il à Boston, en Fahrenheit ?",
])
@pytest.mark.parametrize("choice", [ToolChoice.AUTO, ToolChoice.REQUIRED])
def test_the_first_member_written_where_the_user_named_another_is_sent_back(request_text: str,
                                                                            choice: ToolChoice) -> None:
    verdict = _check(request_text, _weather("Boston", "celsius"), choice=choice)
    assert isinstance(verdict, Correction) and verdict.reason == MEMBER_REASON
    assert "'fahrenheit'" in verdict.message and "unit='celsius'" in verdict.message
    # the member the user named passes; so does the call once the turn was told (once a turn)
    assert _check(request_text, _weather("Boston", "fahrenheit"), choice=choice) is ACCEPT
    told: list[Message] = [UserMessage(content=request_text), AssistantMessage(content="..."),
                           UserMessage(content=verdict.message, correction=MEMBER_REASON)]
    assert _check(request_text, _weather("Boston", "celsius"), history=told, choice=choice) is ACCEPT


@pytest.mark.parametrize(("request_text", "call"), [
    # no member named, or both named: the request tells nothing
    ("What's the weather in Boston?", _weather("Boston", "celsius")),
    ("Boston in celsius or fahrenheit, whichever.", _weather("Boston", "celsius")),
    # the named member is the call's other value: "fahrenheit" is the target, the source is the model's
    ("What is 30 degrees in fahrenheit?", ToolCall(id="c", name="convert_temperature", arguments={
        "value": 30, "units": {"source": "celsius", "target": "fahrenheit"}})),
    # a member inside a longer word is not named ("Fahrenheitstraße")
    ("Weather at Fahrenheitstraße 3, Boston?", _weather("Fahrenheitstraße 3, Boston", "celsius")),
    # members without letters or shorter than three characters are not read
    ("Book 2 rooms in Oslo", ToolCall(id="c", name="book", arguments={"city": "Oslo", "priority": "1"})),
    ("Book a room in Oslo, arriving pm", ToolCall(id="c", name="book", arguments={"city": "Oslo", "time": "am"})),
])
def test_what_is_not_a_misread_member(request_text: str, call: ToolCall) -> None:
    assert _check(request_text, call) is ACCEPT


def test_nested_members_are_read() -> None:
    call = ToolCall(id="c", name="convert_temperature", arguments={"value": 300, "units": {"source": "celsius"}})
    verdict = _check("Convert 300 kelvin.", call)
    assert isinstance(verdict, Correction) and verdict.reason == MEMBER_REASON and "'kelvin'" in verdict.message


def test_after_a_result_the_member_is_not_judged() -> None:
    """A chain's later call may take its member from a result, not from the request."""
    asked = "weather today in Boston in fahrenheit?"
    first = _weather("Boston", "fahrenheit")
    history: list[Message] = [
        UserMessage(content=asked),
        AssistantMessage(tool_calls=(first,)),
        ToolMessage(result=ToolResult(call_id="call_0", content="40 F", name="get_current_weather")),
    ]
    later = ToolCall(id="call_1", name="book", arguments={"city": "Boston", "format": "xml"})
    verdict = _check(asked, later, history=history)
    assert not (isinstance(verdict, Correction) and verdict.reason == MEMBER_REASON)


def test_the_retry_holds_the_list_to_the_member_the_user_named() -> None:
    """Told, the embedded model wrote the first member again (5 of 6 held-out BFCL cases):
    the retry's grammar holds that one list to the member the request writes; the other
    tools, and the tool's other lists, stay as they are."""
    from agentfsm.engine.plan import plan
    from agentfsm.engine.decide import EngineConfig
    from agentfsm.core.backend import Capabilities

    asked = "weather today in Boston in fahrenheit?"
    refused = _weather("Boston", "celsius")
    verdict = _check(asked, refused)
    assert isinstance(verdict, Correction)
    history: list[Message] = [UserMessage(content=asked), AssistantMessage(content=(
        '{"action": {"tool": "get_current_weather", "args": {"location": "Boston", "unit": "celsius"}}}')),
        UserMessage(content=verdict.message, correction=verdict.reason)]
    held = held_to_named(TOOLS, [refused], asked)
    assert held[0].parameters["properties"]["unit"]["enum"] == ["fahrenheit"]
    assert held[1:] == tuple(TOOLS[1:]) and WEATHER.parameters["properties"]["unit"]["enum"] == ["celsius", "fahrenheit"]
    nested = ToolCall(id="c", name="convert_temperature", arguments={"value": 300, "units": {"source": "celsius"}})
    (converted,) = [t for t in held_to_named(TOOLS, [nested], "Convert 300 kelvin.") if t.name == "convert_temperature"]
    assert converted.parameters["properties"]["units"]["properties"]["source"]["enum"] == ["kelvin"]
    assert converted.parameters["properties"]["units"]["properties"]["target"]["enum"] == ["celsius", "fahrenheit", "kelvin"]
    # through the engine's plan: a backend with a grammar offers the held tool
    config = EngineConfig(tools=tuple(TOOLS), dialect="json-action", tool_choice="auto", grounding=True)
    offered = plan(history, config, Capabilities(json_schema=True), "constrained").tools
    assert [t.name for t in offered] == [t.name for t in TOOLS]
    assert offered[0].parameters["properties"]["unit"]["enum"] == ["fahrenheit"]


WIDE = ToolSpec(name="get_current_weather", description="", parameters={
    "type": "object",
    "properties": {"location": {"type": "string"}, "unit": {"type": "string", "enum": ["摂氏", "華氏"]}},
})


@pytest.mark.parametrize(("request_text", "city"), [("ボストンの天気を華氏で教えて", "ボストン"), ("보스턴 날씨 華氏로", "보스턴")])
def test_a_member_in_wide_characters_is_read_inside_a_sentence_without_spaces(request_text: str, city: str) -> None:
    history: list[Message] = [UserMessage(content=request_text)]
    wrong = ToolCall(id="call_0", name="get_current_weather", arguments={"location": city, "unit": "摂氏"})
    verdict = grounding.check(history, [wrong], ToolChoice.AUTO, [WIDE], request_text)
    assert isinstance(verdict, Correction) and verdict.reason == MEMBER_REASON and "'華氏'" in verdict.message
    right = ToolCall(id="call_0", name="get_current_weather", arguments={"location": city, "unit": "華氏"})
    assert grounding.check(history, [right], ToolChoice.AUTO, [WIDE], request_text) is ACCEPT
