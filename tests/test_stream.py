"""StreamParser: same result whatever the chunking; prose held back only for a possible opener."""

from __future__ import annotations

import codecs
import random
from collections.abc import Iterable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentfsm.core.parsed import ParsedReply
from agentfsm.core.errors import UsageError
from agentfsm.core.messages import ToolCall
from agentfsm.dialects.parse import parse_reply
from agentfsm.dialects.stream import StreamEvent, StreamParser, TextDelta, ToolCallDelta
from tests._replies import ReplyFixture, fixtures

FIXTURES = fixtures()
IDS = [f.id for f in FIXTURES]
S = "\U0001f60a"
Outcome = tuple[list[tuple[str, object]], ParsedReply]


def _normal(events: Iterable[StreamEvent]) -> list[tuple[str, object]]:
    """Events with adjacent text merged (how text is cut into deltas may vary)."""
    out: list[tuple[str, object]] = []
    for e in events:
        if isinstance(e, TextDelta):
            if out and out[-1][0] == "text":
                out[-1] = ("text", str(out[-1][1]) + e.text)
            elif e.text:
                out.append(("text", e.text))
        else:
            out.append(("call", (e.index, e.call)))
    return out


def _stream(fx: ReplyFixture, chunks: Iterable[str | bytes]) -> Outcome:
    parser = StreamParser(fx.tools, fx.dialect, strict=fx.strict)
    events: list[StreamEvent] = []
    for chunk in chunks:
        events.extend(parser.feed(chunk))
    events.extend(parser.close())
    return _normal(events), parser.result()


def _check(fx: ReplyFixture, splits: Iterable[Sequence[str | bytes]]) -> None:
    whole = parse_reply(fx.text, fx.tools, fx.dialect, strict=fx.strict)
    events, result = _stream(fx, [fx.text])
    assert result == whole
    text = "".join(str(v) for k, v in events if k == "text")
    assert text.strip() == (whole.content or "")
    assert [v for k, v in events if k == "call"] == list(enumerate(whole.tool_calls))
    for chunks in splits:
        assert _stream(fx, chunks) == (events, whole), chunks


@pytest.mark.parametrize("fx", FIXTURES, ids=IDS)
def test_every_two_way_split(fx: ReplyFixture) -> None:
    t = fx.text
    _check(fx, ([t[:i], t[i:]] for i in range(len(t) + 1)))


@pytest.mark.parametrize("fx", FIXTURES, ids=IDS)
def test_one_character_at_a_time(fx: ReplyFixture) -> None:
    _check(fx, [list(fx.text), ["", *fx.text, ""]])


@pytest.mark.parametrize("fx", FIXTURES, ids=IDS)
def test_seeded_random_splits(fx: ReplyFixture) -> None:
    rnd = random.Random(fx.id)
    t = fx.text
    splits = []
    for _ in range(30):
        cuts = sorted(rnd.choices(range(len(t) + 1), k=rnd.randint(1, 12)))
        splits.append([t[a:b] for a, b in zip([0, *cuts], [*cuts, len(t)], strict=True)])
    _check(fx, splits)


@pytest.mark.parametrize("fx", FIXTURES, ids=IDS)
def test_utf8_byte_boundaries(fx: ReplyFixture) -> None:
    data = fx.text.encode("utf-8")
    # bytes straight into feed(), cut anywhere, one byte at a time included
    _check(fx, [[data[:i], data[i:]] for i in range(len(data) + 1)])
    _check(fx, [[data[i : i + 1] for i in range(len(data))]])
    # bytes through an incremental decoder, its str output fed
    rnd = random.Random(fx.id)
    for _ in range(10):
        decoder = codecs.getincrementaldecoder("utf-8")()
        cuts = sorted(rnd.choices(range(len(data) + 1), k=rnd.randint(1, 10)))
        parts = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
        _check(fx, [[decoder.decode(p) for p in parts] + [decoder.decode(b"", final=True)]])


_TOKENS = [
    "```", "```json action\n", "```json\n", "```python\n", "\n", " ", "a", "{", "}", "[", "]",
    '"', "\\", ":", ",", '{"name": ', '"tool"', '{"tool": "f", "parameters": {', '"arguments"',
    "<tool_call>", "</tool_call>", "[TOOL_CALLS]", "[ARGS]", "@tool", "@tool f ", "f(", ")", "=1",
    S, S * 14, S * 13, "\u201c", "\u201d", "\u2019", "'", '{"final": ', '{"action": ', "null",
    "`", "}```", "[f(a=1)]", "\u00e9",
]


