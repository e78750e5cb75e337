"""Benchmark: a batch of 1,000 tool-using conversations against a fake upstream with 50 ms latency.

Each conversation takes two model calls (a tool call, then the answer) through the
OpenAI-compatible backend over real HTTP on 127.0.0.1, plus one tool execution and
the exactly-once results log. Two references, measured in the same run:

- the ideal wall time, ``conversations x calls x latency / concurrency``: what a
  controller and an HTTP stack with no cost at all would take;
- the backend alone: the same number of chat calls through the same backend, fake
  upstream and concurrency, with no agent and no controller (the HTTP stack's floor).

wall / ideal is the whole cost; wall / backend-only is what the agent loop, guards,
tools and results log add on top of the HTTP calls.
"""

from __future__ import annotations

import asyncio
import json
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from agentfsm.backends.base import GenerationOptions
from agentfsm.backends.openai_compat import OpenAICompatBackend
from agentfsm.batch import run_batch_sync
from agentfsm.dialects import get_dialect
from agentfsm.messages import PromptMessage, ToolCall
from agentfsm.testing import FakeReply, FakeUpstream, ReceivedRequest

__all__ = ["run"]

CONVERSATIONS = 1000
LATENCY = 0.05
CALLS_PER_CONVERSATION = 2
CONCURRENCY = (64,)
_TASK = re.compile(r"task (\d+):")


def _script(request: ReceivedRequest) -> FakeReply:
    texts = [str(m.get("content", "")) for m in request.messages]
    found = [m.group(1) for m in map(_TASK.search, texts) if m]
    number = found[0] if found else "0"
    if len(request.messages) <= 2:
        call = ToolCall(id="call_0", name="calculate", arguments={"expression": f"{number} + 1"})
        return FakeReply(text=get_dialect("json-action").render_call(call), latency=LATENCY)
    return FakeReply(text=f"{number} + 1 = {int(number) + 1}", latency=LATENCY)


async def _backend_only(base_url: str, calls: int, concurrency: int) -> float:
    backend = OpenAICompatBackend(base_url, model="fake", api_key="sk-bench")
    gate = asyncio.Semaphore(concurrency)
    options = GenerationOptions()

    async def one(i: int) -> None:
        async with gate:
            prompt = [PromptMessage(role="user", content=f"task {i // CALLS_PER_CONVERSATION}: what is it?")]
            await backend.acomplete(prompt, options)

    start = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(calls)))
    wall = time.perf_counter() - start
    await backend.aclose()
    return wall


def _measure(concurrency: int, workdir: Path) -> dict[str, Any]:
    tasks = workdir / "tasks.jsonl"
    tasks.write_text(
        "".join(json.dumps({"id": f"t{i}", "prompt": f"task {i}: what is {i} + 1?"}) + "\n" for i in range(CONVERSATIONS)),
        encoding="utf-8",
    )
    out = workdir / f"out-{concurrency}.jsonl"
    with FakeUpstream(_script) as fake:
        backend = OpenAICompatBackend(fake.base_url, model="fake", api_key="sk-bench")
        start = time.perf_counter()
        stats = run_batch_sync(
            tasks, output=out, backend=backend, tools_module="agentfsm.examples.calculator", concurrency=concurrency
        )
        wall = time.perf_counter() - start
    with FakeUpstream(_script) as fake:
        floor = asyncio.run(_backend_only(fake.base_url, CONVERSATIONS * CALLS_PER_CONVERSATION, concurrency))
    ideal = CONVERSATIONS * CALLS_PER_CONVERSATION * LATENCY / concurrency
    return {"concurrency": concurrency, "ok": stats.ok, "wall": wall, "ideal": ideal, "floor": floor,
            "model_calls": stats.model_calls}


def run() -> list[dict[str, Any]]:
    """One table: wall time vs the ideal and vs the backend alone."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for concurrency in CONCURRENCY:
            m = _measure(concurrency, Path(tmp))
            rows.append([
                m["concurrency"],
                f"{m['ok']}/{CONVERSATIONS}",
                f"{m['ideal']:.2f}",
                f"{m['floor']:.2f}",
                f"{m['wall']:.2f}",
                f"{m['wall'] / m['ideal']:.2f}x",
                f"{m['wall'] / m['floor']:.2f}x",
                f"{m['model_calls'] / m['wall']:.0f}",
            ])
    return [{
        "title": f"Batch: {CONVERSATIONS} conversations, fake upstream with {int(LATENCY * 1000)} ms latency",
        "columns": ["concurrency", "ok", "ideal (s)", "backend only (s)", "batch wall (s)", "wall / ideal",
                    "wall / backend only", "model calls/s"],
        "rows": rows,
        "notes": (
            f"Each conversation: {CALLS_PER_CONVERSATION} model calls over HTTP on 127.0.0.1 (OpenAI-compatible "
            "backend) and one tool call; results appended exactly once. Ideal = conversations x calls x "
            "latency / concurrency (zero overhead anywhere). Backend only = the same number of chat calls "
            "through the same backend and fake upstream at the same concurrency, without agent or controller. "
            "The fake upstream runs in the same process, so client and server share the CPU."
        ),
    }]


if __name__ == "__main__":
    for table in run():
        print(table["title"])
        for row in table["rows"]:
            print(row)
