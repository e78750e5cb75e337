"""Benchmark: what the embedded model re-reads, and what a Claude Code turn waits for.

Three tables, every figure from this run on this machine:

- prompt tokens evaluated / prompt tokens sent (``LocalBackend.prompt_counts``) over a
  scripted 5-turn conversation, two interleaved ones (with the saved-state store and with
  it off: the context's own prefix reuse only), a corrected decision (the prompt, then
  the prompt with the reply and a correction), consensus candidates of one prompt, and a
  scoring of three continuations;
- Claude Code's captured first request (21 tools) replayed through the proxy to the
  embedded model, then its second turn (the first request, the proxy's answer and a
  follow-up): time to first streamed token of each, and the ratio;
- the GBNF of Claude Code's tool set: converted, then served from the cache.

Tokens/s of streamed vs in-process and grammar vs free generation are in
``bench_backends.py`` (same run of ``make bench``).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anthropic
import uvicorn

from agentfsm.backends import GenerationOptions
from agentfsm.backends.local import LocalBackend, PromptCounts
from agentfsm.core.choice import ToolChoice
from agentfsm.core.messages import PromptMessage, ToolSpec
from agentfsm.prompt.enforcement import build_action_schema
from agentfsm.server.app import create_app

__all__ = ["run"]

CLIENTS = Path(__file__).resolve().parent.parent / "fixtures" / "clients"
#: a system turn the size of a small tool contract (~400 tokens)
SYSTEM = PromptMessage(
    role="system",
    content=(
        "You are an assistant with tools. To call one, answer with a JSON object "
        '{"tool": name, "args": {...}}. Tools: get_weather(city) gives the weather in a city; '
        "convert_units(value, from_unit, to_unit) converts km, m, mi and ft; "
        "calculate(expression) evaluates arithmetic. "
    )
    * 6,
)
TURNS = (
    "What is the weather in Paris?",
    "And in Rome?",
    "Convert 12 km to miles.",
    "Multiply that by three.",
    "Thanks. Summarize what we found.",
)


def _delta(backend: LocalBackend, before: PromptCounts) -> tuple[int, int]:
    after = backend.prompt_counts
    return after.sent - before.sent, after.evaluated - before.evaluated


def _conversation(backend: LocalBackend, topic: str) -> Iterator[None]:
    """One turn per ``next()``: the user's turn, the model's reply appended."""
    options = GenerationOptions(max_tokens=16)
    messages = [SYSTEM]
    for turn in TURNS:
        messages.append(PromptMessage(role="user", content=f"[{topic}] {turn}"))
        reply = backend.complete(messages, options).text
        messages.append(PromptMessage(role="assistant", content=reply))
        yield


def _fresh(backend: LocalBackend) -> None:
    """An empty context and no saved state: each row starts cold."""
    model = backend._model
    with model.lock:
        model.llama.reset()
        model.store._saved.clear()


def _ratio_row(name: str, backend: LocalBackend, work: Callable[[], None], note: str) -> list[Any]:
    _fresh(backend)
    before = backend.prompt_counts
    start = time.perf_counter()
    work()
    seconds = time.perf_counter() - start
    sent, evaluated = _delta(backend, before)
    return [name, sent, evaluated, f"{evaluated / sent:.2f}", f"{seconds:.1f}", note]


def _reuse_table(backend: LocalBackend) -> dict[str, Any]:
    rows: list[list[Any]] = []

    def five_turns() -> None:
        for _ in _conversation(backend, "A"):
            pass

    rows.append(_ratio_row("5-turn conversation, cold", backend, five_turns, "the first turn read whole"))

    def five_turns_warm() -> None:
        conversation = _conversation(backend, "A")
        next(conversation)  # the first turn: not counted
        before = backend.prompt_counts
        for _ in conversation:
            pass
        sent, evaluated = _delta(backend, before)
        rows.append(["5-turn conversation, turns 2-5", sent, evaluated, f"{evaluated / sent:.2f}", "", "each turn re-reads its new lines"])

    _fresh(backend)
    five_turns_warm()

    def after_another() -> None:
        for _ in _conversation(backend, "B"):
            pass

    def same_system_twice() -> None:
        for _ in _conversation(backend, "A"):
            pass

    _fresh(backend)
    same_system_twice()
    before = backend.prompt_counts
    start = time.perf_counter()
    after_another()
    sent, evaluated = _delta(backend, before)
    rows.append([
        "5-turn conversation after another with the same system turn", sent, evaluated,
        f"{evaluated / sent:.2f}", f"{time.perf_counter() - start:.1f}", "the system turn is read once for both",
    ])

    def interleaved() -> None:
        a, b = _conversation(backend, "A" * 200), _conversation(backend, "B" * 200)
        for _ in TURNS:
            next(a)
            next(b)

    rows.append(_ratio_row("2 conversations interleaved, saved states", backend, interleaved, "each turn restores its conversation"))
    store = backend._model.store
    kept, store.max_bytes = store.max_bytes, 0
    try:
        rows.append(_ratio_row("2 conversations interleaved, no saved states", backend, interleaved, "the context's own prefix reuse only"))
    finally:
        store.max_bytes = kept

    question = [SYSTEM, PromptMessage(role="user", content=TURNS[0])]

    def corrected() -> None:
        reply = backend.complete(question, GenerationOptions(max_tokens=24)).text
        correction = [*question, PromptMessage(role="assistant", content=reply),
                      PromptMessage(role="user", content="That reply had no tool call. Answer with the JSON object only.")]
        backend.complete(correction, GenerationOptions(max_tokens=24))

    rows.append(_ratio_row("corrected decision (reply, then correction)", backend, corrected, "the correction re-reads its lines"))

    def consensus() -> None:
        for seed in range(4):
            backend.complete(question, GenerationOptions(max_tokens=16, temperature=0.8, seed=seed))

    rows.append(_ratio_row("4 consensus candidates of one prompt", backend, consensus, "each candidate re-reads one token"))

    def scoring() -> None:
        backend.complete(question, GenerationOptions(max_tokens=8))
        backend.score(question, GenerationOptions(), [" It is sunny.", " I don't know.", '{"tool": "get_weather"}'])

    rows.append(_ratio_row("a reply, then 3 continuations scored", backend, scoring, "continuations counted as sent"))
    return {
        "title": "Embedded model: prompt tokens evaluated / prompt tokens sent",
        "columns": ["scenario", "sent", "evaluated", "evaluated / sent", "seconds", "note"],
        "rows": rows,
        "notes": (
            "Counts from LocalBackend.prompt_counts (tokens of every prompt sent to the model, and "
            "those llama.cpp evaluated; the rest were kept in the context or restored from a saved "
            "state). Each row starts from an empty context and no saved states. Greedy replies of "
            "up to 16 tokens appended to each turn; system turn of ~400 tokens."
        ),
    }


@contextmanager
def _proxy(backend: LocalBackend) -> Iterator[str]:
    config = uvicorn.Config(create_app(backend), host="127.0.0.1", port=0, log_level="warning", ws="none", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the proxy did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=20)


_KNOWN = ("model", "messages", "system", "tools", "max_tokens", "metadata", "thinking")


def _stream(client: anthropic.Anthropic, body: dict[str, Any]) -> tuple[float, float, list[dict[str, Any]]]:
    """Seconds to the first content delta, in all, and the answer's content blocks."""
    start = time.perf_counter()
    first = None
    extra = {k: v for k, v in body.items() if k not in _KNOWN and k != "stream"}
    with client.messages.stream(**{k: body[k] for k in _KNOWN if k in body}, extra_body=extra) as events:
        for event in events:
            if first is None and event.type == "content_block_delta":
                first = time.perf_counter() - start
        final = events.get_final_message()
    total = time.perf_counter() - start
    return (first if first is not None else total), total, [block.model_dump(exclude_none=True) for block in final.content]