@settings(max_examples=150, deadline=None)
@given(
    parts=st.lists(st.sampled_from(_TOKENS), max_size=24),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=8),
    protocol=st.booleans(),
)
def test_split_invariance_on_generated_replies(parts: list[str], cuts: list[int], protocol: bool) -> None:
    text = "".join(parts)
    fx = ReplyFixture("generated", text, {"dialect": "json-protocol", "strict": True} if protocol else {})
    points = sorted(min(c, len(text)) for c in cuts)
    _check(fx, [[text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)], list(text)])


@pytest.mark.parametrize(
    ("chunk", "emitted"),
    [
        ("Hello world", "Hello world"),
        ("Hello {", "Hello "),
        ('Hello {"na', "Hello "),
        ('Hello {"x', 'Hello {"x'),
        ("Hi [", "Hi "),
        ("Hi [get_weath", "Hi "),
        ("Hi [1, 2", "Hi [1, 2"),
        ("So ``", "So "),
        ("mail me@tool", "mail me@tool"),
        ("Run @to", "Run "),
        ("Go <tool_c", "Go "),
        ("Go <b>", "Go <b>"),
        (f"Hey {S * 3}", "Hey "),
        (f"Hey {S * 15}", f"Hey {S * 15}"),
        ("```python\nprint(1)\n`", "```python\nprint(1)\n"),
        ("```json action\n{", ""),
    ],
)
def test_prose_is_held_back_only_for_a_possible_opener(chunk: str, emitted: str) -> None:
    events = StreamParser().feed(chunk)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == emitted


def test_a_call_is_emitted_when_its_block_closes() -> None:
    parser = StreamParser()
    assert parser.feed('Looking.\n```json action\n{"tool": "a", "parameters": {}}\n') == [
        TextDelta("Looking.\n")
    ]
    events = parser.feed("```\nDone")
    assert events[0] == ToolCallDelta(0, parser_call("a"))
    assert events[1:] == [TextDelta("\nDone")]
    assert parser.close() == []
    assert parser.result().content == "Looking.\n\nDone"


def parser_call(name: str) -> ToolCall:
    return ToolCall(id="call_0", name=name, arguments={})


def test_strict_json_protocol_emits_calls_at_close() -> None:
    parser = StreamParser(dialect="json-protocol", strict=True)
    assert parser.feed('{"action": {"tool": "a", "args": {}}}') == []
    assert parser.close() == [ToolCallDelta(0, parser_call("a"))]
    rejected = StreamParser(dialect="json-protocol", strict=True)
    assert rejected.feed('{"action": {"tool": "a", "args": {}}} and more') == [TextDelta(" and more")]
    assert rejected.close() == []
    assert [p.code for p in rejected.result().problems] == ["extra_text"]


def test_invalid_utf8_bytes_become_replacement_characters() -> None:
    parser = StreamParser()
    parser.feed(b"caf\xc3")
    parser.feed("!")
    parser.feed(b"\xff ok")
    parser.close()
    assert parser.result().content == "caf\ufffd!\ufffd ok"


def test_misuse_is_a_usage_error() -> None:
    parser = StreamParser()
    with pytest.raises(UsageError):
        parser.result()
    parser.close()
    assert parser.close() == []
    with pytest.raises(UsageError):
        parser.feed("more")


@pytest.mark.parametrize("size", [62, 63, 64, 65, 66])
@pytest.mark.parametrize("after", ["y\n", "\n", "{", " json\n"])
def test_a_long_fence_info_string_ending_a_chunk(size: int, after: str) -> None:
    """A fence info string of up to 64 characters cut by a chunk: the next character decides."""
    text = "```" + "x" * size + after + '@tool a {}\n{"name": "b", "arguments": {}}\n```\nok'
    fx = ReplyFixture("long-info", text, {})
    _check(fx, ([text[:i], text[i:]] for i in range(len(text) + 1)))
    assert parse_reply(text).tool_calls == ()


# --- streamed parsing costs a bounded amount per character (issue 29, item 14) -------------

_OPENER_PIECES = ["[", "{", "<", "`", "@", "\U0001f60a", "[TOOL_CALLS]", "<tool_call>", "<function=", "@tool", "```",
                  "json action", " ", "\n", "\t", "a", "f", "_", "(", "=", ">", '"', ":", "T", "ARGS", "]"]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(_OPENER_PIECES), max_size=12).map("".join))
def test_the_prefix_regex_answers_as_the_token_walk(text: str) -> None:
    from agentfsm.dialects._registry import FORMATS
    from agentfsm.dialects._tokens import _prefix

    for fmt in FORMATS:
        for opener in fmt.openers:
            for start in range(len(text) + 1):
                assert (opener.prefix_regex.fullmatch(text, start) is not None) == _prefix(opener.toks, 0, text, start)


@pytest.mark.parametrize("text", ["[" * 20_000, "{" * 20_000, "<" * 20_000, ("\U0001f60a" * 13 + " ") * 1500,
                                  '{"a": "' + "\\" * 20_000, "`" * 20_000])
