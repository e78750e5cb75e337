"""Tests for the tool_choice guard (missing call, wrong tool, calls under none)."""

from __future__ import annotations

import pytest

from agentfsm.core.choice import ToolChoice
from agentfsm.core.parsed import ParsedReply, Problem
from agentfsm.guards import tool_choice
from agentfsm.guards.base import ACCEPT, Correction
from agentfsm.core.messages import ToolCall, ToolSpec

TOOLS = [ToolSpec(name="get_weather"), ToolSpec(name="convert_units")]


def _reply(*names: str, content: str | None = None) -> ParsedReply:
    calls = tuple(ToolCall(id=f"c{i}", name=n) for i, n in enumerate(names))
    return ParsedReply(content=content, tool_calls=calls)


@pytest.mark.parametrize(
    ("choice", "names"),
    [
        ("auto", ()),
        ("auto", ("get_weather",)),
        ("required", ("convert_units",)),
        ("get_weather", ("get_weather",)),
        ("get_weather", ("get_weather", "get_weather")),
        ("none", ()),
    ],
)
def test_accepts(choice: str, names: tuple[str, ...]) -> None:
    assert tool_choice.check(_reply(*names, content="hi"), ToolChoice.parse(choice), TOOLS) == ACCEPT


@pytest.mark.parametrize("choice", ["required", "any"])
def test_required_without_a_call_is_a_missing_call(choice: str) -> None:
    verdict = tool_choice.check(_reply(content="Paris is nice."), ToolChoice.parse(choice), TOOLS)
    assert isinstance(verdict, Correction)
    assert verdict.reason == "missing_call"
    assert verdict.message.startswith(
        "Your last response did not include any ```json action``` block."
    )
    assert "get_weather, convert_units" in verdict.message


def test_named_without_a_call_names_the_tool() -> None:
    verdict = tool_choice.check(_reply(content="ok"), ToolChoice.parse("get_weather"), TOOLS, dialect_name="command")
    assert isinstance(verdict, Correction)
    assert verdict.reason == "missing_call"
    assert "You must call get_weather now." in verdict.message
    assert "@tool" in verdict.message


def test_named_with_another_tool_is_wrong_tool() -> None:
    verdict = tool_choice.check(_reply("get_weather", "convert_units"), ToolChoice.parse("get_weather"), TOOLS)
    assert isinstance(verdict, Correction)
    assert verdict.reason == "wrong_tool"
    assert verdict.call_index == 1
    assert "not convert_units" in verdict.message


def test_calls_under_none_are_not_allowed() -> None:
    verdict = tool_choice.check(_reply("get_weather"), ToolChoice.parse("none"), TOOLS, dialect_name="json-protocol")
    assert isinstance(verdict, Correction)
    assert verdict.reason == "calls_not_allowed"
    assert "plain prose" in verdict.message and '{"final"' not in verdict.message


def test_an_unreadable_action_under_none_asks_for_prose_not_valid_json() -> None:
    broken = ParsedReply(content="Sure.", problems=(Problem(code="invalid_json", message="bad"),))
    verdict = tool_choice.check(broken, ToolChoice.NONE, TOOLS)
    assert isinstance(verdict, Correction) and verdict.reason == "calls_not_allowed"
    assert "JSON" not in verdict.message and verdict.call_index is None


def test_required_with_no_tools_cannot_be_satisfied_and_accepts() -> None:
    assert tool_choice.check(_reply(content="hi"), ToolChoice.parse("required"), []) == ACCEPT


def test_example_is_included() -> None:
    verdict = tool_choice.check(_reply(), ToolChoice.parse("required"), TOOLS, example="@tool get_weather {}")
    assert isinstance(verdict, Correction)
    assert verdict.message.endswith("Example:\n@tool get_weather {}")
