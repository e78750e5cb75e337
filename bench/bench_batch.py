"""Benchmark: a batch of 1,000 tool-using conversations against a fake upstream with 50 ms latency.

Each conversation takes two model calls (a tool call, then the answer) through the
OpenAI-compatible backend over real HTTP on 127.0.0.1, plus one tool execution and
the exactly-once results log. Two references, measured in the same run:

- the ideal wall time, ``conversations x calls x latency / concurrency``: what a
  controller and an HTTP stack with no cost at all would take;
- the backend alone: the same number of chat calls through the same backend, fake
  upstream and concurrency, with no agent and no controller (the HTTP stack's floor).

wall / ideal is the whole cost; wall / backend-only is what the agent loop, guards,
tools and results log add on top of the HTTP calls. The fake upstream runs in its own
process (sharing the client's event loop, it measured itself, not the controller).
Points: 1,000 conversations and 10,000 (cost per conversation compared), locally
(asyncio) and on a local Ray cluster. ``AGENTFSM_BENCH_BATCH_SCALE`` scales the counts;
``AGENTFSM_BENCH_BATCH_RAY=0`` leaves Ray out.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agentfsm.core.backend import GenerationOptions
from agentfsm.backends.openai_compat import OpenAICompatBackend
from agentfsm.batch.controller import run_batch_sync
from agentfsm.dialects import get_dialect
from agentfsm.core.messages import PromptMessage, ToolCall
from agentfsm.testing import FakeReply, FakeUpstream, ReceivedRequest

#: the tools the scripted model calls (``calculate``)
TOOLS_MODULE = "agentfsm.testing.example_tools:CALCULATOR"

__all__ = ["run"]

_SCALE = float(os.environ.get("AGENTFSM_BENCH_BATCH_SCALE", "1.0"))
#: (path, conversations) points, all at CONCURRENCY
POINTS = [("asyncio", max(64, int(1000 * _SCALE))), ("asyncio", max(64, int(10000 * _SCALE)))]
if os.environ.get("AGENTFSM_BENCH_BATCH_RAY", "1") != "0":
    POINTS.append(("ray", max(64, int(1000 * _SCALE))))
#: conversations run before the points, not timed (first-use imports and caches)
WARM_UP = 64
#: runs of each point of up to 2,000 asyncio conversations (the median is reported)
REPEATS = 5
LATENCY = 0.05
CALLS_PER_CONVERSATION = 2
CONCURRENCY = 64
_TASK = re.compile(r"task (\d+):")


def _script(request: ReceivedRequest) -> FakeReply:
    messages = request.messages
    number = next(
        (m.group(1) for msg in messages if msg.get("role") == "user"
         and (m := _TASK.search(str(msg.get("content", ""))))),
        "0",
    )
    if len(messages) <= 2:
        return FakeReply(text=_call_text(number), latency=LATENCY)
    return FakeReply(text=f"{number} + 1 = {int(number) + 1}", latency=LATENCY)


@functools.lru_cache(maxsize=None)
def _call_text(number: str) -> str:
    """The scripted tool call for task ``number`` (rendered once: the fake is to cost little)."""
    call = ToolCall(id="call_0", name="calculate", arguments={"expression": f"{number} + 1"})
    return get_dialect("json-action").render_call(call)


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


def _upstream() -> tuple[subprocess.Popen[bytes], str]:
    """The fake upstream in its own process (this module with ``--upstream PORT``)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    proc = subprocess.Popen([sys.executable, __file__, "--upstream", str(port)])
    base = f"http://127.0.0.1:{port}/v1"
    import httpx

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/models", timeout=2).status_code == 200:
                return proc, base
        except httpx.TransportError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("the fake upstream did not start")


