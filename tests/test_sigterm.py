"""SIGTERM (``timeout``, a job scheduler's limit, ``docker stop``) stops ``agentfsm run``, ``chat``
and ``batch`` as Ctrl-C does: each run under way ends its transcript with ``run_end`` status
``cancelled``, the command says so and exits 143. Before, SIGTERM killed the process where it
stood: no ``run_end`` (replay read a killed writer), a batch silent about what it had done.
Real parts: the CLI as a subprocess, a FakeUpstream that answers slowly, real signals."""

from __future__ import annotations

import json
import os
import re
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
from agentfsm.testing.fake_script import latency
from tests._fake import HoldAfter, wait_for_requests

REPO = Path(__file__).resolve().parent.parent
UPSTREAM = ("--backend", "openai", "--enforcement", "prompt")
ACTION = '```json action\n{"tool": "calculate", "args": {"expression": "6*7"}}\n```'

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


def _sigint(disposition: signal.Handlers) -> Any:
    """A child's SIGINT as a shell leaves it: default in a terminal, ignored in a script's
    background job (then SIGTERM cannot take asyncio's SIGINT path)."""
    return lambda: signal.signal(signal.SIGINT, disposition)


def _agentfsm(*args: str, sigint: signal.Handlers = signal.SIG_DFL, **kwargs: Any) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "agentfsm", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                            preexec_fn=_sigint(sigint), **kwargs)


#: how each stop signal ends a run: the signal, exit status (128 + its number), last line, --json error
STOPS = {
    "ctrl-c": (signal.SIGINT, 130, "interrupted", "KeyboardInterrupt"),
    "sigterm": (signal.SIGTERM, 143, "terminated", "SIGTERM"),
}


@pytest.mark.parametrize(("stop", "sigint"), [("ctrl-c", signal.SIG_DFL), ("sigterm", signal.SIG_DFL),
                                              ("sigterm", signal.SIG_IGN)],
                         ids=["ctrl-c", "sigterm", "sigterm-background-job"])
def test_a_stop_signal_ends_a_run_and_its_transcript(tmp_path: Path, stop: str, sigint: signal.Handlers) -> None:
    sent, code, said, _ = STOPS[stop]
    transcript = tmp_path / "t.jsonl"
    with FakeUpstream([ACTION, latency(30, "42.")]) as fake:
        proc = _agentfsm("run", "What is 6*7?", "--tools", "agentfsm.testing.example_tools:CALCULATOR", *UPSTREAM,
                         "--base-url", fake.base_url, "--transcript", str(transcript), sigint=sigint)
        wait_for_requests(fake, 2)
        proc.send_signal(sent)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert err.strip().splitlines()[-1] == f"agentfsm: {said}" and "Traceback" not in err
    assert "calculate" in out  # the steps before it were shown
    events = read_transcript(transcript)
    assert events[-1]["type"] == "run_end" and events[-1]["status"] == "cancelled"
    assert "error" not in [e["type"] for e in events]
    report = replay(transcript)
    assert report.identical and any("cancelled" in note for note in report.notes)


@pytest.mark.parametrize("stop", list(STOPS))
def test_a_stop_signal_under_json_prints_one_result(tmp_path: Path, stop: str) -> None:
    sent, code, said, error = STOPS[stop]
    with FakeUpstream([latency(30, "42.")]) as fake:
        proc = _agentfsm("run", "hi", *UPSTREAM, "--base-url", fake.base_url, "--json",
                         "--transcript", str(tmp_path / "t.jsonl"))
        wait_for_requests(fake, 1)
        proc.send_signal(sent)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert json.loads(out) == {"ok": False, "error": error, "message": said,
                               "transcript": str(tmp_path / "t.jsonl")}


@pytest.mark.parametrize(("during", "sigint"), [("turn", signal.SIG_DFL), ("prompt", signal.SIG_DFL),
                                               ("turn", signal.SIG_IGN)], ids=["turn", "prompt", "turn-background"])
