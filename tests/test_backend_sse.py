"""The upstream's SSE stream decoded (backends/_sse.py): in time linear in its bytes, and
every framing rule a library in its place would have to keep.

Defect (the SSE audit): the decoder searched and copied the whole of the text it held
for each line it cut off, so an upstream sending lone ``\\r`` line ends, or one long
line in many chunks, cost time quadratic in the body: through the proxy 1 MiB of
``\\r`` (within the bound of a 256-token reply) held the event loop, and ``/health``
with it, for 15 to 19 s.

The framing tests pin what httpx-sse's decoders (bench/results/sse.md) do otherwise:
an ``id:``, ``event:`` or ``retry:`` field without data is no event (httpx-sse 0.4.3
hands out an event with empty data, after a sticky ``id`` at every blank line), and an
event the body ends without a blank line after is read (httpx-sse drops it).

Defects (the wire audit), each shown with raw bytes from a FakeUpstream through the proxy
and the official openai SDK: an event with empty data (``data:`` or ``data: `` then a
blank line, which relays send to keep a stream alive; the SSE standard makes it an event
with empty data) failed the stream with a 502, ``upstream stream event is not JSON: ''``;
a body that ended inside a UTF-8 character (after its finish_reason, after ``[DONE]``,
or in the last line's JSON) was read as if whole, the cut character dropped, or failed as
JSON that is not JSON. Now the empty event is skipped, as a comment is, and the cut is a
BackendProtocolError that says so. One event without a line end is bounded by the
reply's bound, as any body is (read no further, held no larger).
"""

from __future__ import annotations

import time
import tracemalloc
import zlib

import httpx
import openai
import pytest

from agentfsm.backends._body import BoundedBody, reply_limit
from agentfsm.backends import GenerationOptions, OpenAICompatBackend, Timeouts
from agentfsm.backends._sse import SSEDecoder
from agentfsm.core.errors import BackendProtocolError
from agentfsm.testing import FakeUpstream, raw_body
from tests._fake import call
from tests._proxy import proxy, upstream_backend

DELTA = b'data: {"choices":[{"delta":{"content":"%s"},"finish_reason":null}]}'
STOP = b'data: {"choices":[{"delta":{},"finish_reason":"stop"}]}'


def _decode(chunks: list[bytes]) -> list[str]:
    decoder = SSEDecoder()
    return [data for chunk in chunks for data in decoder.feed(chunk)] + decoder.close()


def _cut(body: bytes, size: int) -> list[bytes]:
    return [body[i : i + size] for i in range(0, len(body), size)]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", {"model": "m", "stream": True, "messages": [{"role": "user", "content": "go"}]}),
        ("/v1/messages", {"model": "m", "stream": True, "max_tokens": 256, "messages": [{"role": "user", "content": "go"}]}),
    ],
)
def test_a_stream_of_lone_carriage_returns_leaves_the_proxy_serving(
    watched: tuple[FakeUpstream, str, list[float]], path: str, body: dict[str, object]
) -> None:
    # defect: 1 MiB of b"\r" took 15 to 19 s to decode, on the event loop
    fake, url, seconds = watched
    fake.enqueue(raw_body(b"\r" * (1 << 20), "text/event-stream"))
    while not seconds:
        time.sleep(0.01)
    started = time.monotonic()
    answer = httpx.post(url + path, json=body, timeout=120)
    took = time.monotonic() - started
    assert answer.status_code == 502 and "truncated" in answer.text, answer.text
    count = len(seconds)
    while len(seconds) <= count:  # a /health answer that overlapped the request
        time.sleep(0.01)
    assert took < 5 and max(seconds) < 5, (took, max(seconds))


@pytest.mark.parametrize(
    ("body", "size", "events"),
    [
        (b"data: " + b"x" * (16 << 20), 16 << 10, 1),  # one 16 MiB line in 16 KiB chunks (was 10 s)
        (b"\r" * (1 << 20), 1 << 20, 0),  # 1 MiB of empty lines in one chunk (was 22 s)
        (b"\r" * (1 << 20), 64 << 10, 0),  # the same in 64 KiB chunks (was 3 s)
        (b"data: x\r\n\r\n" * (1 << 18), 3 << 20, 1 << 18),  # 256 Ki short CRLF events in one chunk (was 22 s)
    ],
    ids=["long-line", "lone-cr", "lone-cr-chunks", "crlf-events"],
)
def test_decoding_takes_time_linear_in_the_body(body: bytes, size: int, events: int) -> None:
    started = time.process_time()
    decoded = _decode(_cut(body, size))
    assert time.process_time() - started < 2
    assert len(decoded) == events


