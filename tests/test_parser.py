"""parse_reply: the reply fixtures, and the rules that hold for any reply."""

from __future__ import annotations

import json

import pytest

from agentfsm.dialects._json import MAX_REPAIRS
from agentfsm.dialects._scan import MAX_BLOCKS
from agentfsm.dialects.base import ParsedReply
from agentfsm.errors import UsageError
from agentfsm.messages import ToolCall, ToolSpec
from agentfsm.parser import parse_reply
from tests._replies import ReplyFixture, fixtures, summary

FIXTURES = fixtures()
FENCE = "```"


def _block(body: str) -> str:
    return f"{FENCE}json action\n{body}\n{FENCE}\n"


@pytest.mark.parametrize("fx", FIXTURES, ids=[f.id for f in FIXTURES])
def test_fixture(fx: ReplyFixture) -> None:
    reply = parse_reply(fx.text, fx.tools, fx.dialect, strict=fx.strict)
    expected = {k: v for k, v in fx.expected.items() if k not in ("tools", "dialect", "strict")}
    assert summary(reply) == expected


def test_fixtures_cover_every_format() -> None:
    groups = {f.id.split("/")[0] for f in FIXTURES}
    assert groups == {"json-action", "json-protocol", "command", "smiley", "native"}
    assert len(FIXTURES) >= 40
    codes = {code for f in FIXTURES for code in f.expected["problems"]}
    assert codes == {
        "invalid_json",
        "repaired_json",
        "truncated",
        "malformed_action",
        "extra_text",
        "thought_too_long",
    }


def test_ids_follow_emission_order() -> None:
    text = (
        _block('{"tool": "a", "parameters": {}}')
        + "@tool b {}\n"
        + '<tool_call>{"name": "c", "arguments": {}}</tool_call>'
    )
    reply = parse_reply(text)
    assert [(c.id, c.name) for c in reply.tool_calls] == [
        ("call_0", "a"),
        ("call_1", "b"),
        ("call_2", "c"),
    ]


def test_result_is_a_valid_parsed_reply() -> None:
    reply = parse_reply("Hi.\n" + _block('{"tool": "a", "parameters": {"x": [1, 2.5, null]}}'))
    assert reply == ParsedReply.model_validate(reply.model_dump())
    assert reply.tool_calls[0] == ToolCall(id="call_0", name="a", arguments={"x": [1, 2.5, None]})
    assert json.loads(reply.model_dump_json())["content"] == "Hi."


def test_content_is_stripped_prose_or_none() -> None:
    assert parse_reply("  \n").content is None
    assert parse_reply(_block('{"tool": "a", "parameters": {}}')).content is None
    reply = parse_reply("  Before.\n" + _block('{"tool": "a", "parameters": {}}') + "After.  \n")
    assert reply.content == "Before.\n\nAfter."


def test_invalid_json_position_points_into_the_reply() -> None:
    text = "Intro.\n" + _block("definitely not json")
    problem = parse_reply(text).problems[0]
    assert problem.code == "invalid_json" and problem.rejected
    assert problem.position == text.index("definitely")
    assert problem.source == "json-action"


def test_repaired_problem_is_not_rejected() -> None:
    reply = parse_reply(_block('{"tool": "a", "parameters": {"k": 1,},}'))
    assert [c.arguments for c in reply.tool_calls] == [{"k": 1}]
    assert [(p.code, p.rejected) for p in reply.problems] == [("repaired_json", False)]
    assert reply.rejected == ()


def test_known_tools_filter_bare_and_pythonic_forms_only() -> None:
    tools = [ToolSpec(name="get_weather")]
    bare = '{"name": "other", "parameters": {}} [other(a=1)]'
    assert parse_reply(bare, tools).tool_calls == ()
    assert len(parse_reply(bare).tool_calls) == 2
    fenced = _block('{"tool": "other", "parameters": {}}')
    assert [c.name for c in parse_reply(fenced, tools).tool_calls] == ["other"]
    known = '{"name": "get_weather"}'
    assert [c.name for c in parse_reply(known, tools).tool_calls] == ["get_weather"]
    assert parse_reply(known).tool_calls == ()


