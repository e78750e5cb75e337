"""ToolChoice: the value the code passes, parsed from and written as the edges' spellings."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from agentfsm import RunConfig, ToolChoice
from agentfsm.core.choice import ToolChoiceField
from agentfsm.core.errors import UsageError
from agentfsm.engine.decide import EngineConfig


@pytest.mark.parametrize(
    ("spelled", "mode", "name", "requires_call"),
    [
        ("auto", "auto", None, False),
        ("none", "none", None, False),
        ("required", "required", None, True),
        ("any", "required", None, True),  # Anthropic's spelling
        ("get_weather", "tool", "get_weather", True),
    ],
)
def test_a_spelling_reads_as_a_value(spelled: str, mode: str, name: str | None, requires_call: bool) -> None:
    choice = ToolChoice.parse(spelled)
    assert (choice.mode, choice.name, choice.requires_call) == (mode, name, requires_call)
    assert choice.allows_answer is not requires_call
    assert ToolChoice.parse(str(choice)) == choice
    assert ToolChoice.parse(choice) is choice


def test_the_keywords_are_shared_values() -> None:
    assert ToolChoice.parse("auto") is ToolChoice.AUTO
    assert ToolChoice.parse("any") is ToolChoice.REQUIRED
    assert ToolChoice.of_tool("add") == ToolChoice("tool", "add") and str(ToolChoice.of_tool("add")) == "add"


@pytest.mark.parametrize("bad", ["", "  ", None, 3])
def test_an_empty_spelling_is_a_usage_error(bad: object) -> None:
    with pytest.raises(UsageError, match="tool_choice must be a non-empty string"):
        ToolChoice.parse(bad)  # type: ignore[arg-type]


def test_a_mode_and_a_name_go_together() -> None:
    with pytest.raises(UsageError, match="needs"):
        ToolChoice("tool")
    with pytest.raises(UsageError, match="takes no"):
        ToolChoice("auto", "add")


def test_configs_read_the_spelling() -> None:
    assert RunConfig(tool_choice="required").tool_choice is ToolChoice.REQUIRED  # type: ignore[arg-type]
    assert RunConfig().as_dict()["tool_choice"] == "auto"
    assert EngineConfig(tool_choice="add").tool_choice == ToolChoice.of_tool("add")  # type: ignore[arg-type]


class _Holder(BaseModel):
    choice: ToolChoiceField


def test_a_model_field_reads_and_writes_the_spelling() -> None:
    holder = _Holder.model_validate({"choice": "get_time"})
    assert holder.choice == ToolChoice.of_tool("get_time")
    assert holder.model_dump(mode="json") == {"choice": "get_time"}
    with pytest.raises(ValueError, match="non-empty"):
        _Holder.model_validate({"choice": ""})
