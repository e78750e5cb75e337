"""``agentfsm run``, ``chat`` and ``tools`` used as a demanding user would, with real parts: the
CLI as a subprocess, a scripted upstream on 127.0.0.1, real signals, real files."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentfsm.backends.openai_compat import OpenAICompatBackend
from agentfsm.replays.compare import replay
from agentfsm.report.build import page_data
from agentfsm.report.inputs import gather
from agentfsm.runtime.agent import Agent
from agentfsm.runtime.transcript import read_transcript
from agentfsm.testing import FakeUpstream
from agentfsm.testing.example_tools import CALCULATOR
from agentfsm.testing.fake_script import latency
from tests._fake import wait_for_requests
from tests._proxy import TOOLS_OPENAI, proxy, upstream_backend

ACTION = '```json action\n{"tool": "calculate", "args": {"expression": "6*7"}}\n```'
UPSTREAM = ("--backend", "openai", "--enforcement", "prompt")


def _types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def _terminal_sigint() -> None:
    """Ctrl-C as a terminal delivers it, whatever this test runner inherited (a job started
    in the background by a non-interactive shell ignores SIGINT, and so would the CLI)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _agentfsm(*args: str, **kwargs: Any) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "agentfsm", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=_terminal_sigint, **kwargs)


# -- a cancelled run ends its transcript ---------------------------------------------------


def test_a_cancelled_agent_run_ends_its_transcript_as_cancelled(tmp_path: Path) -> None:
    transcript = tmp_path / "t.jsonl"

    async def cancel_mid_call(fake: FakeUpstream) -> None:
        backend = OpenAICompatBackend(fake.base_url, model="m")
        agent = Agent(backend, CALCULATOR, transcript=transcript, enforcement="prompt")
        task = asyncio.create_task(agent.arun("What is 6*7?"))
        while len(fake.chat_requests) < 2:  # the second model call, after a tool ran
            await asyncio.sleep(0.05)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        else:
            raise AssertionError("the cancelled run finished")
        finally:
            await backend.aclose()

    with FakeUpstream([ACTION, latency(30, "42.")]) as fake:
        asyncio.run(cancel_mid_call(fake))
    events = read_transcript(transcript)
    assert _types(events)[-3:] == ["transition", "model_request", "run_end"]
    assert "error" not in _types(events)  # a cancellation is not an error of the run
    assert events[-1]["status"] == "cancelled" and events[-1]["steps"] == 2

    # replay reads it as cut off where it was cancelled: compared as far as it goes
    report = replay(transcript)
    assert report.identical and report.compared > 0
    assert any("cancelled" in note for note in report.notes)
    # and the report shows a run that did not complete, because it was cancelled
    data, _svg, stats = page_data(gather([transcript]))
    (run,) = data["runs"]
    assert (run["outcome"], run["reason"]) == ("incomplete", "cancelled") and stats.failed == 0


# Ctrl-C and SIGTERM during `agentfsm run` (plain and --json): tests/test_sigterm.py


def test_ctrl_c_in_chat_cancels_the_turn_and_keeps_the_conversation(tmp_path: Path) -> None:
    transcript = tmp_path / "chat.jsonl"
    with FakeUpstream(["first answer", latency(30, "never seen"), "third answer"]) as fake:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agentfsm", "chat", *UPSTREAM, "--base-url", fake.base_url,
             "--transcript", str(transcript)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            preexec_fn=_terminal_sigint,
        )
        assert proc.stdin is not None
        proc.stdin.write("hello\n")
        proc.stdin.flush()
        wait_for_requests(fake, 1)
        proc.stdin.write("second\n")
        proc.stdin.flush()
        wait_for_requests(fake, 2)
        proc.send_signal(signal.SIGINT)
        time.sleep(0.5)
        out, err = proc.communicate("third\n\n", timeout=60)
        third = fake.chat_requests[2].messages
    assert proc.returncode == 0, err
    assert "interrupted" in out and "third answer" in out and "2 assistant message(s)" in out
    # the third turn carries the first turn, not the cancelled one
    assert [m["content"] for m in third if m["role"] != "system"] == ["hello", "first answer", "third"]
    ends = [e["status"] for e in read_transcript(transcript) if e["type"] == "run_end"]
    assert ends == ["final", "cancelled", "final"]
    assert replay(transcript).identical


