"""Benchmark: decoding an upstream's SSE stream, agentfsm's decoder against the libraries'.

The generic part of reading a streamed chat completion is bytes to the ``data`` of each
event (``agentfsm.backends._sse.SSEDecoder``). The library a project would reach for
is httpx-sse; its public API (``EventSource``) takes an ``httpx.Response`` and reads it
with ``iter_text()``, which the backend cannot hand it (the async pool is aiohttp's, and
the body is read raw, decompressed and bounded by ``BoundedBody``), so the column
"httpx-sse" is the part of it that could be used: its line decoder and event decoder
(``httpx_sse._decoders``), behind the same bytes-to-text step (UTF-8, a leading BOM
dropped), events without data left out, and the event a body ends in read at its end,
as agentfsm's decoder does. "httpx2" is the same for the parser pydantic's httpx fork
carries (``httpx2._sse``, derived from httpx-sse's), where it is installed.

The bodies are what an OpenAI-compatible upstream streams: 2,000 ``chat.completion.chunk``
deltas (~170 bytes each) as a server flushing each token sends them (one event a chunk),
and as a reader that falls behind gets them (64 KiB a chunk), with LF and with CRLF line
ends (sse-starlette, under llama-cpp-python's server, ends lines in CRLF); a few long
deltas (4 of 256 KiB, 16 KiB a chunk); and 1 MiB of lone CRs, a hostile upstream's body.

The two decoders are timed in pairs: each of :data:`ROUNDS` rounds decodes the body
with both, in alternating order, ``number`` times each (enough for ~5 ms); the table
shows medians over the rounds with the quartiles in brackets, and the ratio is the
median of each round's ratio. CPU time of this process (``time.process_time``), which
other load on a shared machine disturbs less than wall time. For scale, the column
"meaning" is ``ChatStreamState.accept`` of the same events (the part agentfsm keeps in
either case: JSON, deltas, usage, errors).
"""

from __future__ import annotations

import codecs
import statistics
import time
from collections.abc import Callable
from functools import partial
from importlib.metadata import version
from typing import Any, Protocol

from agentfsm.backends._sse import ChatStreamState, SSEDecoder

__all__ = ["run"]

ROUNDS = 21
EVENTS = 2000
DELTA = (
    'data: {"id":"chatcmpl-9f2c1a7e","object":"chat.completion.chunk","created":1732700000,'
    '"model":"qwen2.5-7b-instruct","choices":[{"index":0,"delta":{"content":"%s"},"finish_reason":null}]}'
)
END = [
    'data: {"id":"chatcmpl-9f2c1a7e","object":"chat.completion.chunk","created":1732700000,'
    '"model":"qwen2.5-7b-instruct","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}',
    'data: {"id":"chatcmpl-9f2c1a7e","object":"chat.completion.chunk","created":1732700000,'
    '"model":"qwen2.5-7b-instruct","choices":[],"usage":{"prompt_tokens":812,"completion_tokens":2000}}',
    "data: [DONE]",
]
WORDS = (" the", " weather", " in", " Paris", " is", " sunny", ",", " 21", "\u00b0C", " today", ".", "\\n")


class _Decoder(Protocol):
    def feed(self, chunk: bytes) -> list[str]: ...

    def close(self) -> list[str]: ...


Make = Callable[[], _Decoder]


class _HttpxSSE:
    """httpx-sse's line and event decoders, fed as agentfsm's decoder is: bytes in, data out."""

    def __init__(self) -> None:
        from httpx_sse._decoders import SSEDecoder as EventDecoder
        from httpx_sse._decoders import SSELineDecoder

        self._text = codecs.getincrementaldecoder("utf-8-sig")(errors="replace")
        self._lines = SSELineDecoder()
        self._events = EventDecoder()

    def feed(self, chunk: bytes) -> list[str]:
        text = self._text.decode(chunk)
        if not text:
            return []
        return self._data(self._lines.decode(text))

    def close(self) -> list[str]:
        return self._data([*self._lines.flush(), ""])

    def _data(self, lines: list[str]) -> list[str]:
        out: list[str] = []
        for line in lines:
            event = self._events.decode(line)
            if event is not None and event.data:  # 0.4.3 hands out events without data
                out.append(event.data)
        return out


class _Httpx2SSE:
    """httpx2's parser (pydantic's httpx fork carries httpx-sse's, reworked), fed the same way."""

    def __init__(self) -> None:
        from httpx2._sse import _SSEParser

        self._text = codecs.getincrementaldecoder("utf-8-sig")(errors="replace")
        self._parser = _SSEParser(max_event_size=None)  # the reply's bound applies before it

    def feed(self, chunk: bytes) -> list[str]:
        text = self._text.decode(chunk)
        if not text:
            return []
        return [event.data for event in self._parser.decode(text) if event.data]

    def close(self) -> list[str]:
        # flush() leaves an event the body ended in pending; a blank line hands it out
        events = [*self._parser.flush(), *self._parser.decode("\n")]
        return [event.data for event in events if event.data]


def _body(events: list[str], end: str) -> bytes:
    return "".join(event + end + end for event in events).encode()


def _deltas() -> list[str]:
    return [DELTA % WORDS[i % len(WORDS)] for i in range(EVENTS)] + END


