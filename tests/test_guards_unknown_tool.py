"""Tests for the unknown-tool guard."""

from __future__ import annotations

from agentfsm.core.parsed import ParsedReply
from agentfsm.guards import unknown_tool
from agentfsm.guards.base import ACCEPT, Correction
from agentfsm.core.messages import ToolCall, ToolSpec

TOOLS = [ToolSpec(name="get_weather"), ToolSpec(name="convert_units")]


def _reply(*names: str) -> ParsedReply:
    calls = tuple(ToolCall(id=f"c{i}", name=n) for i, n in enumerate(names))
    return ParsedReply(content=None, tool_calls=calls)


def test_accepts_offered_tools() -> None:
    assert unknown_tool.check(_reply("get_weather", "convert_units"), TOOLS) == ACCEPT


def test_accepts_a_reply_without_calls() -> None:
    assert unknown_tool.check(_reply(), TOOLS) == ACCEPT


def test_rejects_an_unknown_name_with_the_offered_names() -> None:
    verdict = unknown_tool.check(_reply("get_weather", "search_web"), TOOLS)
    assert isinstance(verdict, Correction)
    assert verdict.reason == "unknown_tool"
    assert verdict.guard == "unknown_tool"
    assert verdict.call_index == 1
    assert "'search_web'" in verdict.message
    assert "Available tools: get_weather, convert_units." in verdict.message


def test_suggests_a_close_name() -> None:
    verdict = unknown_tool.check(_reply("get_wether"), TOOLS)
    assert isinstance(verdict, Correction)
    assert "Did you mean 'get_weather'?" in verdict.message


def test_no_tools_offered_asks_for_plain_text() -> None:
    verdict = unknown_tool.check(_reply("get_weather"), [])
    assert isinstance(verdict, Correction)
    assert "No tools are available" in verdict.message


def test_long_lists_and_names_are_capped() -> None:
    tools = [ToolSpec(name=f"tool_{i}") for i in range(40)]
    verdict = unknown_tool.check(_reply("x" * 5000), tools)
    assert isinstance(verdict, Correction)
    assert "(and 10 more)" in verdict.message
    assert "tool_29" in verdict.message and "tool_30," not in verdict.message
    assert len(verdict.message) < 1000
