"""A tools array is read into specs once per content: the same specs, the same errors."""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest

from agentfsm.core.errors import RequestError
from agentfsm.protocols.anthropic import normalize_anthropic
from agentfsm.protocols.openai import normalize_openai

TOOLS: list[dict[str, Any]] = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}]


def _openai(tools: Any) -> Any:
    return normalize_openai({"messages": [{"role": "user", "content": "hi"}], "tools": tools})


def test_the_same_tools_give_the_same_specs() -> None:
    first, second = _openai(copy.deepcopy(TOOLS)), _openai(copy.deepcopy(TOOLS))
    assert first.tools == second.tools
    assert first.tools[0] is second.tools[0]


def test_other_tools_give_their_own_specs() -> None:
    other = copy.deepcopy(TOOLS)
    other[0]["function"]["description"] = "Weather, anywhere."
    assert _openai(other).tools[0].description == "Weather, anywhere."
    assert _openai(copy.deepcopy(TOOLS)).tools[0].description == "Weather in a city."


def test_a_body_changed_afterwards_changes_no_later_request() -> None:
    body = copy.deepcopy(TOOLS)
    body[0]["function"]["name"] = "changed_later"
    _openai(body)
    body[0]["function"]["parameters"]["properties"]["city"]["type"] = "integer"
    again = copy.deepcopy(TOOLS)
    again[0]["function"]["name"] = "changed_later"
    spec = _openai(again).tools[0]
    assert spec.parameters["properties"]["city"] == {"type": "string"}


def test_numbers_of_other_types_are_other_content() -> None:
    def tools(value: Any) -> list[dict[str, Any]]:
        out = copy.deepcopy(TOOLS)
        out[0]["function"]["parameters"]["properties"]["city"]["default"] = value
        return out

    values: tuple[Any, ...] = (1, 1.0, True, None, math.nan, math.inf)
    for value in values:
        spec = _openai(tools(value)).tools[0]
        kept = spec.parameters["properties"]["city"]["default"]
        assert type(kept) is type(value)
        assert kept == value or (isinstance(value, float) and isinstance(kept, float) and math.isnan(kept))


def test_a_refused_array_is_refused_each_time_with_its_own_error() -> None:
    twice = copy.deepcopy(TOOLS) * 2
    for _ in range(2):
        with pytest.raises(RequestError) as caught:
            _openai(copy.deepcopy(twice))
        assert caught.value.param == "tools[1].function.name"
        assert "duplicate tool name 'get_weather'" in str(caught.value)


def test_each_protocol_reads_its_own_shape() -> None:
    anthropic = [{"name": "get_weather", "description": "Weather in a city.",
                  "input_schema": TOOLS[0]["function"]["parameters"]}]
    spec = normalize_anthropic({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}],
                                "tools": anthropic}).tools[0]
    assert spec == _openai(copy.deepcopy(TOOLS)).tools[0]
    with pytest.raises(RequestError):
        _openai(anthropic)  # not an OpenAI tool, though the content was read before as Anthropic's
