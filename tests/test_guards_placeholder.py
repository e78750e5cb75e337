"""The placeholder guard (flags only), the retries grounding and truncation drive, and cut-off finals."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentfsm.core.choice import ToolChoice
from agentfsm.core.backend import Capabilities, GenerationOptions
from agentfsm.prompt.contract import render_contract
from agentfsm.core.parsed import ParsedReply
from agentfsm.engine.decide import Answer, CallTools, Correct, EngineConfig, conversation_text, step
from agentfsm.prompt.enforcement import COMPACT_MAX_ITEMS, action_item_schema, build_action_schema
from agentfsm.guards import GUARD_ORDER, placeholder, run_guards
from agentfsm.guards.base import Accept, Correction
from agentfsm.core.messages import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolResult,
    ToolSpec,
    UserMessage,
)
from agentfsm.dialects.parse import parse_reply
from agentfsm.testing import ScriptedBackend
from agentfsm.runtime.request import prepare_request

WEATHER = ToolSpec(
    name="weather",
    description="Weather in a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"],
    },
)
AREA = ToolSpec(
    name="area",
    description="Area of a rectangle.",
    parameters={
        "type": "object",
        "properties": {
            "width": {"type": "number"},
            "height": {"type": "number"},
            "sides": {"type": "array", "items": {"type": "number"}},
        },
        "required": ["width", "height"],
    },
)
TOOLS = (WEATHER, AREA)


def parsed(name: str, **args: Any) -> ParsedReply:
    return ParsedReply(content=None, tool_calls=(ToolCall(id="call_0", name=name, arguments=args),))


@pytest.mark.parametrize(
    ("name", "args", "source", "flagged"),
    [
        ("weather", {"city": "example city"}, "weather in paris?", ("city", "example city")),
        ("weather", {"city": "City"}, "what's the weather?", ("city", "City")),
        ("weather", {"city": "Paris"}, "weather in paris?", None),
        # the conversation says it: not a placeholder
        ("weather", {"city": "city"}, "weather in the town called city", None),
        ("weather", {"city": "<city>"}, "what's the weather?", ("city", "<city>")),
        # numbers are never judged: the contract shows none
        ("area", {"width": 1.5, "height": 2}, "a 3 by 2 rectangle", None),
        ("weather", {"city": "Paris", "days": 1}, "weather in paris", None),
    ],
)
def test_check(name: str, args: dict[str, Any], source: str, flagged: tuple[str, Any] | None) -> None:
    verdict = placeholder.check(parsed(name, **args), TOOLS, ToolChoice.parse("auto"), source)
    assert isinstance(verdict, Accept)  # it flags; it never refuses a call
    if flagged is None:
        assert verdict.detail == ""
        return
    assert verdict.guard == "placeholder" and "placeholder_argument" in verdict.detail
    assert f"{flagged[0]} = {flagged[1]!r}" in verdict.detail


def test_nested_objects_are_searched() -> None:
    found = placeholder.find_placeholder({"where": {"city": "example city"}}, "")
    assert found == ("city", "example city")


def test_a_flag_never_turns_a_call_into_a_refusal() -> None:
    for choice in ("auto", "required", "weather"):
        verdict = placeholder.check(parsed("weather", city="example city"), TOOLS, ToolChoice.parse(choice), "")
        assert isinstance(verdict, Accept) and verdict.detail


def test_unknown_tools_are_left_to_their_guard() -> None:
    assert isinstance(placeholder.check(parsed("nope", city="example city"), TOOLS, ToolChoice.parse("auto"), ""), Accept)


def test_the_contract_shows_no_value_of_an_offered_tool() -> None:
    for constrained in (False, True):
        text = render_contract(TOOLS, dialect="json-action", constrained=constrained)
        assert "example city" not in text and "1.5" not in text
        assert '"city": ' not in text and '"width": ' not in text


def test_run_guards_runs_it_after_the_argument_checks_and_before_injection() -> None:
    assert GUARD_ORDER[-2:] == ("placeholder", "injection")
    verdict = run_guards(parsed("weather", city="example city"), tools=TOOLS, tool_choice=ToolChoice.parse("auto"), dialect_name="json-action")
    assert isinstance(verdict, Accept) and "placeholder" in verdict.detail


def test_conversation_text_leaves_out_the_model_and_the_corrections() -> None:
    history = [
        SystemMessage(content="Be Brief"),
        UserMessage(content="Weather in Paris"),
        AssistantMessage(content="MODEL TEXT"),
        UserMessage(content="CORRECTION TEXT", correction="invalid_json"),
        ToolMessage(result=ToolResult(call_id="call_0", content="Sunny")),
    ]
    text = conversation_text(history)
    assert "be brief" in text and "weather in paris" in text and "sunny" in text
    assert "model text" not in text and "correction text" not in text


def test_a_users_real_value_is_called_with() -> None:
    config = EngineConfig(tools=TOOLS, dialect="json-action", tool_choice="auto")
    reply = '{"action": {"tool": "weather", "args": {"city": "example city"}}}'
    assert isinstance(step([UserMessage(content="Weather in Example City?")], reply, config), CallTools)
    area = '{"action": {"tool": "area", "args": {"width": 1.5, "height": 2}}}'
    assert isinstance(step([UserMessage(content="Area of 1.5 by 2?")], area, config), CallTools)


def _offered(schema: dict[str, Any] | None) -> set[str]:
    text = json.dumps(schema)
    return {t.name for t in TOOLS if json.dumps({"const": t.name}) in text}


def test_after_made_up_calls_the_retry_grammar_offers_another_tool_then_the_answer_only() -> None:
    backend = ScriptedBackend([], capabilities=Capabilities(json_schema=True))
    config = EngineConfig(tools=TOOLS, dialect="json-action", tool_choice="auto", parallel=False, grounding=True)
    history: list[Any] = [UserMessage(content="How warm is it?")]
    _, opts, _, _ = prepare_request(backend, history, config, "constrained", GenerationOptions())
    assert _offered(opts.json_schema) == {"weather", "area"}
    decision = step(history, json.dumps({"action": {"tool": "weather", "args": {"city": "London"}}}), config)
    # first, the other tool may fetch the missing value (policy/grounding.py fetch_tools)
    assert isinstance(decision, Correct) and decision.reason == "missing_value"
    history += [decision.assistant, decision.message]
    _, opts, _, _ = prepare_request(backend, history, config, "constrained", GenerationOptions())
    assert _offered(opts.json_schema) == {"area"}
    decision = step(history, json.dumps({"action": {"tool": "area", "args": {"width": 7, "height": 9}}}), config)
    assert isinstance(decision, Correct) and decision.reason == "ungrounded_call"
    history += [decision.assistant, decision.message]
    _, opts, _, _ = prepare_request(backend, history, config, "constrained", GenerationOptions())
    assert _offered(opts.json_schema) == set()
    assert isinstance(step(history, '{"final": {"content": "Which city?"}}', config), Answer)
    # a required call keeps every tool
    required = EngineConfig(tools=TOOLS, dialect="json-action", tool_choice="required", parallel=False)
    _, opts, _, _ = prepare_request(backend, history, required, "constrained", GenerationOptions())
    assert _offered(opts.json_schema) == {"weather", "area"}


def test_compact_schemas_bound_every_list() -> None:
    loose = action_item_schema([AREA], ToolChoice.parse("auto"))
    compact = action_item_schema([AREA], ToolChoice.parse("auto"), compact=True)
    assert loose is not None and compact is not None
    assert "maxItems" not in loose["properties"]["args"]["properties"]["sides"]
    assert compact["properties"]["args"]["properties"]["sides"]["maxItems"] == COMPACT_MAX_ITEMS


SUM = ToolSpec(
    name="total",
    description="Sum numbers.",
    parameters={"type": "object", "properties": {"xs": {"type": "array", "items": {"type": "number"}}}},
)


def test_the_retry_after_a_cut_off_action_is_compact() -> None:
    backend = ScriptedBackend([], capabilities=Capabilities(json_schema=True))
    config = EngineConfig(tools=(AREA, SUM), dialect="json-action", tool_choice="auto", parallel=False)
    history: list[Any] = [UserMessage(content="Area of 3 by 2, sides 3 2 3 2")]
    decision = step(history, '{"action": {"tool": "area", "args": {"width": 3, "height": 2, "sides": [3, 2, 3, 2, 3,', config)
    assert isinstance(decision, Correct) and decision.reason == "truncated_action"
    history += [decision.assistant, decision.message]
    _, opts, _, _ = prepare_request(backend, history, config, "constrained", GenerationOptions())
    assert opts.json_schema == build_action_schema([AREA, SUM], ToolChoice.parse("auto"), compact=True)
    # a later correction in the same round keeps the lists bounded
    decision = step(history, '{"action": {"tool": "nope", "args": {}}}', config)
    assert isinstance(decision, Correct) and decision.reason == "unknown_tool"
    history += [decision.assistant, decision.message]
    _, opts, _, _ = prepare_request(backend, history, config, "constrained", GenerationOptions())
    assert opts.json_schema == build_action_schema([AREA, SUM], ToolChoice.parse("auto"), compact=True)
    assert opts.json_schema != build_action_schema([AREA, SUM], ToolChoice.parse("auto"))


STOCK = ToolSpec(
    name="stock",
    description="A stock price by ticker.",
    parameters={"type": "object", "properties": {"symbol": {"type": "string"}, "exchange": {"type": "string", "enum": ["NYSE", "LSE"]}},
                "required": ["symbol"]},
)


@pytest.mark.parametrize(("cut", "bound"), [
    # a string that loops until the token limit: bounded to its text up to the loop's first copy
    ('{"action": {"tool": "stock", "args": {"symbol": "AZKLNK' + "_2022" * 40, 16),
    ('{"action": {"tool": "stock", "args": {"symbol": "The quarterly results of the company named' + " again" * 20,
     "The quarterly results of the company named again".__len__()),
    # cut by length alone, or a loop outside any one string: no string bound
    ('{"action": {"tool": "stock", "args": {"symbol": "' + "The quarterly results of a company, " + "then more words " * 3, None),
    ('{"action": {"tool": "total", "args": {"xs": [' + "1, " * 40, None),
])
def test_the_retry_after_an_action_cut_off_in_a_loop_bounds_its_strings(cut: str, bound: int | None) -> None:
    backend = ScriptedBackend([], capabilities=Capabilities(json_schema=True))
    config = EngineConfig(tools=(STOCK, SUM), dialect="json-action", tool_choice="auto", parallel=False)
    history: list[Any] = [UserMessage(content="What is the stock price of Apple?")]
    decision = step(history, cut, config)
    assert isinstance(decision, Correct) and decision.reason == "truncated_action"
    history += [decision.assistant, decision.message]
    _, opts, _, _ = prepare_request(backend, history, config, "constrained", GenerationOptions())
    assert opts.json_schema == build_action_schema([STOCK, SUM], ToolChoice.parse("auto"), compact=True, max_length=bound)
    item = action_item_schema([STOCK], ToolChoice.parse("auto"), max_length=bound)
    assert item is not None
    symbol, exchange = (item["properties"]["args"]["properties"][k] for k in ("symbol", "exchange"))
    assert symbol.get("maxLength") == bound
    assert "maxLength" not in exchange  # an enum is bounded already


@pytest.mark.parametrize(
    ("reply", "content"),
    [
        ('{"final": {"content": "The area is 15. The area is', "The area is 15. The area is"),
        ('{ "final": "cut after an escape \\', "cut after an escape "),
        ('{"final": {"content": "a [bracket] and {brace}', "a [bracket] and {brace}"),
    ],
)
def test_a_cut_off_final_answer_keeps_its_text(reply: str, content: str) -> None:
    result = parse_reply(reply, None, "json-protocol")
    assert result.final == content
    assert not result.truncated and not result.rejected
    assert [p.code for p in result.problems] == ["truncated_final"]


@pytest.mark.parametrize(
    "reply",
    [
        '{"action": {"tool": "area", "args": {"width": 3',
        '{"final": {"content": "x", "',  # cut after a key: nothing to keep
    ],
)
def test_a_cut_off_action_is_still_rejected(reply: str) -> None:
    result = parse_reply(reply, None, "json-protocol")
    assert result.truncated and result.rejected
