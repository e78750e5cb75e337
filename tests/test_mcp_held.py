"""MCP servers held open across runs: ``async with agent:`` starts them once for every
run of the block, and ``agentfsm chat`` keeps them from turn to turn.

Defect (found by the CLI audit): chat started every ``--mcp`` server again for each turn
(a new process each time, its state gone: a counter read 1 on every turn), since each
turn was a run of its own that started and stopped the servers.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentfsm.core.errors import UsageError
from agentfsm.runtime.agent import Agent, RunResult
from agentfsm.runtime.transcript import read_transcript
from agentfsm.testing import FakeReply, FakeUpstream, ScriptedBackend
from agentfsm.testing.fake_script import latency
from tests.test_mcp_startup import _running

#: a stateful server: each call of ``count`` answers the process id and a running count
COUNTER = '''
import os, sys
from mcp.server.fastmcp import FastMCP

if sys.argv[1:]:  # a file to write the process id to
    with open(sys.argv[1], "w") as f:
        f.write(str(os.getpid()))
server = FastMCP("counter")
calls = 0


@server.tool()
def count() -> str:
    """Count one more call of this tool."""
    global calls
    calls += 1
    return f"{os.getpid()}:{calls}"


server.run()
'''

CALL = '{"action": {"tool": "count", "args": {}}}'


def _counter(tmp_path: Path) -> str:
    script = tmp_path / "counter.py"
    script.write_text(COUNTER)
    return f"{sys.executable} {script}"


def _counts(result_texts: list[str]) -> list[tuple[int, int]]:
    return [(int(pid), int(n)) for pid, n in (text.split(":") for text in result_texts)]


def _results(runs: list[RunResult]) -> list[str]:
    return [entry["result"]["content"] for run in runs for entry in run.tool_calls]


def test_runs_inside_async_with_share_the_servers_started_once(tmp_path: Path) -> None:
    async def go() -> tuple[list[str], list[str]]:
        script = [CALL, "first", CALL, "second", CALL, "third", CALL, "fourth"]
        agent = Agent(ScriptedBackend(script), mcp=[_counter(tmp_path)], enforcement="prompt")
        async with agent:
            held = [await agent.arun("count"), await agent.arun("count again")]
        # outside the block, each run starts its own server, as before
        apart = [await agent.arun("count"), await agent.arun("count again")]
        return _results(held), _results(apart)

    held, apart = asyncio.run(go())
    (pid, first), (same, second) = _counts(held)
    assert (same, first, second) == (pid, 1, 2)  # one process, its state kept
    assert not _running(pid)  # stopped when the block was left
    (one, n1), (other, n2) = _counts(apart)
    assert (n1, n2) == (1, 1) and one != other != pid


def test_an_open_agent_is_refused_a_second_open_and_a_blocking_run(tmp_path: Path) -> None:
    async def go() -> None:
        agent = Agent(ScriptedBackend(["hi"]), mcp=[_counter(tmp_path)])
        async with agent:
            with pytest.raises(UsageError, match="already open"):
                await agent.__aenter__()
            with pytest.raises(UsageError, match="await agent.arun"):
                await asyncio.to_thread(agent.run, "hi")  # from a thread: no running loop there

    asyncio.run(go())


def test_a_server_that_cannot_start_fails_the_block_and_leaves_none_running(tmp_path: Path) -> None:
    async def go() -> None:
        pidfile = tmp_path / "counter.pid"
        agent = Agent(ScriptedBackend(["hi"]), mcp=[f"{_counter(tmp_path)} {pidfile}", "no-such-command-xyz"])
        with pytest.raises(UsageError, match="did not start: command not found"):
            async with agent:
                raise AssertionError("the block ran without its servers")
        assert not _running(int(pidfile.read_text()))  # the one that had started is stopped
        with pytest.raises(UsageError, match="did not start"):  # not "already open": nothing was left half open
            async with agent:
                pass

    asyncio.run(go())


def test_chat_keeps_its_mcp_servers_across_turns_and_a_cancelled_turn(tmp_path: Path) -> None:
    transcript = tmp_path / "chat.jsonl"
    script: list[FakeReply | str] = [CALL, "counted once", CALL, latency(30, "never seen"), CALL, "counted thrice"]
    with FakeUpstream(script) as fake:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agentfsm", "chat", "--backend", "openai", "--enforcement", "prompt",
             "--base-url", fake.base_url, "--model", "m", "--mcp", _counter(tmp_path),
             "--transcript", str(transcript)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # Ctrl-C as a terminal sends it
        )
        assert proc.stdin is not None
        proc.stdin.write("count\nand again\n")
        proc.stdin.flush()
        deadline = time.monotonic() + 60
        while len(fake.chat_requests) < 4:  # the second turn's answer is in its latency
            assert time.monotonic() < deadline, "the chat never reached its second turn's answer"
            time.sleep(0.05)
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)  # cancels that turn only
        time.sleep(0.5)
        out, err = proc.communicate("once more\n\n", timeout=60)
    assert proc.returncode == 0, err
    assert "interrupted" in out and "counted thrice" in out
    events = read_transcript(transcript)
    results = [e["result"]["content"] for e in events if e["type"] == "tool_result"]
    counts = _counts(results)
    assert [n for _, n in counts] == [1, 2, 3], results  # one server, its count kept
    assert len({pid for pid, _ in counts}) == 1
    assert not _running(counts[0][0])  # stopped when the chat ended
    assert [e["status"] for e in events if e["type"] == "run_end"] == ["final", "cancelled", "final"]