def test_run_without_transcript_still_cancels_cleanly() -> None:
    """No transcript, no hook: nothing recorded, and the cancellation still propagates."""

    async def go(fake: FakeUpstream) -> None:
        backend = OpenAICompatBackend(fake.base_url, model="m")
        try:
            task = asyncio.create_task(Agent(backend, enforcement="prompt").arun("hi"))
            while not fake.chat_requests:
                await asyncio.sleep(0.05)
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                return
            raise AssertionError("the cancelled run finished")
        finally:
            await backend.aclose()

    with FakeUpstream([latency(30, "x")]) as fake:
        asyncio.run(go(fake))


# -- what the CLI prints is what was said ----------------------------------------------------

BRACKETS = '''
def lookup(key: str) -> str:
    """Look KEY up in [/etc/hosts] (a [bold] word is no style)."""
    return "see [/etc/hosts] and [bold]x[/bold]"


def boom(key: str) -> str:
    """Fail."""
    raise RuntimeError("no entry [/" + key + "]")


TOOLS = [lookup, boom]
'''


def _with_module(tmp_path: Path, source: str) -> dict[str, str]:
    (tmp_path / "audit_tools.py").write_text(source)
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}


def test_brackets_in_results_and_answers_are_printed_as_written(tmp_path: Path) -> None:
    """Rich markup read tool results and answers as styles: ``[/etc/hosts]`` crashed the run
    with a MarkupError traceback, and a result's ``[ok]`` status vanished."""
    answer = "Hosts live in [/etc/hosts]; " + " ".join(f"word{i}" for i in range(40))
    calls = [f'```json action\n{{"tool": "{name}", "args": {{"key": "k"}}}}\n```' for name in ("lookup", "boom")]
    with FakeUpstream([*calls, answer]) as fake:
        proc = subprocess.run(
            [sys.executable, "-m", "agentfsm", "run", "look k up", "--tools", "audit_tools:TOOLS", "--no-parallel",
             *UPSTREAM, "--base-url", fake.base_url],
            capture_output=True, text=True, timeout=120, env=_with_module(tmp_path, BRACKETS),
        )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "result [ok] see [/etc/hosts] and [bold]x[/bold]" in lines
    assert "result [error] RuntimeError: no entry [/k]" in lines
    # piped, the answer is one line, whole: not cut into 80-column lines
    assert f"answer: {answer}" in lines