@pytest.mark.parametrize("end", [b"\n", b"\r\n", b"\r"], ids=["lf", "crlf", "cr"])
@pytest.mark.parametrize("size", [1, 2, 3, 5, 1000])
def test_every_line_end_in_every_cut(end: bytes, size: int) -> None:
    body = end.join([b"\xef\xbb\xbf: hi", b"data: h\xc3\xa9", b"data:two", b"data", b"", b"data: [DONE]", b"", b""])
    assert _decode(_cut(body, size)) == ["h\u00e9\ntwo\n", "[DONE]"]


def test_fields_without_data_are_no_event() -> None:
    # httpx-sse 0.4.3 hands out an event with empty data for each of these blank lines
    body = b"id: 1\n\nevent: ping\n\nretry: 1000\n\n: keep-alive\n\n\n" + b"id: 2\ndata: x\n\n: ping\n\n"
    assert _decode([body]) == ["x"]


def test_only_a_leading_byte_order_mark_is_dropped() -> None:
    assert _decode([b"\xef", b"\xbb", b"\xbf", b"data: \xef\xbb\xbfa\n\n"]) == ["\ufeffa"]
    assert _decode([b"data: \xff\xc3\n\n"]) == ["\ufffd\ufffd"]  # not UTF-8: replaced, not raised


@pytest.mark.parametrize("mode", ["stream", "astream"])
def test_an_upstream_with_ids_keep_alives_and_no_last_blank_line_is_read(mode: str) -> None:
    # through httpx-sse's EventSource: 'event: ping' and the comment after an id would each be
    # an event with empty data (not JSON), and the finish_reason the body ends in would be lost
    body = b"".join(
        [
            b": ping\r\n\r\nretry: 3000\r\n\r\n",
            b"id: 1\r\nevent: message\r\n" + DELTA % b"Paris" + b"\r\n\r\n",
            b": keep-alive\r\n\r\n",
            b"id: 2\r\n" + DELTA % b" is sunny" + b"\r\n\r\n",
            b"event: ping\r\n\r\n",
            b"id: 3\r\n" + STOP,  # the body ends without the blank line (and no [DONE])
        ]
    )
    with (
        FakeUpstream([raw_body(body, "text/event-stream")]) as fake,
        OpenAICompatBackend(fake.base_url, "m", api_key="k", timeout=Timeouts(2, 5, 20), max_retries=0) as backend,
    ):
        assert call(backend, mode, GenerationOptions(max_tokens=16)) == "Paris is sunny"


def _backend(fake: FakeUpstream) -> OpenAICompatBackend:
    return OpenAICompatBackend(fake.base_url, "m", api_key="k", timeout=Timeouts(2, 5, 20), max_retries=0)


def test_an_empty_data_field_is_an_event_with_empty_data() -> None:
    # the standard's reading: the framing hands it out; the chat stream skips it (below)
    assert _decode([b"data:\n\ndata: \n\ndata:  \n\ndata: x\n\n"]) == ["", "", " ", "x"]


EMPTY_EVENTS = b"".join(
    [
        b"data:\n\n",  # before any delta
        DELTA % b"Paris" + b"\n\n",
        b"data: \r\n\r\n",
        DELTA % b" is sunny" + b"\n\n",
        b"data:  \n\ndata:\n\n",
        STOP + b"\n\n",
        b"data:\n\ndata: [DONE]\n\ndata:\n\n",
    ]
)


@pytest.mark.parametrize("mode", ["stream", "astream"])
def test_events_with_empty_data_are_skipped(mode: str) -> None:
    # defect: the first one failed the stream, "upstream stream event is not JSON: ''"
    with FakeUpstream([raw_body(EMPTY_EVENTS, "text/event-stream")]) as fake, _backend(fake) as backend:
        assert call(backend, mode, GenerationOptions(max_tokens=16)) == "Paris is sunny"


