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


# --- bounded in bytes, whatever the tool lists (issue 29, item 1) ------------------------------


def _tools(i: int, n: int) -> list[ToolSpec]:
    schema = {"type": "object", "properties": {"city": {"type": "string", "description": "the city " * 4},
                                               "days": {"type": "integer"}}, "required": ["city"]}
    return [ToolSpec(name=f"t{i}_{k}", description=f"Tool {k} of set {i}, described at some length.", parameters=schema)
            for k in range(n)]


def test_a_key_is_small_whatever_the_tool_set() -> None:
    import sys

    key = tools_key(_tools(0, 500))
    assert sys.getsizeof(key.digest) < 100 and key.size > 50_000
    assert tools_key(_tools(0, 500)) == key != tools_key(_tools(1, 500))


def test_memos_stay_within_their_bytes_however_many_distinct_tool_sets_arrive() -> None:
    # defect: 64 entries each, whatever their size: 40 requests of 10,000 tools took the proxy to 5.8 GB
    import tracemalloc

    from agentfsm.dialects import parse
    from agentfsm.guards import injection
    from agentfsm.prompt import contract, enforcement

    memos = [contract._CONTRACTS, enforcement._SCHEMAS, parse._KNOWN, injection._ACTIONS]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(12):
            tools = _tools(100 + i, 400)
            render_contract(tools, "json-action")
            build_action_schema(tools, ToolChoice.AUTO, True)
            parse.parse_reply('```json action\n{"tool": "t0", "parameters": {}}\n```', tools)
            injection.actions_in('see {"tool": "x"}', tools, "json-action")
            del tools
        retained = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    for memo in memos:
        assert memo.weight <= 8 << 20, memo
    # what is kept is bounded by the budgets (4 memos of 8 MB of weighed estimates), not by
    # 12 sets x 400 tools: without a bound this retained ~95 MB
    assert retained < 40 << 20, retained


def test_a_value_heavier_than_a_quarter_of_the_budget_is_built_but_not_kept() -> None:
    memo: Memo[str] = Memo(max_bytes=1000)
    big = memo.get("big", lambda: "x" * 400)
    assert big == "x" * 400 and len(memo) == 0
    for k in range(50):
        memo.get(k, lambda: "y" * 100)
        assert memo.weight <= 1000
    assert 0 < len(memo) < 10


def test_entries_by_identity_live_as_long_as_their_tool_spec() -> None:
    import gc

    from agentfsm.core._memo import ByIdentity

    seen: ByIdentity[ToolSpec, str] = ByIdentity(lambda t: t.name)
    tools = _tools(7, 50)
    assert [seen(t) for t in tools] == [t.name for t in tools] and len(seen) == 50
    del tools
    gc.collect()
    assert len(seen) == 0
    for size, kept in ((3, 3), (10, 5)):  # by entries, then by bytes (5 x 20 within 100)
        held: ByIdentity[dict[str, int], int] = ByIdentity(len, size, max_bytes=100, weigh=lambda o, v: 20)
        objects = [{"a": i} for i in range(20)]
        for obj in objects:
            held(obj)
        assert len(held) == kept
