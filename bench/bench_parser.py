"""Benchmark: the reply parser on typical replies and on adversarial input.

Three tables, every figure measured in the same run as its reference:

1. a typical ~2 KB reply (prose and one ``json action`` block), against ``json.loads``
   of the block's payload alone (target: parse_reply within 3x);
2. adversarial replies at 64 KB, 256 KB and 1 MB (unclosed fences and delimiters,
   ``{`` / ``[`` / ``@tool`` floods, giant strings, deep nesting, 5,000-digit numbers,
   NaN, lone surrogates, broken blocks that need repair), against ``json.loads`` of a
   valid JSON document of the same size (targets: 1 MB in at most 200 ms; 256 KB to
   1 MB grows at most 5x, i.e. linear);
3. ``StreamParser`` on the typical reply in 4-character chunks, against parse_reply.

Times are best-of-N process (CPU) time, which other load on the machine disturbs less
than wall time; the parser is single-threaded and does no IO, so the two agree on an
idle machine.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from agentfsm.parser import parse_reply
from agentfsm.stream import StreamParser

__all__ = ["run"]

S = "\U0001f60a"
SIZES = (65_536, 262_144, 1_048_576)


def _best(fn: Callable[[], Any], repeat: int, number: int = 1) -> float:
    """Best-of-``repeat`` CPU seconds per call (process time: steady on a shared machine)."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        for _ in range(number):
            fn()
        best = min(best, (time.process_time() - t0) / number)
    return best


def _typical() -> tuple[str, str]:
    args = {
        "query": "cheap flights to Lisbon in May",
        "filters": [
            {"field": "price", "op": "lt", "value": 300 + i, "tags": ["direct", "eu"], "strict": True}
            for i in range(18)
        ],
        "limit": 10,
        "sort": {"by": "price", "descending": False},
    }
    payload = json.dumps({"tool": "search_flights", "parameters": args})
    reply = (
        "I'll search for flights that match your dates and budget, then compare the "
        "options by price and duration before recommending one.\n\n"
        f"```json action\n{payload}\n```\n"
    )
    return reply, payload


def _fill(unit: str, size: int, head: str = "", tail: str = "") -> str:
    return head + unit * max(1, (size - len(head) - len(tail)) // len(unit)) + tail


FENCE = "```json action\n"
# the same inputs as tests/test_adversarial.py
CASES: dict[str, Callable[[int], str]] = {
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
    "valid blocks": lambda n: _fill(FENCE + '{"tool": "f", "parameters": {"a": 1}}\n```\n', n),
    "bare calls in prose": lambda n: _fill('ok {"name": "f", "parameters": {"a": [1, 2]}} ', n),
}


def _adversarial(size: int) -> dict[str, str]:
    return {name: make(size) for name, make in CASES.items()}


def _typical_table() -> dict[str, Any]:
    reply, payload = _typical()
    ref = _best(lambda: json.loads(payload), 7, 2000)
    parse = _best(lambda: parse_reply(reply), 7, 2000)
    return {
        "title": f"Typical reply ({len(reply)} chars, one json action block)",
        "columns": ["what", "µs per call", "ratio to json.loads(payload)"],
        "rows": [
            ["json.loads(payload) (reference)", round(ref * 1e6, 2), 1.0],
            ["parse_reply(reply)", round(parse * 1e6, 2), round(parse / ref, 2)],
        ],
        "notes": "target: parse_reply within 3x of json.loads on the block's payload",
    }


def _adversarial_table() -> dict[str, Any]:
    rows: list[list[Any]] = []
    worst = 0.0
    worst_growth = 0.0
    refs = {n: _best(lambda n=n: json.loads(json.dumps("a" * n)), 3) for n in SIZES}
    cases = {n: _adversarial(n) for n in SIZES}
    for name in cases[SIZES[0]]:
        times = []
        for n in SIZES:
            text = cases[n][name]
            times.append(_best(lambda text=text: parse_reply(text), 5))
        growth = times[2] / times[1] if times[1] else 0.0
        worst, worst_growth = max(worst, times[2]), max(worst_growth, growth)
        rows.append(
            [name]
            + [round(t * 1e3, 2) for t in times]
            + [round(times[2] / refs[SIZES[-1]], 1), round(growth, 2)]
        )
    return {
        "title": "Adversarial replies: parse_reply time (ms)",
        "columns": ["input", "64 KB", "256 KB", "1 MB", "1 MB / json.loads(1 MB)", "growth 256 KB -> 1 MB"],
        "rows": rows,
        "notes": (
            f"worst 1 MB: {worst * 1e3:.1f} ms (target <= 200 ms); worst growth "
            f"{worst_growth:.2f}x (target <= 5x); reference json.loads of a valid 1 MB "
            f"JSON string: {refs[SIZES[-1]] * 1e3:.2f} ms"
        ),
    }


def _stream_table() -> dict[str, Any]:
    reply, _ = _typical()
    chunks = [reply[i : i + 4] for i in range(0, len(reply), 4)]

    def stream() -> None:
        parser = StreamParser()
        for c in chunks:
            parser.feed(c)
        parser.close()

    ref = _best(lambda: parse_reply(reply), 5, 500)
    streamed = _best(stream, 5, 50)
    return {
        "title": "StreamParser on the typical reply, 4-character chunks",
        "columns": ["what", "µs per reply", "ratio to parse_reply"],
        "rows": [
            ["parse_reply (reference)", round(ref * 1e6, 1), 1.0],
            [f"StreamParser, {len(chunks)} chunks", round(streamed * 1e6, 1), round(streamed / ref, 1)],
        ],
        "notes": "streaming pays per chunk; the cost stays linear in the reply",
    }


def run() -> list[dict[str, Any]]:
    """The three tables."""
    return [_typical_table(), _adversarial_table(), _stream_table()]


if __name__ == "__main__":
    for table in run():
        print(f"\n{table['title']}\n{table['columns']}")
        for row in table["rows"]:
            print(row)
        print(table["notes"])
