"""The prompt contract: snapshots of every dialect and tool_choice, and the rules it must state."""

from __future__ import annotations

import pytest
from syrupy.assertion import SnapshotAssertion

from agentfsm import parse_reply, render_contract
from agentfsm.core._types import DIALECT_NAMES
from agentfsm.prompt.contract import contract_hash, example_arguments, render_example_call, summarize_schema
from agentfsm.dialects import get_dialect
from agentfsm.core.errors import UsageError
from agentfsm.core.messages import ToolSpec

WEATHER = ToolSpec(
    name="get_weather",
    description="Current weather for a city.\nSecond line is not shown.",
    parameters={
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City name"},
            "unit": {"enum": ["celsius", "fahrenheit"]},
            "days": {"type": "integer"},
        },
        "required": ["city", "unit"],
    },
)
TIME = ToolSpec(name="get_time", description="", parameters={"type": "object", "properties": {}})
TOOLS = [WEATHER, TIME]


@pytest.mark.parametrize("dialect", DIALECT_NAMES)
@pytest.mark.parametrize("tool_choice", ["auto", "required", "none", "get_time"])
def test_contract_snapshots(dialect: str, tool_choice: str, snapshot: SnapshotAssertion) -> None:
    assert render_contract(TOOLS, dialect=dialect, tool_choice=tool_choice) == snapshot


@pytest.mark.parametrize("dialect", DIALECT_NAMES)
def test_serial_contract_snapshot(dialect: str, snapshot: SnapshotAssertion) -> None:
    assert render_contract(TOOLS, dialect=dialect, parallel=False) == snapshot


def test_schema_summary_marks_required_and_lists_enums() -> None:
    lines = summarize_schema(WEATHER.parameters)
    assert lines == [
        "city (string, required): City name",
        'unit ("celsius" | "fahrenheit", required)',
        "days (integer, optional)",
    ]
    text = render_contract(TOOLS)
    assert "Second line" not in text and "- get_time" in text


@pytest.mark.parametrize(
    ("tool_choice", "rule"),
    [
        ("none", "answer in plain prose and call no tool"),
        ("required", "You MUST call at least one tool"),
        ("get_time", "You MUST call the tool `get_time`"),
        ("auto", "otherwise answer directly in prose"),
    ],
)
def test_tool_choice_rules(tool_choice: str, rule: str) -> None:
    assert rule in render_contract(TOOLS, tool_choice=tool_choice)


@pytest.mark.parametrize("dialect", DIALECT_NAMES)
def test_the_example_in_the_contract_parses_back_to_a_valid_call(dialect: str) -> None:
    example = render_example_call(WEATHER, get_dialect(dialect))
    assert example in render_contract(TOOLS, dialect=dialect)
    parsed = parse_reply(example, TOOLS, dialect)
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [("get_weather", example_arguments(WEATHER.parameters))]


def test_the_few_shot_shows_a_result_arriving_and_the_next_decision() -> None:
    text = render_contract(TOOLS)
    assert "Result of get_weather (call_0)" in text
    assert text.index("Result of get_weather") < text.index("The result is 42.")


def test_misuse_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        render_contract(TOOLS, tool_choice="nope")
    with pytest.raises(UsageError):
        render_contract([WEATHER, WEATHER])
    with pytest.raises(UsageError):
        render_contract([], tool_choice="required")
    with pytest.raises(UsageError):
        render_contract(TOOLS, dialect="yaml")
    assert render_contract([]) == "Answer the user in plain prose."


def test_hash_is_stable() -> None:
    text = render_contract(TOOLS)
    assert contract_hash(text) == contract_hash(render_contract(TOOLS)) and len(contract_hash(text)) == 64


def test_tools_may_be_openai_or_anthropic_dicts() -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    spec = ToolSpec(name="get_weather", description="Weather in a city.", parameters=schema)
    openai = {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city.", "parameters": schema}}
    anthropic = {"name": "get_weather", "description": "Weather in a city.", "input_schema": schema}
    for tool in (openai, anthropic):
        assert render_contract([tool]) == render_contract([spec])
    with pytest.raises(UsageError, match="unrecognised tool definition"):
        render_contract([{"description": "no name"}])
