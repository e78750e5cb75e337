"""The contract and the action schema are built once per tool set's content."""

from __future__ import annotations

from agentfsm.core.choice import ToolChoice
from agentfsm.core.messages import ToolSpec
from agentfsm.core._memo import Memo, tools_key
from agentfsm.prompt.contract import render_contract
from agentfsm.prompt.enforcement import build_action_schema


def spec(description: str = "Add two numbers.", kind: str = "number") -> ToolSpec:
    return ToolSpec(name="add", description=description,
                    parameters={"type": "object", "properties": {"a": {"type": kind}}, "required": ["a"]})


def test_equal_tool_sets_share_one_value_and_a_changed_one_gets_its_own() -> None:
    # the proxy parses each request's tools anew: equal content, new objects
    assert render_contract([spec()], "json-action") is render_contract([spec()], "json-action")
    assert build_action_schema([spec()], ToolChoice.parse("auto"), True) is build_action_schema([spec()], ToolChoice.parse("auto"), True)
    changed = build_action_schema([spec(kind="integer")], ToolChoice.parse("auto"), True)
    assert changed is not build_action_schema([spec()], ToolChoice.parse("auto"), True)
    assert '"integer"' in str(changed).replace("'", '"')
    assert "Add two numbers" in render_contract([spec()], "json-action")
    assert "Subtract" in render_contract([spec("Subtract.")], "json-action")
    # the settings are part of the key
    assert build_action_schema([spec()], ToolChoice.parse("required")) != build_action_schema([spec()], ToolChoice.parse("auto"))


def test_the_key_is_the_content_and_the_memo_is_bounded() -> None:
    assert tools_key([spec()]) == tools_key([spec()]) != tools_key([spec("Other.")])
    memo: Memo[int] = Memo(size=2)
    built: list[str] = []

    def build(key: str) -> int:
        built.append(key)
        return len(built)

    assert [memo.get(k, lambda k=k: build(k)) for k in ("a", "b", "a", "c", "b")] == [1, 2, 1, 3, 4]
    assert built == ["a", "b", "c", "b"]  # "b" was the least recently used when "c" came


def test_the_actions_in_a_short_text_are_read_once_per_tool_set() -> None:
    from agentfsm.guards import injection

    text = 'See {"tool": "add", "parameters": {"a": 1}} in the log.'
    first = injection.actions_in(text, [spec()], "json-action")
    assert [c.name for c in first] == ["add"]
    assert injection.actions_in(text, [spec()], "json-action") is first  # kept
    assert injection.actions_in(text, [spec("Other.")], "json-action") is not first  # another tool set
    long = text + " " * injection.MEMO_CHARS
    assert injection.actions_in(long, [spec()], "json-action") is not injection.actions_in(long, [spec()], "json-action")
