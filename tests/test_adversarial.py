"""Adversarial replies at 64 KB, 256 KB and 1 MB: the parser always returns a typed result.

Only completion is asserted here; how long it takes is measured by
``bench/bench_parser.py`` (tests carry no timing assertions).
"""

from __future__ import annotations

import pytest

from agentfsm.dialects.base import ParsedReply, Problem
from agentfsm.messages import ToolCall
from agentfsm.parser import parse_reply
from agentfsm.stream import StreamParser, TextDelta, ToolCallDelta

S = "\U0001f60a"
SIZES = {"64KB": 65_536, "256KB": 262_144, "1MB": 1_048_576}
FENCE = "```json action\n"


def _fill(unit: str, size: int, head: str = "", tail: str = "") -> str:
    return head + unit * max(1, (size - len(head) - len(tail)) // len(unit)) + tail


CASES = {
    "unclosed fence": lambda n: _fill("x", n, FENCE),
    "unclosed fence in JSON": lambda n: _fill("a", n, FENCE + '{"tool": "f", "parameters": {"s": "'),
    "unclosed <tool_call>": lambda n: _fill('{"name": "f", ', n, "<tool_call>"),
    "unclosed smiley": lambda n: _fill("y", n, S * 14 + "\n"),
    "unclosed bare JSON": lambda n: _fill("[1, ", n, 'ok {"name": "f", "parameters": {"a": '),
    "{ flood": lambda n: _fill("{", n),
    "[ flood": lambda n: _fill("[", n),
    "] } flood": lambda n: _fill("]}", n),
    '{"name": flood': lambda n: _fill('{"name": ', n),
    "[{ flood": lambda n: _fill('[{"name": [', n),
    "quote flood": lambda n: _fill('"', n, '{"name": "f", "parameters": {"a": '),
    "backslash flood": lambda n: _fill("\\", n, '{"name": "f", "parameters": {"a": "'),
    "@tool flood": lambda n: _fill("@tool ", n),
    "@tool x { flood": lambda n: _fill("@tool x {", n),
    "@tool calls": lambda n: _fill("@tool ping\n", n),
    "``` flood": lambda n: _fill("```", n),
    "```json flood": lambda n: _fill("```json\n", n),
    "smiley flood": lambda n: _fill(S, n),
    "14-smiley flood": lambda n: _fill(S * 14 + "x", n),
    "[TOOL_CALLS] flood": lambda n: _fill("[TOOL_CALLS]", n),
    "[f( flood": lambda n: _fill("[f(", n),
    "giant string": lambda n: _fill("a", n, FENCE + '{"tool": "f", "parameters": {"s": "', '"}}\n```'),
    "deep nesting": lambda n: _fill("[", n // 2, FENCE) + "]" * (n // 2) + "\n```",
    "deep nesting, bare": lambda n: _fill('{"name": ', n // 2) + "}" * (n // 20),
    "5000-digit numbers": lambda n: _fill(FENCE + '{"tool": "f", "parameters": {"n": ' + "7" * 5000 + "}}\n```\n", n),
    "NaN": lambda n: _fill(FENCE + '{"tool": "f", "parameters": {"n": NaN}}\n```\n', n),
    "lone surrogates": lambda n: _fill(FENCE + '{"tool": "f", "parameters": {"s": "\\ud800 \ud800"}}\n```\n', n),
    "broken blocks": lambda n: _fill(FENCE + '{"tool": "f", "parameters": {"a": [1,,2,]},}\n```\n', n),
    "smart-quote garbage": lambda n: _fill("\u201c{\u2019:\u201d,", n, FENCE, "\n```"),
    "pythonic garbage": lambda n: _fill("[f(a=[g(b=", n),
}


def _typed(reply: ParsedReply) -> None:
    assert isinstance(reply, ParsedReply)
    assert all(isinstance(c, ToolCall) and isinstance(c.arguments, dict) for c in reply.tool_calls)
    assert all(isinstance(p, Problem) for p in reply.problems)


@pytest.mark.parametrize("size", SIZES.values(), ids=SIZES.keys())
@pytest.mark.parametrize("case", CASES, ids=CASES.keys())
def test_parse_reply_completes(case: str, size: int) -> None:
    _typed(parse_reply(CASES[case](size)))


@pytest.mark.parametrize("case", CASES, ids=CASES.keys())
def test_stream_completes(case: str) -> None:
    text = CASES[case](SIZES["64KB"])
    parser = StreamParser()
    events = []
    for i in range(0, len(text), 1000):
        events.extend(parser.feed(text[i : i + 1000]))
    events.extend(parser.close())
    assert all(isinstance(e, (TextDelta, ToolCallDelta)) for e in events)
    _typed(parser.result())
    assert parser.result() == parse_reply(text)


@pytest.mark.parametrize("dialect", ["json-protocol", "command", "smiley"])
def test_other_dialects_complete(dialect: str) -> None:
    for make in CASES.values():
        _typed(parse_reply(make(SIZES["64KB"]), dialect=dialect, strict=True))
