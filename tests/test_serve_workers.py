"""``agentfsm serve --models FILE --workers 2``: two processes on one port, driven concurrently.

The proxy keeps no state between requests, so either worker answers any of them. Two
scripted upstreams, each following one dialect; the clients are the official SDKs
(async), whole and streamed, eight requests at a time. Debug logging is on: the
upstream key appears in no log line and no transcript.
"""

from __future__ import annotations

import asyncio
import json
import os
import select
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anthropic
import openai
from anthropic.types import Message, MessageParam
from openai.types.chat import ChatCompletionMessageFunctionToolCall, ChatCompletionMessageParam

from agentfsm.testing import FakeUpstream
from tests._followers import MARKERS, Answer, follower
from tests._proxy import TOOLS_ANTHROPIC, TOOLS_OPENAI, free_port, wait_until_serving

QUESTION = "What is the weather in Paris?"
USER: list[ChatCompletionMessageParam] = [{"role": "user", "content": QUESTION}]
USER_ANTHROPIC: list[MessageParam] = [{"role": "user", "content": QUESTION}]
ANSWERS = {QUESTION: Answer(((("get_weather", {"city": "Paris"}),),), "It is 18 C in Paris.")}
KEY = "sk-worker-upstream-secret-77"
DIALECTS = {"cmd": "command", "jp": "json-protocol"}


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def _workers(pid: int) -> list[int]:
    """The worker processes uvicorn spawned (not multiprocessing's resource tracker)."""
    children = [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    return [c for c in children if b"spawn_main" in Path(f"/proc/{c}/cmdline").read_bytes()]


async def _one(url: str, name: str, sdk: str, stream: bool) -> tuple[str, dict[str, Any], str]:
    """One request; the call the client received and the entry the proxy named."""
    if sdk == "openai":
        async with openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=60) as client:
            chat = client.chat.completions.with_raw_response
            if stream:
                streamed = await chat.create(model=name, messages=USER, tools=TOOLS_OPENAI, stream=True)
                deltas = [tc async for c in streamed.parse() if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
                functions = [d.function for d in deltas if d.function is not None]
                tool, arguments = functions[0].name, "".join(f.arguments or "" for f in functions)
                entry = streamed.headers["x-agentfsm-model"]
            else:
                whole = await chat.create(model=name, messages=USER, tools=TOOLS_OPENAI)
                (tool_call,) = whole.parse().choices[0].message.tool_calls or []
                assert isinstance(tool_call, ChatCompletionMessageFunctionToolCall)
                tool, arguments = tool_call.function.name, tool_call.function.arguments
                entry = whole.headers["x-agentfsm-model"]
            assert tool is not None
            return tool, json.loads(arguments), entry
    async with anthropic.AsyncAnthropic(base_url=url, api_key="unused", max_retries=0, timeout=60) as claude:
        message: Message
        if stream:
            async with claude.messages.stream(
                model=name, max_tokens=256, messages=USER_ANTHROPIC, tools=TOOLS_ANTHROPIC
            ) as s:
                message = await s.get_final_message()
                entry = s.response.headers["x-agentfsm-model"]
        else:
            answer = await claude.messages.with_raw_response.create(
                model=name, max_tokens=256, messages=USER_ANTHROPIC, tools=TOOLS_ANTHROPIC
            )
            message, entry = await answer.parse(), answer.headers["x-agentfsm-model"]
        (use,) = [b for b in message.content if b.type == "tool_use"]
        return use.name, dict(use.input), entry


async def _drive(url: str, count: int, concurrency: int) -> list[tuple[str, tuple[str, dict[str, Any], str]]]:
    limit = asyncio.Semaphore(concurrency)
    plan = [(name, sdk, stream) for name in DIALECTS for sdk in ("openai", "anthropic") for stream in (False, True)]

    async def run(i: int) -> tuple[str, tuple[str, dict[str, Any], str]]:
        name, sdk, stream = plan[i % len(plan)]
        async with limit:
            return name, await _one(url, name, sdk, stream)

    return await asyncio.gather(*(run(i) for i in range(count)))


def test_two_workers_answer_concurrent_requests_for_every_model(tmp_path: Path) -> None:
    with FakeUpstream(follower("command", ANSWERS)) as a, FakeUpstream(follower("json-protocol", ANSWERS)) as b:
        upstreams = {"cmd": a, "jp": b}
        models = tmp_path / "models.toml"
        models.write_text(f"""
[models.cmd]
base_url = "{a.base_url}"
json_schema_mode = "off"
dialect = "command"

[models.jp]
base_url = "{b.base_url}"
api_key_env = "TEST_WORKER_KEY"
json_schema_mode = "off"
dialect = "json-protocol"
""")
        port = free_port()
        env = {**os.environ, "TEST_WORKER_KEY": KEY, "AGENTFSM_LOG_LEVEL": "DEBUG"}
        process = subprocess.Popen(
            [sys.executable, "-m", "agentfsm", "serve", "--port", str(port), "--models", str(models),
             "--workers", "2", "--transcripts", str(tmp_path / "transcripts")],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            wait_until_serving(url, process, timeout=120)
            workers = _workers(process.pid)
            assert len(workers) == 2
            before = {w: _cpu_ticks(w) for w in workers}
            results = asyncio.run(_drive(url, count=64, concurrency=8))
            spent = {w: _cpu_ticks(w) - before[w] for w in workers}
        finally:
            process.terminate()
            _, stderr = process.communicate(timeout=60)
    for name, (tool, arguments, entry) in results:
        assert (tool, arguments, entry) == ("get_weather", {"city": "Paris"}, name)
    assert all(ticks > 0 for ticks in spent.values()), spent  # both processes answered requests
    for name, upstream in upstreams.items():
        systems = {str(r.messages[0]["content"]) for r in upstream.chat_requests}
        assert systems and all(MARKERS[DIALECTS[name]] in s for s in systems)
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in upstreams["jp"].chat_requests)
    transcripts = list((tmp_path / "transcripts").glob("*.jsonl"))
    assert len(transcripts) == 64 and not any(KEY in p.read_text() for p in transcripts)
    logs = stderr.decode(errors="replace")
    assert "DEBUG" in logs and KEY not in logs


def test_each_worker_keeps_the_header_deadline_and_the_connection_limit(tmp_path: Path) -> None:
    """--workers runs serve's guarded HTTP protocol in every worker, as one process does."""
    with FakeUpstream(follower("command", ANSWERS)) as upstream:
        port = free_port()
        process = subprocess.Popen(
            [sys.executable, "-m", "agentfsm", "serve", "--port", str(port), "--backend", "openai",
             "--base-url", upstream.base_url, "--workers", "2", "--header-timeout", "2", "--max-connections", "16"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            wait_until_serving(url, process, timeout=120)
            with socket.create_connection(("127.0.0.1", port), timeout=30) as slow:
                slow.sendall(b"GET /health HTTP/1.1\r\n")  # the headers never end
                answer = slow.recv(1024)
            assert answer.startswith(b"HTTP/1.1 408 "), answer
            held = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(40)]
            # 40 open on two workers of 16 each: at least 8 are answered 503 and closed, the
            # others get a 408 once their deadline passes (2 s: a connection accepted after a
            # held one's deadline, by a worker the load slowed, would take its freed place)
            try:
                answers: dict[socket.socket, bytes] = {}
                deadline = time.monotonic() + 60
                while len(answers) < len(held) and time.monotonic() < deadline:
                    ready, _, _ = select.select([c for c in held if c not in answers], [], [], 1.0)
                    answers.update((c, c.recv(1024)) for c in ready)
                assert sum(a.startswith(b"HTTP/1.1 503 ") for a in answers.values()) >= 40 - 2 * 16
            finally:
                for conn in held:
                    conn.close()
        finally:
            process.terminate()
            process.wait(timeout=60)