def test_sigterm_ends_the_chat(tmp_path: Path, during: str, sigint: signal.Handlers) -> None:
    """Ctrl-C cancels a turn and the chat goes on; SIGTERM asks the program to stop: the turn
    under way is cancelled (recorded so) and the chat ends, exit 143."""
    transcript = tmp_path / "chat.jsonl"
    with FakeUpstream(["first answer", latency(30, "never seen")]) as fake:
        proc = _agentfsm("chat", *UPSTREAM, "--base-url", fake.base_url, "--transcript", str(transcript),
                         stdin=subprocess.PIPE, sigint=sigint)
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        shown: list[str] = []
        stdout = proc.stdout
        reader = threading.Thread(target=lambda: shown.extend(iter(stdout.readline, "")))
        reader.start()
        proc.stdin.write("hello\n")
        proc.stdin.flush()
        wait_for_requests(fake, 1)
        if during == "turn":
            proc.stdin.write("second\n")
            proc.stdin.flush()
            wait_for_requests(fake, 2)
        else:  # waiting for the next line: once the answer is shown (its run_end is written
            # before the chat has shown it: a signal then would cancel the turn's last steps)
            deadline = time.monotonic() + 30
            while not any("first answer" in line for line in shown):
                assert time.monotonic() < deadline and proc.poll() is None, shown
                time.sleep(0.05)
            time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        reader.join(timeout=60)
        out, err = "".join(shown), proc.stderr.read()
        for pipe in (proc.stdin, stdout, proc.stderr):
            pipe.close()
    assert proc.returncode == 143, err
    assert err.strip().splitlines()[-1] == "agentfsm: terminated" and "Traceback" not in err
    assert "first answer" in out
    ends = [e["status"] for e in read_transcript(transcript) if e["type"] == "run_end"]
    assert ends == (["final", "cancelled"] if during == "turn" else ["final"])
    assert replay(transcript).identical


@pytest.mark.parametrize("sigint", [signal.SIG_DFL, signal.SIG_IGN], ids=["terminal", "background-job"])
def test_sigterm_stops_a_batch_that_the_same_command_then_finishes(tmp_path: Path, sigint: signal.Handlers) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"t{i:03d}", "prompt": f"task {i}"}) + "\n" for i in range(60)))
    out, runs = tmp_path / "results.jsonl", tmp_path / "runs"
    # eight tasks answered, the ninth on held: the signal lands with tasks under way, whatever the load
    script = HoldAfter(8, "The answer is 42.", latency=0.2)
    with FakeUpstream(script) as fake:
        cmd = ["batch", str(tasks), "-o", str(out), "--backend", "openai", "--base-url", fake.base_url, "--model", "m",
               "--tools-module", "agentfsm.testing.example_tools", "--no-progress", "--json", "-c", "4",
               "--transcripts", str(runs)]
        proc = _agentfsm(*cmd, sigint=sigint)
        wait_for_requests(fake, 9)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 143, err
        said = re.search(r"agentfsm: terminated: (\d+) of 60 tasks are done in \S+; run the same command again", err)
        assert said is not None and "Traceback" not in err, err
        kept = [json.loads(line)["id"] for line in out.read_text().splitlines()]
        assert int(said.group(1)) == len(kept) < 60
        # each task begun has ended its transcript: done ones final, those in flight cancelled
        ends = {p.stem: read_transcript(p)[-1] for p in runs.glob("*.jsonl")}
        assert all(e["type"] == "run_end" for e in ends.values())
        cancelled = {task for task, e in ends.items() if e["status"] == "cancelled"}
        assert cancelled and not cancelled & set(kept)
        script.release()
        rerun = subprocess.run([sys.executable, "-m", "agentfsm", *cmd], capture_output=True, text=True,
                               timeout=120, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert rerun.returncode == 0, rerun.stderr
    summary = json.loads(rerun.stdout)
    assert summary["skipped"] == len(kept) and summary["skipped"] + summary["done"] == 60
    ids = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    assert len(ids) == len(set(ids)) == 60


# -- agentfsm serve: uvicorn's own shutdown ------------------------------------------------------


def _serve_with_one_request_in_flight(tmp_path: Path, signals: tuple[signal.Signals, ...]) -> tuple[Any, dict[str, Any]]:
    """``agentfsm serve --transcripts`` in front of an upstream that takes 4 s; ``signals`` sent
    while a tool request is in flight. The request's transcript end and what its client got."""
    import threading

    import httpx

    from tests._proxy import TOOLS_OPENAI, free_port, wait_until_serving

    got: dict[str, Any] = {}
    with FakeUpstream([latency(4, "It is sunny.")]) as fake:
        port = free_port()
        proc = _agentfsm("serve", "--backend", "openai", "--base-url", fake.base_url, "--model", "m",
                         "--transcripts", str(tmp_path), "--port", str(port))
        url = f"http://127.0.0.1:{port}"
        wait_until_serving(url, proc, 60)
        body = {"model": "m", "messages": [{"role": "user", "content": "weather?"}], "tools": TOOLS_OPENAI}

        def ask() -> None:
            try:
                got["status"] = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=60).status_code
            except httpx.HTTPError as exc:
                got["status"] = type(exc).__name__

        client = threading.Thread(target=ask)
        client.start()
        wait_for_requests(fake, 1)
        for sig in signals:
            proc.send_signal(sig)
            time.sleep(0.3)
        proc.communicate(timeout=60)
        client.join(timeout=60)
    (transcript,) = tmp_path.glob("*.jsonl")
    return read_transcript(transcript)[-1], got


