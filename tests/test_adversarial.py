"""Adversarial replies at 64 KB, 256 KB and 1 MB: the parser always returns a typed result.

Only completion is asserted here; how long it takes is measured by
``bench/bench_parser.py`` (tests carry no timing assertions).
"""

from __future__ import annotations

import pytest

from agentfsm.core.parsed import ParsedReply, Problem
from agentfsm.core.messages import ToolCall
from agentfsm.dialects.parse import parse_reply
from agentfsm.dialects.stream import StreamParser, TextDelta, ToolCallDelta
from fixtures.adversarial import CASES

SIZES = {"64KB": 65_536, "256KB": 262_144, "1MB": 1_048_576}


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