def test_tools_prints_the_contract_verbatim_when_piped(tmp_path: Path) -> None:
    from agentfsm.core.config import DEFAULTS
    from agentfsm.prompt.contract import render_contract
    from agentfsm.runtime.tools import ToolRegistry, load_tools

    env = _with_module(tmp_path, BRACKETS)
    proc = subprocess.run([sys.executable, "-m", "agentfsm", "tools", "audit_tools:TOOLS"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "lookup: Look KEY up in [/etc/hosts] (a [bold] word is no style)." in proc.stdout.splitlines()
    specs = ToolRegistry(load_tools("agentfsm.testing.example_tools:TOOLS")).specs
    contract = render_contract(specs, dialect=DEFAULTS.dialect, tool_choice=DEFAULTS.tool_choice)
    assert max(len(line) for line in contract.splitlines()) > 80  # the case that was cut
    proc = subprocess.run([sys.executable, "-m", "agentfsm", "tools", "agentfsm.testing.example_tools:TOOLS"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert contract in proc.stdout


SLEEPY = '''
import time


def nap(seconds: float) -> str:
    """Sleep SECONDS seconds."""
    time.sleep(seconds)
    return "rested"


TOOLS = [nap]
'''


def test_ctrl_c_during_a_sync_tool_ends_the_program_now(tmp_path: Path) -> None:
    """A sync tool ran in the loop's executor, which asyncio.run and the interpreter wait
    for: Ctrl-C (twice, even) returned only when the tool did."""
    transcript = tmp_path / "t.jsonl"
    call = '```json action\n{"tool": "nap", "args": {"seconds": 60}}\n```'
    with FakeUpstream([call, "rested."]) as fake:
        proc = _agentfsm("run", "nap", "--tools", "audit_tools:TOOLS", *UPSTREAM, "--base-url", fake.base_url,
                         "--transcript", str(transcript), env=_with_module(tmp_path, SLEEPY))
        wait_for_requests(fake, 1)
        deadline = time.monotonic() + 30
        while "tool_call" not in transcript.read_text():  # the tool is running
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(0.3)
        began = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
    assert time.monotonic() - began < 10, "Ctrl-C waited for the tool"
    assert proc.returncode == 130 and "agentfsm: interrupted" in err
    events = read_transcript(transcript)
    assert _types(events)[-2:] == ["transition", "run_end"] and events[-1]["status"] == "cancelled"


def test_a_tools_file_path_gets_the_module_to_name(tmp_path: Path) -> None:
    """A file path was read as a module name: './x.py:TOOLS' failed with importlib's
    "the 'package' argument is required to perform a relative import"."""
    env = _with_module(tmp_path, SLEEPY)
    for ref in ("./audit_tools.py:TOOLS", "audit_tools.py:TOOLS", f"{tmp_path}/audit_tools.py:TOOLS"):
        proc = subprocess.run([sys.executable, "-m", "agentfsm", "tools", ref], capture_output=True, text=True,
                              timeout=120, cwd=tmp_path, env=env)
        assert proc.returncode == 2, proc.stdout
        (line,) = proc.stderr.strip().splitlines()
        assert "names a file" in line and "'audit_tools:TOOLS'" in line


def test_chat_refuses_a_transcript_it_cannot_write_before_the_first_turn(tmp_path: Path) -> None:
    """chat went on with every turn failing 'cannot write transcript ...', and exited 0."""
    with FakeUpstream(["never asked"]) as fake:
        proc = subprocess.run(
            [sys.executable, "-m", "agentfsm", "chat", *UPSTREAM, "--base-url", fake.base_url,
             "--transcript", str(tmp_path)],
            input="hello\n", capture_output=True, text=True, timeout=120,
        )
        asked = len(fake.chat_requests)
    assert proc.returncode == 2, proc.stdout
    assert proc.stderr.strip() == f"agentfsm: error: cannot write transcript {tmp_path}: is a directory"
    assert asked == 0 and "assistant" not in proc.stdout


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_proxied_request_whose_client_left_replays_as_cut_off(tmp_path: Path, stream: bool) -> None:
    """The proxy recorded a client that disconnected as an error (ConnectionAbortedError),
    so 'agentfsm replay' of that transcript reported a divergence (exit 1) where nothing
    was decided: today's run, out of recorded output, stopped with ScriptExhausted."""
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": TOOLS_OPENAI, "stream": stream}
    with FakeUpstream([latency(30, "x")]) as fake:
        with proxy(upstream_backend(fake, total=60), transcripts_dir=tmp_path) as url:
            with pytest.raises(httpx.TimeoutException):
                with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=1.0) as response:
                    response.read()
            deadline = time.monotonic() + 15
            while not any('"run_end"' in p.read_text() for p in tmp_path.glob("*.jsonl")):
                assert time.monotonic() < deadline, "the proxy never ended the request's transcript"
                time.sleep(0.05)
    (transcript,) = tmp_path.glob("*.jsonl")
    events = read_transcript(transcript)
    assert events[-1]["type"] == "run_end" and events[-1]["status"] == "cancelled"
    assert "error" not in _types(events)
    done = subprocess.run([sys.executable, "-m", "agentfsm", "replay", str(transcript)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