def _measure(path: str, conversations: int, workdir: Path, base: str) -> dict[str, Any]:
    tasks = workdir / f"tasks-{conversations}.jsonl"
    tasks.write_text(
        "".join(json.dumps({"id": f"t{i}", "prompt": f"task {i}: what is {i} + 1?"}) + "\n" for i in range(conversations)),
        encoding="utf-8",
    )
    out = workdir / f"out-{path}-{conversations}-{len(os.listdir(workdir))}.jsonl"  # a new log each time
    tools = TOOLS_MODULE
    if path == "ray":
        import ray

        from agentfsm.batch.on_ray import run_batch_ray

        if not ray.is_initialized():  # the cluster exists before a batch runs on it (not timed)
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        factory = functools.partial(OpenAICompatBackend, base, model="fake", api_key="sk-bench")
        start = time.perf_counter()
        ok = sum(r.ok for r in run_batch_ray(tasks, output=out, backend_factory=factory, tools_module=tools,
                                                concurrency=CONCURRENCY))
        calls = ok * CALLS_PER_CONVERSATION
    else:
        start = time.perf_counter()
        backend = OpenAICompatBackend(base, model="fake", api_key="sk-bench")
        stats = run_batch_sync(tasks, output=out, backend=backend, tools_module=tools, concurrency=CONCURRENCY)
        ok, calls = stats.ok, stats.model_calls
    wall = time.perf_counter() - start
    return {"ok": ok, "wall": wall, "model_calls": calls}


def run() -> list[dict[str, Any]]:
    """One table: wall time vs the ideal and vs the backend alone, per point."""
    rows = []
    per_conversation: dict[str, float] = {}
    proc, base = _upstream()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            _measure("asyncio", WARM_UP, Path(tmp), base)
            for path, conversations in POINTS:
                calls = conversations * CALLS_PER_CONVERSATION
                runs = REPEATS if path == "asyncio" and conversations <= 2000 else 1
                floors, measured = [], []
                for _ in range(runs):  # alternated, so that a slow spell of the machine hits both
                    floors.append(asyncio.run(_backend_only(base, calls, CONCURRENCY)))
                    measured.append(_measure(path, conversations, Path(tmp), base))
                floor = statistics.median(floors)
                m = sorted(measured, key=lambda r: r["wall"])[runs // 2]
                spread = "one run" if runs == 1 else "{:.2f}-{:.2f} ({} runs)".format(
                    min(r["wall"] for r in measured), max(r["wall"] for r in measured), runs)
                ideal = calls * LATENCY / CONCURRENCY
                cost = m["wall"] / conversations * 1000
                first = per_conversation.setdefault(path, cost)
                rows.append([
                    path, conversations, f"{m['ok']}/{conversations}", f"{ideal:.2f}", f"{floor:.2f}",
                    f"{m['wall']:.2f}", f"{m['wall'] / ideal:.2f}x", f"{m['wall'] / floor:.2f}x",
                    f"{cost:.2f} ({cost / first:.2f}x)", f"{m['model_calls'] / m['wall']:.0f}", spread,
                ])
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    return [{
        "title": f"Batch: conversations against a fake upstream with {int(LATENCY * 1000)} ms latency, "
                 f"concurrency {CONCURRENCY}",
        "columns": ["path", "conversations", "ok", "ideal (s)", "backend only (s)", "batch wall (s)",
                    "wall / ideal", "wall / backend only", "ms per conversation (vs first point)",
                    "model calls/s", "batch wall range (s)"],
        "rows": rows,
        "notes": (
            f"Each conversation: {CALLS_PER_CONVERSATION} model calls over HTTP on 127.0.0.1 (OpenAI-compatible "
            "backend) and one tool call; results appended exactly once. Ideal = conversations x calls x "
            "latency / concurrency (zero overhead anywhere). Backend only = the same number of chat calls "
            "through the same backend and fake upstream at the same concurrency, without agent or controller. "
            f"Points of up to 2,000 asyncio conversations run {REPEATS} times, each after its own backend-only "
            "run; the table shows the median run (and the median backend-only time), the last column the "
            "range. "
            f"The fake upstream runs in its own process, and answers from memory it does not grow. {WARM_UP} "
            "conversations run first, not timed (first-use imports and caches). asyncio: the local controller "
            "(run_batch_sync with its defaults: workers started over a 0.1 s ramp, counted in the wall time); "
            "ray: run_batch_ray on a local Ray cluster (num_cpus=2) started before the timing; the batch's actors "
            "(one per CPU, each running its share of the conversations on its own event loop) start inside it."
        ),
    }]


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--upstream":
        import uvloop

        # the fake is to cost nothing: on the C event loop it leaves the client more of 2 cores
        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
        with FakeUpstream(_script, port=int(sys.argv[2]), keep_requests=False):
            time.sleep(3600)
    else:
        from run import print_tables  # bench/run.py

        print_tables(run(), __file__)
