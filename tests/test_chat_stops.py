"""``agentfsm chat`` under Ctrl-C and SIGTERM, where a turn's cancellation takes a while and
where a step line is being written. Real parts: the CLI as a subprocess, a FakeUpstream on
127.0.0.1, tools from a module on disk, real signals.

Defects (found by the CLI audit): a second Ctrl-C while the first one's cancellation of a
turn was still under way (a tool tidying up) only cancelled again, so the chat went on
waiting for the tool, whatever the user pressed; and a signal that landed while a step line
was written to a pipe lost the rest of that line (CPython wrote part of a large write and
dropped the rest), the next line glued to its stump. Answers were already written with the
signals held (:meth:`agentfsm.cli._signals.ChatStops.held`); step lines now are too.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agentfsm.replays.compare import replay
from agentfsm.runtime.transcript import read_transcript
from agentfsm.testing import FakeUpstream
from tests._procs import reaped

REPO = Path(__file__).resolve().parent.parent
UPSTREAM = ("--backend", "openai", "--enforcement", "prompt")

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

#: a tool that, cancelled, tidies up for ten minutes and takes no further cancellation; it
#: says where it is in the file that ``MARK`` names
TIDY = '''
import asyncio, os, pathlib


async def hold(seconds: float) -> str:
    """Hold SECONDS seconds; cancelled, tidy up for ten minutes."""
    mark = pathlib.Path(os.environ["MARK"])
    mark.write_text("holding")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        mark.write_text("tidying")
        loop = asyncio.get_running_loop()
        end = loop.time() + 600
        while loop.time() < end:
            try:
                await asyncio.sleep(end - loop.time())
            except asyncio.CancelledError:
                mark.write_text("cancelled again")
        raise
    return "held"


def echo(text: str) -> str:
    """Take TEXT."""
    return "taken"


TOOLS = [hold, echo]
'''


def _chat(tmp_path: Path, fake: FakeUpstream, *more: str) -> subprocess.Popen[bytes]:
    """``agentfsm chat`` with the tools above, its SIGINT as a terminal leaves it."""
    (tmp_path / "chat_tools.py").write_text(TIDY)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)]), "MARK": str(tmp_path / "mark")}
    return subprocess.Popen(
        [sys.executable, "-m", "agentfsm", "chat", *UPSTREAM, "--base-url", fake.base_url,
         "--tools", "chat_tools:TOOLS", *more],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO, env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _until(proc: subprocess.Popen[Any], done: Any, what: str) -> None:
    deadline = time.monotonic() + 60
    while not done():
        assert proc.poll() is None, f"the chat ended before {what}"
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.02)


@pytest.mark.parametrize("second", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_second_stop_while_a_turn_is_being_cancelled_exits_at_once(tmp_path: Path, second: signal.Signals) -> None:
    transcript, mark = tmp_path / "chat.jsonl", tmp_path / "mark"
    call = '```json action\n{"tool": "hold", "args": {"seconds": 600}}\n```'
    with FakeUpstream([call, "never asked"]) as fake:
        proc = _chat(tmp_path, fake, "--transcript", str(transcript))
        with reaped(proc):
            assert proc.stdin is not None
            proc.stdin.write(b"hold on\n")
            proc.stdin.flush()
            _until(proc, lambda: mark.exists() and mark.read_text() == "holding", "the tool ran")
            proc.send_signal(signal.SIGINT)  # cancels the turn: the tool tidies up (ten minutes)
            _until(proc, lambda: mark.read_text() == "tidying", "the first Ctrl-C cancelled the turn")
            proc.send_signal(second)
            out, err = proc.communicate(timeout=60)  # before: it waited for the tool
    code, word = (130, "interrupted") if second == signal.SIGINT else (143, "terminated")
    assert proc.returncode == code, err
    assert err.decode().strip().splitlines() == [f"agentfsm: {word}"]
    assert mark.read_text() == "tidying"  # not cancelled again: the process ended
    assert 'call hold({"seconds": 600})' in out.decode()  # the steps shown before it stay
    events = read_transcript(transcript)  # what was written reads, and replays as far as it goes
    types = [e["type"] for e in events]
    assert types[0] == "run_start" and "tool_call" in types and "run_end" not in types
    assert replay(transcript).identical


#: a call whose step line is far larger than a pipe's buffer: writing it takes many writes
LARGE = "A" * 600_000 + "END"


@pytest.mark.parametrize("sent", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_stop_while_a_step_line_is_written_leaves_the_line_whole(tmp_path: Path, sent: signal.Signals) -> None:
    """The stop lands once the first bytes of the call's step line are on stdout and the
    pipe is full: the reader stops reading until the signal is sent, so the chat is in the
    middle of writing that line, whatever the machine's load."""
    call = "```json action\n" + json.dumps({"tool": "echo", "args": {"text": LARGE}}) + "\n```"
    with FakeUpstream([call, "taken."]) as fake:
        proc = _chat(tmp_path, fake)
        assert proc.stdin is not None and proc.stdout is not None
        chunks: list[bytes] = []
        fd = proc.stdout.fileno()
        seen, sent_it = threading.Event(), threading.Event()

        def pump() -> None:  # raw reads: a part of a line is seen as soon as it is written
            while chunk := os.read(fd, 1 << 16):
                chunks.append(chunk)
                if b"AAAA" in chunk and not seen.is_set():
                    seen.set()
                    sent_it.wait(60)  # the pipe fills: the chat waits inside its write

        reader = threading.Thread(target=pump)
        reader.start()
        try:
            proc.stdin.write(b"take it\n")
            proc.stdin.flush()
            _until(proc, seen.is_set, "the call's line was being written")
            proc.send_signal(sent)
            sent_it.set()
            proc.stdin.close()  # the chat goes on after a Ctrl-C: end it at its prompt
            proc.wait(timeout=60)
        finally:
            sent_it.set()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            reader.join(timeout=60)
            for pipe in (proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
    out = b"".join(chunks).decode()
    (line,) = [line for line in out.splitlines() if line.startswith("call echo(")]
    assert line == f"call echo({json.dumps({'text': LARGE})})  call_0", (len(line), line[-40:])
    assert proc.returncode == (0 if sent == signal.SIGINT else 143)
