"""How :mod:`agentfsm.core.states` reads one message: its kind, and its calls or results.

Our message models and the wire shapes (OpenAI chat messages, Anthropic messages, dumps
of our models) are read alike; see the rules in :mod:`agentfsm.core.states`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentfsm.core.errors import UsageError
from agentfsm.core.messages import AssistantMessage, SystemMessage, ToolMessage, UserMessage

#: a call's or a result's (id, tool name); None where missing
Ref = tuple[str | None, str | None]

SKIP, USER, CORRECTION, ASSISTANT, RESULTS, RESULTS_THEN_USER = range(6)


def kind(message: object, position: int) -> int:
    """:func:`read`'s classification alone (no calls or results built)."""
    if type(message) is dict:
        role = message.get("role")
        if role == "assistant":
            return ASSISTANT
        if role == "tool" or role == "function":
            return RESULTS
        if role != "user":
            return SKIP
    return read(message, position)[0]


def read(message: object, position: int) -> tuple[int, list[Ref]]:
    """Classify one message and pull out its calls or results."""
    if isinstance(message, dict):  # the wire's usual shape: skip the slower checks below
        return read_mapping(message)
    if isinstance(message, ToolMessage):
        return RESULTS, [(_as_id(message.result.call_id), message.result.name)]
    if isinstance(message, AssistantMessage):
        return ASSISTANT, [(_as_id(call.id), call.name) for call in message.tool_calls]
    if isinstance(message, UserMessage):
        return (USER if message.correction is None else CORRECTION), []
    if isinstance(message, SystemMessage):
        return SKIP, []
    if isinstance(message, Mapping):
        return read_mapping(message)
    raise UsageError(
        f"history item {position} is a {type(message).__name__}, not a message or a mapping"
    )


def read_mapping(message: Mapping[str, Any]) -> tuple[int, list[Ref]]:
    role = message.get("role")
    if role == "assistant":
        return ASSISTANT, _wire_calls(message)
    if role == "user":
        if message.get("correction") is not None:
            return CORRECTION, []
        content = message.get("content")
        if isinstance(content, list):
            results: list[Ref] = []
            other = False
            for block in content:
                if _is_mapping(block) and block.get("type") == "tool_result":
                    results.append((_as_id(block.get("tool_use_id")), None))
                else:
                    other = True
            if results:
                return (RESULTS_THEN_USER if other else RESULTS), results
        return USER, []
    if role == "tool":
        result = message.get("result")
        if result is not None and _is_mapping(result):  # a dump of our ToolMessage
            return RESULTS, [(_as_id(result.get("call_id")), _as_name(result.get("name")))]
        call_id = message.get("tool_call_id")
        name = message.get("name")
        return RESULTS, [(
            (call_id or None) if type(call_id) is str else _as_id(call_id),
            (name or None) if type(name) is str else None,
        )]
    if role == "function":  # OpenAI's legacy function result: a name, no id
        return RESULTS, [(None, _as_name(message.get("name")))]
    return SKIP, []  # system, developer, and roles we do not know


def _is_mapping(value: object) -> bool:
    # a plain dict is what JSON gives; the ABC check (slow) only for other mappings
    return type(value) is dict or isinstance(value, Mapping)


def _wire_calls(message: Mapping[str, Any]) -> list[Ref]:
    calls: list[Ref] = []
    tool_calls = message.get("tool_calls")
    if tool_calls and isinstance(tool_calls, list):
        for call in tool_calls:
            if not _is_mapping(call):
                continue
            name = call.get("name")
            if name is None:
                function = call.get("function")
                if _is_mapping(function):
                    name = function.get("name")
            call_id = call.get("id")
            calls.append((
                (call_id or None) if type(call_id) is str else _as_id(call_id),
                (name or None) if type(name) is str else None,
            ))
    function_call = message.get("function_call")
    if function_call is not None and _is_mapping(function_call):
        calls.append((None, _as_name(function_call.get("name"))))
    content = message.get("content")
    if content and isinstance(content, list):
        for block in content:
            if _is_mapping(block) and block.get("type") == "tool_use":
                calls.append((_as_id(block.get("id")), _as_name(block.get("name"))))
    return calls


def _as_id(value: object) -> str | None:
    if isinstance(value, str):
        return value or None
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def _as_name(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