def _long() -> list[str]:
    text = ("Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 4600)[: 256 << 10]
    return [DELTA % text for _ in range(4)] + END


def _cut(body: bytes, size: int) -> list[bytes]:
    return [body[i : i + size] for i in range(0, len(body), size)]


def _per_event(body: bytes) -> list[bytes]:
    """One event a chunk, as a server that flushes each token sends them."""
    sep = b"\r\n\r\n" if b"\r\n" in body else b"\n\n"
    return [event + sep for event in body.split(sep) if event]


def _workloads() -> list[tuple[str, list[bytes]]]:
    lf, crlf = _body(_deltas(), "\n"), _body(_deltas(), "\r\n")
    return [
        (f"{EVENTS:,} deltas, LF, one event a chunk", _per_event(lf)),
        (f"{EVENTS:,} deltas, CRLF, one event a chunk", _per_event(crlf)),
        (f"{EVENTS:,} deltas, LF, 64 KiB chunks", _cut(lf, 64 << 10)),
        (f"{EVENTS:,} deltas, CRLF, 64 KiB chunks", _cut(crlf, 64 << 10)),
        ("4 deltas of 256 KiB, LF, 16 KiB chunks", _cut(_body(_long(), "\n"), 16 << 10)),
        ("1 MiB of lone CR (hostile), 64 KiB chunks", _cut(b"\r" * (1 << 20), 64 << 10)),
    ]


def _decode(make: Make, chunks: list[bytes]) -> list[str]:
    decoder = make()
    out: list[str] = []
    for chunk in chunks:
        out += decoder.feed(chunk)
    return out + decoder.close()


def _cpu(fn: Callable[[], Any], number: int) -> float:
    start = time.process_time()
    for _ in range(number):
        fn()
    return (time.process_time() - start) / number


def _quartiles(values: list[float]) -> tuple[float, float, float]:
    q1, q2, q3 = statistics.quantiles(values, n=4)
    return q1, q2, q3


def _ms(values: list[float]) -> str:
    q1, q2, q3 = _quartiles(values)
    return f"{q2 * 1e3:.3f} ({q1 * 1e3:.3f}-{q3 * 1e3:.3f})"


def _meaning(data: list[str]) -> float:
    def accept() -> None:
        state = ChatStreamState()
        for item in data:
            state.accept(item)

    return statistics.median(_cpu(accept, 3) for _ in range(5))


def _libraries() -> list[tuple[str, Make]]:
    """The libraries compared against, those installed (httpx-sse comes with the mcp
    extra, httpx2 with the openai and anthropic SDKs of the test extra)."""
    found: list[tuple[str, Make]] = []
    for name, module, make in (("httpx-sse", "httpx_sse", _HttpxSSE), ("httpx2", "httpx2", _Httpx2SSE)):
        try:
            __import__(module)
        except ImportError:
            continue
        found.append((f"{name} {version(name)}", make))
    return found


def _table(libraries: list[tuple[str, Make]]) -> dict[str, Any]:
    decoders: list[tuple[str, Make]] = [("agentfsm", SSEDecoder), *libraries]
    rows: list[list[Any]] = []
    for name, chunks in _workloads():
        ours = _decode(SSEDecoder, chunks)
        for label, make in libraries:  # the same events, or no comparison
            assert _decode(make, chunks) == ours, f"{name}: {label} gives other events"
        size = sum(map(len, chunks))
        once = _cpu(lambda: _decode(SSEDecoder, chunks), 1)
        number = max(1, min(200, int(0.005 / max(once, 1e-6))))
        times: list[list[float]] = [[] for _ in decoders]
        for i in range(ROUNDS):
            turn = i % len(decoders)  # each decoder goes first in turn
            for k in [*range(turn, len(decoders)), *range(turn)]:
                times[k].append(_cpu(partial(_decode, decoders[k][1], chunks), number))
        row: list[Any] = [
            name, f"{size / 1024:,.0f}", len(chunks), len(ours),
            _ms(times[0]), f"{size / statistics.median(times[0]) / 2**20:,.0f}",
        ]
        for lib_times in times[1:]:
            r1, r2, r3 = _quartiles([b / a for a, b in zip(times[0], lib_times)])
            row += [_ms(lib_times), f"{r2:.2f}x ({r1:.2f}-{r3:.2f})"]
        rows.append(row + [f"{_meaning(ours) * 1e3:.2f}" if ours else "-"])
    columns = ["body", "KiB", "chunks", "events", "agentfsm ms (quartiles)", "agentfsm MiB/s"]
    for label, _ in libraries:
        columns += [f"{label} ms (quartiles)", f"{label.split()[0]} / agentfsm (quartiles)"]
    return {
        "title": "SSE decoding: bytes to event data, agentfsm's decoder against the libraries' (CPU ms per body)",
        "columns": [*columns, "meaning ms (accept)"],
        "rows": rows,
        "notes": (
            f"Paired: {ROUNDS} rounds, every decoder in each, each going first in turn; medians over "
            "rounds, quartiles in brackets; a ratio is the median of the rounds' ratios (above 1: the "
            "library slower). Every decoder gave the same events for every body (checked before timing). "
            "'meaning': ChatStreamState.accept over the same events, the part kept either way."
        ),
    }


def run() -> list[dict[str, Any]]:
    """The one table."""
    libraries = _libraries()
    if not libraries:
        return [{
            "title": "SSE decoding: no library to compare against",
            "columns": ["needs"], "rows": [["pip install httpx-sse (a dependency of the mcp extra)"]],
            "notes": "", "failed": True,
        }]
    return [_table(libraries)]


if __name__ == "__main__":
    from run import print_tables  # bench/run.py

    print_tables(run(), __file__)