def test_sigterm_lets_serve_finish_the_requests_in_flight(tmp_path: Path) -> None:
    """uvicorn's graceful shutdown: the request in flight is answered and its run ends."""
    end, got = _serve_with_one_request_in_flight(tmp_path, (signal.SIGTERM,))
    assert got == {"status": 200}
    assert end["type"] == "run_end" and end["status"] == "final"


def test_a_forced_shutdown_of_serve_ends_the_requests_in_flight_as_cancelled(tmp_path: Path) -> None:
    """A second Ctrl-C forces uvicorn out without waiting: the requests in flight were
    cancelled with the loop, and their transcripts ended at their model_request."""
    end, _got = _serve_with_one_request_in_flight(tmp_path, (signal.SIGINT, signal.SIGINT))
    assert end["type"] == "run_end" and end["status"] == "cancelled"


#: an answer too large for a pipe's buffer: writing it takes many writes, a window for a signal
LARGE = "A" * 600_000 + " END"


def _chat_signalled_at_its_second_answer(tmp_path: Path, sent: signal.Signals, when: str) -> tuple[int, str, str, list[str]]:
    """A chat whose second turn answers ``LARGE``, sent ``sent`` as soon as that turn's
    ``run_end`` is in the transcript (``when="run_end"``) or as soon as the first bytes of its
    answer are on stdout (``"shown"``, the answer still being written). Nothing more is
    typed: the chat goes on reading. Exit status, stdout, stderr, the run_end statuses."""
    transcript = tmp_path / "chat.jsonl"
    with FakeUpstream(["first answer", LARGE]) as fake:
        proc = _agentfsm("chat", *UPSTREAM, "--base-url", fake.base_url, "--transcript", str(transcript),
                         stdin=subprocess.PIPE)
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        chunks: list[str] = []
        fd = proc.stdout.fileno()

        def pump() -> None:  # raw reads: a part of a line is seen as soon as it is written
            while chunk := os.read(fd, 1 << 16):
                chunks.append(chunk.decode())

        reader = threading.Thread(target=pump)
        reader.start()
        deadline = time.monotonic() + 60
        proc.stdin.write("hello\n")
        proc.stdin.flush()
        while "first answer" not in "".join(chunks):
            assert time.monotonic() < deadline and proc.poll() is None, chunks
            time.sleep(0.01)
        proc.stdin.write("second\n")
        proc.stdin.flush()
        if when == "run_end":
            while transcript.read_text().count('"run_end"') < 2:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.001)
        else:
            while not any("AAAA" in chunk for chunk in chunks):
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.001)
        proc.send_signal(sent)
        proc.wait(timeout=60)
        reader.join(timeout=60)
        err = proc.stderr.read()
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            pipe.close()
    ends = [e["status"] for e in read_transcript(transcript) if e["type"] == "run_end"]
    return proc.returncode, "".join(chunks), err, ends


@pytest.mark.parametrize("when", ["run_end", "shown"])
@pytest.mark.parametrize("stop", list(STOPS))
def test_a_stop_once_the_turn_has_its_answer_shows_and_keeps_it_then_ends_the_chat(
        tmp_path: Path, stop: str, when: str) -> None:
    """A stop after a turn's run_end was written but before its answer was shown said the
    turn was cancelled and its message dropped, while the transcript said it ended final;
    one while the answer was being written cut it short and ended the chat 130 (or
    'agentfsm: aborted', exit 1), with no word of SIGTERM. The turn that has its answer is
    done: the answer is shown whole, then the chat ends as a stop at its prompt ends it:
    SIGTERM with 143 and one line, Ctrl-C as Ctrl-D does (0, both answers counted)."""
    sent, code, said, _ = STOPS[stop]
    returncode, out, err, ends = _chat_signalled_at_its_second_answer(tmp_path, sent, when)
    assert ends == ["final", "final"]
    assert LARGE in out and "cancelled" not in out and "Traceback" not in err
    if stop == "sigterm":
        assert returncode == code and err.strip().splitlines() == [f"agentfsm: {said}"], err
    else:
        assert returncode == 0 and not err.strip(), err
        assert out.rstrip().endswith("2 assistant message(s) in this session")
