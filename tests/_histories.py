"""Histories the guard tests share: calls, finished rounds, the task suite's tools."""

from __future__ import annotations

from typing import Any

from agentfsm.core.messages import AssistantMessage, Message, ToolCall, ToolMessage, ToolResult, UserMessage
from agentfsm.eval.suite import add, get_capital, get_weather
from agentfsm.runtime.tools import ToolRegistry
from agentfsm.testing.example_tools import convert_km_to_miles, multiply

__all__ = ["MATH", "PLACES", "after", "call", "two_weathers"]

PLACES = ToolRegistry([get_weather, get_capital]).specs
MATH = ToolRegistry([multiply, add, convert_km_to_miles]).specs


def call(name: str, i: int = 0, **args: Any) -> ToolCall:
    return ToolCall(id=f"call_{i}", name=name, arguments=args)


def after(request: str, *done: tuple[ToolCall, str]) -> list[Message]:
    """``request``, then each call made alone and its result."""
    history: list[Message] = [UserMessage(content=request)]
    for made, result in done:
        history += [
            AssistantMessage(content="", tool_calls=(made,)),
            ToolMessage(result=ToolResult(call_id=made.id, name=made.name, content=result)),
        ]
    return history


def two_weathers() -> list[Message]:
    """Oslo's and Paris's weather, called in one reply, both results back."""
    return [
        UserMessage(content="What is the weather in Oslo and in Paris?"),
        AssistantMessage(content="", tool_calls=(call("get_weather", 0, city="Oslo"), call("get_weather", 1, city="Paris"))),
        ToolMessage(result=ToolResult(call_id="call_0", name="get_weather", content="snowing, -3 °C")),
        ToolMessage(result=ToolResult(call_id="call_1", name="get_weather", content="sunny, 18 °C")),
    ]