def test_each_position_is_tried_for_an_opener_once_however_the_stream_is_chunked(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # defect: ~8 µs a character of such text (a 1 MB reply stalled the proxy's other clients
    # 3.7 s): the work stays one try per opener and position (its cost: bench/chaos.py)
    from agentfsm.dialects._tokens import OpenerDef

    calls = [0]
    real = OpenerDef.could_grow

    def counting(self: OpenerDef, buf: str, start: int) -> bool:
        calls[0] += 1
        return real(self, buf, start)

    monkeypatch.setattr(OpenerDef, "could_grow", counting)
    parser = StreamParser()
    for i in range(0, len(text), 3):
        parser.feed(text[i : i + 3])
    parser.close()
    assert parser.result() == parse_reply(text)
    assert calls[0] <= 6 * len(text), calls[0]  # the openers of one first character, once per position


async def test_a_long_streamed_reply_gives_the_event_loop_turns_while_it_is_parsed() -> None:
    import asyncio

    from agentfsm.core.backend import GenerationOptions
    from agentfsm.core.messages import PromptMessage
    from agentfsm.runtime.attempt import Attempt, generate
    from agentfsm.testing import ScriptedBackend

    reply = "[" * 300_000  # every character an opener's first: the slowest text to scan
    backend = ScriptedBackend([reply])
    ticks = [0]

    async def ticker() -> None:
        while True:
            ticks[0] += 1
            await asyncio.sleep(0)

    task = asyncio.ensure_future(ticker())
    out = Attempt()
    prompt = [PromptMessage(role="user", content="hi")]
    async for _ in generate(backend, prompt, GenerationOptions(), "", out, parser=StreamParser(), hold=False, deadline=None):
        pass
    task.cancel()
    assert out.text == reply and ticks[0] > 1  # others ran while the reply was parsed


async def test_a_long_reply_is_decided_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    # attempts (runtime.turn) and consensus candidates (runtime.model_calls.vote) both decide through it
    import threading

    from agentfsm.core.config import DEFAULTS
    from agentfsm.engine.decide import EngineConfig
    from agentfsm.core.messages import UserMessage
    from agentfsm.runtime import model_calls

    seen: list[str] = []
    real = model_calls.step

    def recording(*args: object, **kwargs: object) -> object:
        seen.append(threading.current_thread().name)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(model_calls, "step", recording)
    config = EngineConfig.of(DEFAULTS, [])
    history = [UserMessage(content="hi")]
    await model_calls.decide(history, "short", config, "stop")
    await model_calls.decide(history, "x" * model_calls.OFF_LOOP_CHARS, config, "stop")
    assert seen[0] == threading.current_thread().name and seen[1] != seen[0]


# --- the stream decides as the whole text does, however it is cut (issue 29, item 13) -----

_FRAGMENTS = ["<tool_call>", "</tool_call>", "<function=l>", "<function=e>", "</function>", "<parameter=a>",
              "</parameter>", "\n", " ", "x", "{", "}", '"', "```", "```json action\n", "[TOOL_CALLS]", "@tool l {}",
              '{"name": "l", "arguments": {}}', "<", "/", "t", "\U0001f60a" * 14, "[", "]"]


def _streamed(text: str, cuts: list[int]) -> tuple[ParsedReply, tuple[ToolCall, ...]]:
    parser = StreamParser()
    events: list[StreamEvent] = []
    points = sorted({c % (len(text) + 1) for c in cuts})
    for a, b in zip([0, *points], [*points, len(text)], strict=True):
        events += parser.feed(text[a:b])
    events += parser.close()
    return parser.result(), tuple(e.call for e in events if isinstance(e, ToolCallDelta))


def test_the_minimal_disagreement_of_the_issue_is_gone() -> None:
    text = "<tool_call><function=l></function><tool_call><function=e></function>"
    whole = parse_reply(text)
    for size in range(1, len(text) + 1):
        result, emitted = _streamed(text, list(range(size, len(text), size)))
        assert result == whole and emitted == whole.tool_calls, size


_XML = ["<tool_call>", "</tool_call>", "<function=l>", "</function>", "<parameter=a>", "</parameter>", "\n", "x", "<", "{}"]


@settings(max_examples=1500, deadline=None)
@given(
    st.one_of(st.lists(st.sampled_from(_FRAGMENTS), max_size=14), st.lists(st.sampled_from(_XML), max_size=10)).map("".join),
    st.lists(st.integers(0, 400), max_size=12),
    st.integers(1, 12),
)
def test_stream_parser_and_parse_reply_agree_on_any_chunking(text: str, cuts: list[int], size: int) -> None:
    whole = parse_reply(text)
    for points in (cuts, list(range(size, len(text), size))):  # cut anywhere, and every ``size``
        result, emitted = _streamed(text, points)
        assert result == whole
        assert emitted == whole.tool_calls
