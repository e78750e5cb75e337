"""Benchmark: a batch of 1,000 tool-using conversations against a fake upstream with 50 ms latency.

Each conversation takes two model calls (a tool call, then the answer) through the
OpenAI-compatible backend over real HTTP on 127.0.0.1, plus one tool execution and
the exactly-once results log. The reference is the ideal wall time in the same run:
``conversations x calls x latency / concurrency``, what a controller with no overhead
at all would take. The ratio wall / ideal is the controller's cost.
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from agentfsm.backends.openai_compat import OpenAICompatBackend
from agentfsm.batch import run_batch_sync
from agentfsm.dialects import get_dialect
from agentfsm.messages import ToolCall
from agentfsm.testing import FakeReply, FakeUpstream, ReceivedRequest

__all__ = ["run"]

CONVERSATIONS = 1000
LATENCY = 0.05
CALLS_PER_CONVERSATION = 2
CONCURRENCY = (64, 16)
_TASK = re.compile(r"task (\d+):")


def _script(request: ReceivedRequest) -> FakeReply:
    texts = [str(m.get("content", "")) for m in request.messages]
    found = [m.group(1) for m in map(_TASK.search, texts) if m]
    number = found[0] if found else "0"
    if len(request.messages) <= 2:
        call = ToolCall(id="call_0", name="calculate", arguments={"expression": f"{number} + 1"})
        return FakeReply(text=get_dialect("json-action").render_call(call), latency=LATENCY)
    return FakeReply(text=f"{number} + 1 = {int(number) + 1}", latency=LATENCY)


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
    ideal = CONVERSATIONS * CALLS_PER_CONVERSATION * LATENCY / concurrency
    return {"concurrency": concurrency, "ok": stats.ok, "wall": wall, "ideal": ideal, "model_calls": stats.model_calls}


def run() -> list[dict[str, Any]]:
    """One table: wall time vs the ideal, per concurrency."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for concurrency in CONCURRENCY:
            m = _measure(concurrency, Path(tmp))
            rows.append([
                m["concurrency"],
                f"{m['ok']}/{CONVERSATIONS}",
                f"{m['ideal']:.2f}",
                f"{m['wall']:.2f}",
                f"{m['wall'] / m['ideal']:.2f}x",
                f"{m['model_calls'] / m['wall']:.0f}",
            ])
    return [{
        "title": f"Batch: {CONVERSATIONS} conversations, fake upstream with {int(LATENCY * 1000)} ms latency",
        "columns": ["concurrency", "ok", "ideal wall (s)", "wall (s)", "wall / ideal", "model calls/s"],
        "rows": rows,
        "notes": (
            f"Each conversation: {CALLS_PER_CONVERSATION} model calls over HTTP on 127.0.0.1 (OpenAI-compatible "
            "backend) and one tool call; results appended exactly once. Ideal = conversations x calls x "
            "latency / concurrency (zero controller overhead), measured in the same run; 2 CPU cores."
        ),
    }]


if __name__ == "__main__":
    for table in run():
        print(table["title"])
        for row in table["rows"]:
            print(row)
