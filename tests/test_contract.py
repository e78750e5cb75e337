"""The prompt contract: snapshots of every dialect and tool_choice, and the rules it must state."""

from __future__ import annotations

import pytest
from syrupy.assertion import SnapshotAssertion

from agentfsm import parse_reply, render_contract
from agentfsm.core._types import DIALECT_NAMES
from agentfsm.prompt.contract import contract_hash, render_call_template, summarize_schema
from agentfsm.dialects import get_dialect
from agentfsm.dialects._render import FORMAT_EXAMPLE
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
        ("none", "Tools are switched off for this turn: answer the user in plain prose."),
        ("required", "You MUST call at least one tool"),
        ("get_time", "You MUST call the tool `get_time`"),
        ("auto", "otherwise answer directly in prose"),
    ],
)
def test_tool_choice_rules(tool_choice: str, rule: str) -> None:
    assert rule in render_contract(TOOLS, tool_choice=tool_choice)


@pytest.mark.parametrize("dialect", DIALECT_NAMES)
def test_the_format_example_is_a_made_up_tool_that_parses_back(dialect: str) -> None:
    text = render_contract(TOOLS, dialect=dialect)
    example = get_dialect(dialect).render_call(FORMAT_EXAMPLE)
    assert example in text and "count_letters is not one of your tools" in text
    parsed = parse_reply(example, [], dialect)
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [("count_letters", {"word": "xylophone"})]


@pytest.mark.parametrize("dialect", DIALECT_NAMES)
@pytest.mark.parametrize("tool_choice", ["auto", "required", "get_time"])
def test_no_contract_shows_a_value_of_an_offered_tool(dialect: str, tool_choice: str) -> None:
    for constrained in (False, True):
        text = render_contract(TOOLS, dialect=dialect, tool_choice=tool_choice, constrained=constrained)
        assert "example city" not in text and "1.5" not in text and "42" not in text
        assert "The result is" not in text  # no answer text to copy


def test_the_constrained_contract_is_short_and_names_both_shapes() -> None:
    text = render_contract(TOOLS, dialect="json-protocol", constrained=True)
    assert '{"action": {"tool": <tool name>' in text and '{"final": {"content": <your answer>}}' in text
    assert "Example" not in text and len(text) < len(render_contract(TOOLS, dialect="json-protocol"))
    required = render_contract(TOOLS, dialect="json-protocol", tool_choice="required", constrained=True)
    assert '"final"' not in required


@pytest.mark.parametrize("dialect", DIALECT_NAMES)
def test_a_call_template_names_the_tool_and_its_slots_without_values(dialect: str) -> None:
    template = render_call_template(WEATHER, get_dialect(dialect))
    assert "get_weather" in template and "<city>" in template and "<unit>" in template
    assert "\x00" not in template


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


@pytest.mark.parametrize("dialect", DIALECT_NAMES)
def test_under_none_the_contract_lists_no_tool_and_teaches_no_format(dialect: str) -> None:
    text = render_contract(TOOLS, dialect=dialect, tool_choice="none")
    assert "get_weather" not in text and "get_time" not in text
    assert "action" not in text.lower() and "{" not in text and "```" not in text