def test_arguments_are_always_objects() -> None:
    for args in ('"{\\"a\\": 1}"', "null", '""'):
        reply = parse_reply(_block(f'{{"tool": "t", "parameters": {args}}}'))
        assert all(isinstance(c.arguments, dict) for c in reply.tool_calls)
    for args in ("[1]", "3", '"not json"'):
        reply = parse_reply(_block(f'{{"tool": "t", "parameters": {args}}}'))
        assert reply.tool_calls == ()
        assert [p.code for p in reply.problems] == ["malformed_action"]


def test_unknown_dialect_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="json-action, json-protocol, command, smiley"):
        parse_reply("hi", dialect="yaml")


def test_strict_only_changes_json_protocol() -> None:
    text = "Sure.\n" + _block('{"tool": "a", "parameters": {}}')
    assert len(parse_reply(text, strict=True).tool_calls) == 1
    strict = parse_reply(text, dialect="json-protocol", strict=True)
    assert strict.tool_calls == ()
    assert [p.code for p in strict.problems] == ["extra_text"]
    assert strict.problems[0].position == 0


def test_thought_is_only_capped_in_json_protocol() -> None:
    text = json.dumps({"thought": "t" * 300, "action": {"tool": "a", "args": {}}})
    assert parse_reply(text).content == "t" * 300
    capped = parse_reply(text, dialect="json-protocol")
    assert capped.content == "t" * 200
    assert [(p.code, p.rejected) for p in capped.problems] == [("thought_too_long", False)]


def test_final_object_in_any_dialect() -> None:
    for dialect in ("json-action", "command", "smiley", "json-protocol"):
        reply = parse_reply('{"final": {"content": [1, 2]}}', dialect=dialect)
        assert reply.final == [1, 2]
        assert reply.content == "[1, 2]"
        assert reply.tool_calls == ()


def test_lone_surrogates_are_replaced() -> None:
    for raw in ('"a\\ud800b"', '"a\ud800b"'):
        reply = parse_reply(_block(f'{{"tool": "t", "parameters": {{"s": {raw}}}}}'))
        assert reply.tool_calls[0].arguments == {"s": "a\ufffdb"}
        assert [p.code for p in reply.problems] == ["repaired_json"]


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ('{"tool": "t", "parameters": {"n": ' + "9" * 5000 + "}}", "limit_exceeded"),
        ("[" * 5000 + "]" * 5000, "limit_exceeded"),
        ('{"tool": "t", "parameters": {"n": Infinity}}', "invalid_json"),
        ('{"tool": "t", "parameters": {"n": -Infinity}}', "invalid_json"),
    ],
)
def test_limits_are_problems_not_exceptions(body: str, code: str) -> None:
    reply = parse_reply(_block(body))
    assert reply.tool_calls == ()
    assert [p.code for p in reply.problems] == [code]


def test_oversized_bare_json_drops_the_rest() -> None:
    text = 'Hi {"name": "t", "parameters": {"s": "' + "x" * 200_000 + '"}} @tool f {}\n'
    reply = parse_reply(text)
    assert reply.content == "Hi"
    assert reply.tool_calls == ()
    assert [p.code for p in reply.problems] == ["limit_exceeded"]


def test_block_count_is_capped() -> None:
    text = "@tool ping {}\n" * (MAX_BLOCKS + 10)
    reply = parse_reply(text)
    assert len(reply.tool_calls) == MAX_BLOCKS
    assert [p.code for p in reply.problems] == ["limit_exceeded"]


def test_repairs_per_reply_are_capped() -> None:
    text = _block('{"tool": "t", "parameters": {"k": 1,},}') * (MAX_REPAIRS + 3)
    reply = parse_reply(text)
    assert len(reply.tool_calls) == MAX_REPAIRS
    codes = [p.code for p in reply.problems]
    assert codes.count("repaired_json") == MAX_REPAIRS
    assert codes.count("limit_exceeded") == 3