def _claude_code_table(backend: LocalBackend) -> dict[str, Any]:
    body: dict[str, Any] = json.loads((CLIENTS / "claude_code_request_full_tools.json").read_text(encoding="utf-8"))["body"]
    body = body | {"max_tokens": 48}
    _fresh(backend)
    rows: list[list[Any]] = []
    with _proxy(backend) as url, anthropic.Anthropic(base_url=url, api_key="unused", max_retries=0, timeout=1800) as client:
        before = backend.prompt_counts
        first, total, content = _stream(client, body)
        sent, evaluated = _delta(backend, before)
        rows.append(["first request (captured)", f"{first:.1f}", f"{total:.1f}", sent, evaluated, "1.00"])
        follow: list[dict[str, Any]] = [{"role": "assistant", "content": content or [{"type": "text", "text": "..."}]}]
        results = [{"type": "tool_result", "tool_use_id": b["id"], "content": "done"} for b in content if b.get("type") == "tool_use"]
        follow.append({"role": "user", "content": [*results, {"type": "text", "text": "Thanks. What next?"}]})
        second_body = body | {"messages": [*body["messages"], *follow]}
        before = backend.prompt_counts
        second, total2, _ = _stream(client, second_body)
        sent, evaluated = _delta(backend, before)
        rows.append(["second turn (first + answer + follow-up)", f"{second:.1f}", f"{total2:.1f}", sent, evaluated, f"{second / first:.2f}"])
    return {
        "title": "Claude Code's first request (21 tools) and its second turn, through the proxy to the embedded model",
        "columns": ["request", "time to first token (s)", "total (s)", "prompt tokens sent", "evaluated", "first-token time vs first"],
        "rows": rows,
        "notes": (
            "fixtures/clients/claude_code_request_full_tools.json streamed through agentfsm's "
            "Anthropic endpoint with max_tokens=48 (every model call of the decision counted); the "
            "second turn appends the proxy's own answer (with a tool_result per tool_use) and a "
            "follow-up, as Claude Code does. Time to first token: the first content_block_delta."
        ),
    }


def _grammar_table(backend: LocalBackend) -> dict[str, Any]:
    body = json.loads((CLIENTS / "claude_code_request_full_tools.json").read_text(encoding="utf-8"))["body"]
    tools = [ToolSpec.from_anthropic(t) for t in body["tools"] if "input_schema" in t]
    schema = build_action_schema(tools, ToolChoice.AUTO, parallel=True)
    cache = backend._model.grammars
    cache._texts.clear()
    start = time.perf_counter()
    cache.gbnf(schema)
    converted = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(100):
        cache.gbnf(schema)
    cached = (time.perf_counter() - start) / 100
    return {
        "title": "GBNF of Claude Code's tool set: converted once, then from the cache",
        "columns": ["lookup", "ms", "vs conversion"],
        "rows": [
            [f"converted ({len(tools)} tools, reference)", f"{converted * 1000:.1f}", "1.00"],
            ["served from the cache", f"{cached * 1000:.3f}", f"{cached / converted:.4f}"],
        ],
        "notes": "build_action_schema(tools, 'auto', parallel=True) through GrammarCache.gbnf; the cached lookup averages 100.",
    }


def run() -> list[dict[str, Any]]:
    """The three tables."""
    backend = LocalBackend()
    backend.load()
    return [_reuse_table(backend), _grammar_table(backend), _claude_code_table(backend)]


if __name__ == "__main__":
    from run import print_tables  # bench/run.py

    print_tables(run(), __file__)