def test_through_the_proxy_an_sdk_reads_a_stream_with_empty_events() -> None:
    with FakeUpstream([raw_body(EMPTY_EVENTS, "text/event-stream")]) as fake, proxy(upstream_backend(fake)) as url:
        with openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0) as client:
            chunks = list(client.chat.completions.create(model="m", messages=[{"role": "user", "content": "go"}],
                                                         stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Paris is sunny"
    assert chunks[-1].choices[0].finish_reason == "stop"


#: a whole stream, then the first bytes of a character: what a body cut inside one ends in
CUT_AFTER = {
    "after-done": DELTA % b"caf\xc3\xa9" + b"\n\n" + STOP + b"\n\ndata: [DONE]\n\n\xc3",
    "in-done-line": DELTA % b"caf\xc3\xa9" + b"\n\n" + STOP + b"\n\ndata: [DONE]\xe2\x82",
    "after-finish-json": DELTA % b"caf\xc3\xa9" + b"\n\n" + STOP + b"\xf0\x9f\x98",
    "in-json": DELTA % b"caf\xc3\xa9" + b"\n\n" + b'data: {"choices":[{"delta":{"content":"caf\xc3',
}


@pytest.mark.parametrize("mode", ["stream", "astream"])
@pytest.mark.parametrize("body", CUT_AFTER.values(), ids=CUT_AFTER.keys())
def test_a_body_that_ends_inside_a_character_was_cut(mode: str, body: bytes) -> None:
    # defect: the first three were read as whole answers (the cut bytes dropped), the last
    # failed as "not JSON" with the character's bytes left out of what it quoted
    with FakeUpstream([raw_body(body, "text/event-stream")]) as fake, _backend(fake) as backend:
        with pytest.raises(BackendProtocolError, match=r"inside a UTF-8 character \(truncated\)"):
            call(backend, mode, GenerationOptions(max_tokens=16))


@pytest.mark.parametrize("size", [1, 2, 1000])
def test_only_a_character_left_open_at_the_end_is_a_cut(size: int) -> None:
    whole = "data: \u00e9\u20ac\U0001f600\n\n".encode()  # 2-, 3- and 4-byte characters
    assert _decode(_cut(whole, size)) == ["\u00e9\u20ac\U0001f600"]
    for end in range(len(b"data: "), len(whole) - 1):  # every cut, inside a character or between two
        decoder = SSEDecoder()
        for chunk in _cut(whole[:end], size):
            decoder.feed(chunk)
        inside = (whole[end] & 0xC0) == 0x80  # the next byte continues a character
        if inside:
            with pytest.raises(BackendProtocolError, match="inside a UTF-8 character"):
                decoder.close()
        else:
            decoder.close()


@pytest.mark.parametrize("mode", ["stream", "astream"])
def test_one_event_without_a_line_end_is_held_within_the_replys_bound(mode: str) -> None:
    # 64 MiB of one data line, sent gzipped (~64 KiB): read no further than the bound of
    # a 16-token reply (about 1 MiB), and never held larger
    z = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    block = b"x" * (1 << 20)
    body = z.compress(b'data: {"choices":[{"delta":{"content":"') + b"".join(z.compress(block) for _ in range(64))
    body += z.flush()
    reply = raw_body(body, "text/event-stream", headers={"content-encoding": "gzip"})
    with FakeUpstream([reply]) as fake, _backend(fake) as backend:
        tracemalloc.start()
        try:
            with pytest.raises(BackendProtocolError, match="larger than"):
                call(backend, mode, GenerationOptions(max_tokens=16))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak < 32 << 20, peak


@pytest.mark.parametrize(("max_tokens", "said"), [(16, "more than max_tokens allows"), (None, "the most any reply may be")])
def test_a_reply_over_its_bound_says_which_bound(max_tokens: int | None, said: str) -> None:
    # with no max_tokens sent, the bound is the proxy's own on any reply, not max_tokens'
    limit = reply_limit(max_tokens, stream=True)
    with pytest.raises(BackendProtocolError, match=f"larger than {limit} bytes, {said};"):
        BoundedBody({}, limit).feed(b"x" * (limit + 1))
