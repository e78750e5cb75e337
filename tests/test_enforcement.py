import jsonschema
import pytest

from agentfsm.core.backend import Capabilities
from agentfsm.core.choice import ToolChoice
from agentfsm.prompt.enforcement import build_action_schema, choose_level
from agentfsm.core.errors import UsageError
from agentfsm.core.messages import ToolSpec

WEATHER = ToolSpec(
    name="get_weather",
    description="Weather for a city",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string", "pattern": "^[A-Z]"}, "unit": {"enum": ["c", "f"]}},
        "required": ["city"],
    },
)
TIME = ToolSpec(name="get_time", parameters={"type": "object", "properties": {}})


@pytest.mark.parametrize(
    ("requested", "caps", "choice", "expected"),
    [
        ("auto", Capabilities(prefill=True, json_schema=True), "auto", "constrained"),
        ("auto", Capabilities(prefill=True), "required", "prefill"),
        ("auto", Capabilities(prefill=True), "auto", "prompt"),
        ("auto", Capabilities(), "required", "prompt"),
        ("prompt", Capabilities(json_schema=True), "auto", "prompt"),
        ("constrained", Capabilities(json_schema=True), "none", "prompt"),
    ],
)
def test_choose_level(requested: str, caps: Capabilities, choice: str, expected: str) -> None:
    assert choose_level(requested, caps, ToolChoice.parse(choice)) == expected


def test_impossible_levels_are_typed_errors() -> None:
    with pytest.raises(UsageError):
        choose_level("constrained", Capabilities(), ToolChoice.parse("auto"))
    with pytest.raises(UsageError):
        choose_level("prefill", Capabilities(), ToolChoice.parse("required"))
    with pytest.raises(UsageError):
        choose_level("turbo", Capabilities(), ToolChoice.parse("auto"))


def test_schema_has_a_branch_per_tool_and_a_final_branch() -> None:
    schema = build_action_schema([WEATHER, TIME], ToolChoice.parse("auto"))
    assert len(schema["anyOf"]) == 2
    assert len(schema["anyOf"][0]["properties"]["action"]["anyOf"]) == 2
    jsonschema.validate({"action": {"tool": "get_weather", "args": {"city": "Paris"}}}, schema)
    jsonschema.validate({"final": {"content": "hi"}}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"action": {"tool": "nope", "args": {}}}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"action": {"tool": "get_weather", "args": {}}}, schema)


def test_required_drops_final_branch_and_named_keeps_one_tool() -> None:
    required = build_action_schema([WEATHER, TIME], ToolChoice.parse("required"))
    assert list(required["properties"]) == ["action"]
    assert len(required["properties"]["action"]["anyOf"]) == 2
    named = build_action_schema([WEATHER, TIME], ToolChoice.parse("get_time"))
    assert named["properties"]["action"]["properties"]["tool"] == {"const": "get_time"}
    with pytest.raises(UsageError):
        build_action_schema([WEATHER], ToolChoice.parse("nope"))
    assert ToolChoice.parse("get_time").requires_call and not ToolChoice.parse("auto").requires_call


def test_grammar_hostile_keywords_are_dropped() -> None:
    schema = build_action_schema([WEATHER], ToolChoice.parse("required"))
    assert "pattern" not in str(schema)


@pytest.mark.parametrize("choice", ["auto", "required"])
def test_corrections_under_a_grammar_show_the_json_shape_it_enforces(choice: str) -> None:
    """Under constrained decoding the model writes {"action": ...} JSON: the corrections
    (and their stricter escalations) name that shape, never a ```json action``` block."""
    from agentfsm import Agent
    from agentfsm.backends import ScriptedBackend

    def get_weather(city: str) -> str:
        """Weather for a city."""
        return f"sunny in {city}"

    unknown = '{"action": {"tool": "nope", "args": {}}}'
    good = '{"action": {"tool": "get_weather", "args": {"city": "Paris"}}}'
    final = '{"final": {"content": "Sunny in Paris."}}'
    backend = ScriptedBackend([unknown, unknown, unknown, good, final], capabilities=Capabilities(json_schema=True))
    result = Agent(backend, [get_weather], tool_choice=choice, grounding="off", consensus="off").run("Weather in Paris?")
    assert result.content == "Sunny in Paris." and result.corrections == 3
    corrections = [r.messages[-1].content for r in backend.requests[1:4]]
    for text in corrections:
        assert "json action" not in text and "```" not in text, text
    assert all("JSON action object" in text for text in corrections[1:]), corrections
