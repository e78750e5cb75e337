"""The batch user's and the reviewer's command line, end to end: real files, the CLI (in
process through typer's runner, or as a subprocess where a signal or a file size limit is
the point), and a real HTTP model (FakeUpstream).

Each test is a failure found by running the commands as a user would: a results path that
is not a file, a disk that fills up, Ctrl-C, a tasks file with a byte order mark, a task
with no messages, a progress bar that lost its count, replay output that read paths as
markup and broke lines, replay errors that named no file, a diagram whose start missed
the runs that failed before deciding, and a report that could not find a batch's
transcripts from another directory.
"""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from agentfsm.cli import app
from agentfsm.core.errors import UsageError
from agentfsm.testing import FakeReply, FakeUpstream, ReceivedRequest

REPO = Path(__file__).resolve().parent.parent
TOOLS = "agentfsm.testing.example_tools"
_TASK = re.compile(r"task (\d+):")

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX files, signals and limits")


def _action(tool: str, **args: Any) -> str:
    return "```json action\n" + json.dumps({"tool": tool, "args": args}) + "\n```"


def _script(latency: float = 0.0) -> Any:
    """A model that answers by task number: 0 an answer, 1 a call then an answer, 2 an
    upstream error before any decision, 3 an unknown tool until the budget is spent."""

    def script(request: ReceivedRequest) -> FakeReply:
        first = next((str(m.get("content")) for m in request.messages if m.get("role") == "user"), "")
        found = _TASK.search(first)
        number = int(found.group(1)) if found else 0
        turn = sum(1 for m in request.messages if m.get("role") == "assistant")
        kind = number % 4
        if kind == 2:
            return FakeReply(status=400, body="bad request", latency=latency)
        if kind == 1:
            text = [_action("multiply", a=number, b=2), f"The product is {number * 2}."][min(turn, 1)]
        elif kind == 3:
            text = _action("lookup_product", a=1)
        else:
            text = "The answer is 42."
        return FakeReply(text=text, latency=latency)

    return script


def _tasks(path: Path, n: int) -> Path:
    path.write_text("".join(json.dumps({"id": f"t{i:03d}", "prompt": f"task {i}: go"}) + "\n" for i in range(n)))
    return path


def _model(fake: FakeUpstream) -> list[str]:
    return ["--backend", "openai", "--base-url", fake.base_url, "--model", "m", "--tools-module", TOOLS]


def _ids(path: Path) -> list[str]:
    return [json.loads(line)["id"] for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeUpstream]:
    with FakeUpstream(_script(), keep_requests=False) as upstream:
        yield upstream


@pytest.fixture(scope="module")
def batch_dir(tmp_path_factory: pytest.TempPathFactory, fake: FakeUpstream) -> Path:
    """A batch of 12 tasks that ended every way, with its results and transcripts."""
    root = tmp_path_factory.mktemp("batch")
    tasks = _tasks(root / "tasks.jsonl", 12)
    result = CliRunner().invoke(app, [
        "batch", str(tasks), "-o", str(root / "results.jsonl"), "--transcripts", str(root / "runs"),
        *_model(fake), "--no-progress", "--json",
    ])
    assert result.exit_code == 1, result.output  # the errors and the spent budgets failed
    return root


# --- batch: where results go -------------------------------------------------------------


@pytest.mark.parametrize("target", ["/dev/null", "/dev/stdout"])
def test_batch_refuses_results_that_are_not_a_regular_file(tmp_path: Path, target: str) -> None:
    # /dev/null ended in a traceback (fsync: invalid argument), /dev/stdout into a pipe hung
    # reading the pipe, /dev/zero or /dev/full read without end until the process was killed
    tasks = _tasks(tmp_path / "tasks.jsonl", 2)
    with FakeUpstream(_script()) as fake:
        proc = subprocess.run(
            [sys.executable, "-m", "agentfsm", "batch", str(tasks), "-o", target, *_model(fake), "--no-progress"],
            cwd=REPO, capture_output=True, timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        assert not fake.chat_requests
    assert proc.returncode == 2, proc.stderr.decode()
    assert b"not a regular file" in proc.stderr and b"Traceback" not in proc.stderr


def _limit_file_size() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG): a full disk
    resource.setrlimit(resource.RLIMIT_FSIZE, (6000, 6000))


def test_a_results_file_that_stops_taking_writes_stops_the_batch_and_keeps_whole_lines(tmp_path: Path) -> None:
    # a failed write was a traceback with exit 1 (the code of "some tasks failed"), the
    # other workers went on running tasks whose results could not be kept
    tasks = _tasks(tmp_path / "tasks.jsonl", 80)
    out = tmp_path / "results.jsonl"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with FakeUpstream(_script()) as fake:
        cmd = [sys.executable, "-m", "agentfsm", "batch", str(tasks), "-o", str(out), *_model(fake),
               "--no-progress", "--json", "-c", "4"]
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, timeout=120, env=env, preexec_fn=_limit_file_size)
        err = proc.stderr.decode()
        assert proc.returncode == 2, err
        assert f"cannot write results {out}: file too large" in err and "Traceback" not in err
        assert out.read_bytes().endswith(b"\n")  # the part of the line that failed was cut off
        kept = _ids(out)
        assert 0 < len(kept) < 80
        calls_when_stopped = len(fake.chat_requests)
        rerun = subprocess.run(cmd, cwd=REPO, capture_output=True, timeout=120, env=env)
    assert rerun.returncode == 1, rerun.stderr.decode()  # some tasks of the script fail
    assert json.loads(rerun.stdout)["skipped"] == len(kept)
    ids = _ids(out)
    assert len(ids) == len(set(ids)) == 80
    assert calls_when_stopped < 80 * 2  # the batch stopped, it did not run every task regardless


def test_ctrl_c_says_what_is_kept_and_the_same_command_goes_on(tmp_path: Path) -> None:
    # Ctrl-C ended the batch with exit 130 and not a word
    tasks = _tasks(tmp_path / "tasks.jsonl", 60)
    out = tmp_path / "results.jsonl"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with FakeUpstream(_script(latency=0.05)) as fake:
        cmd = [sys.executable, "-m", "agentfsm", "batch", str(tasks), "-o", str(out), *_model(fake),
               "--no-progress", "--json", "-c", "4", "--transcripts", str(tmp_path / "runs")]
        proc = subprocess.Popen(  # SIGINT as a terminal sends it (a background shell ignores it)
            cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        deadline = time.monotonic() + 60
        while (not out.exists() or out.read_bytes().count(b"\n") < 10) and time.monotonic() < deadline:
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err.decode()
        said = re.search(rb"agentfsm: interrupted: (\d+) of 60 tasks are done in \S+; run the same command again", err)
        assert said is not None, err.decode()
        assert int(said.group(1)) == len(_ids(out)) and b"Traceback" not in err
        rerun = subprocess.run(cmd, cwd=REPO, capture_output=True, timeout=120, env=env)
    summary = json.loads(rerun.stdout)
    assert summary["skipped"] + summary["done"] == 60
    ids = _ids(out)
    assert len(ids) == len(set(ids)) == 60


# --- batch: what a tasks file may hold ---------------------------------------------------


def test_a_tasks_file_with_a_byte_order_mark_runs(tmp_path: Path, fake: FakeUpstream) -> None:
    # Notepad and PowerShell start UTF-8 with a BOM: line 1 was "not a JSON line"
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_bytes(b"\xef\xbb\xbf" + _tasks(tmp_path / "plain.jsonl", 2).read_bytes())
    out = tmp_path / "results.jsonl"
    result = CliRunner().invoke(app, ["batch", str(tasks), "-o", str(out), *_model(fake), "--no-progress", "--json"])
    assert result.exit_code == 0, result.output
    assert sorted(_ids(out)) == ["t000", "t001"]


def test_a_task_with_no_messages_is_refused_before_the_batch_starts(tmp_path: Path) -> None:
    # it ran, sent the model a request with no user turn, and failed as
    # "ValueError: zip() argument 2 is longer than argument 1"
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"id": "a", "prompt": "task 0: go"}\n{"id": "b", "messages": []}\n')
    out = tmp_path / "results.jsonl"
    with FakeUpstream(_script()) as fake:
        result = CliRunner().invoke(app, ["batch", str(tasks), "-o", str(out), *_model(fake), "--no-progress"])
        assert not fake.chat_requests
    assert isinstance(result.exception, UsageError)  # the command line's exit 2
    assert "tasks.jsonl:2: bad task" in str(result.exception) and "'messages' is empty" in str(result.exception)
    assert not out.exists()


def test_the_progress_line_keeps_the_count_and_eta_when_the_counters_are_long(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    # the counters stood before the ETA and took the whole line: "b… failed 14
    # (RetryBudgetExceeded 10, BackendHTTPError 4)  corrections 35 (…" with no bar,
    # no done count and no ETA, even at 120 columns
    tasks = _tasks(tmp_path / "tasks.jsonl", 12)
    result = CliRunner(env={"COLUMNS": "80"}).invoke(
        app, ["batch", str(tasks), "-o", str(tmp_path / "results.jsonl"), *_model(fake)]
    )
    assert result.exit_code == 1, result.output
    line = next(line for line in result.stderr.splitlines() if line.startswith("batch"))
    assert "12/12" in line and "ETA" in line and "failed 6" in line
    assert len(line) <= 80


def _on_a_terminal(command: list[str], timeout: float = 60) -> str:
    """What ``command`` printed with a pseudo-terminal as its stdin, stdout and stderr."""
    import pty
    import select

    master, slave = pty.openpty()
    with subprocess.Popen(command, stdin=slave, stdout=slave, stderr=slave,
                          env={**os.environ, "COLUMNS": "120", "TERM": "xterm"}) as process:
        os.close(slave)
        seen = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and select.select([master], [], [], deadline - time.monotonic())[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
        process.wait(timeout=10)
    os.close(master)
    return seen.decode(errors="replace")


def test_a_warning_prints_above_the_progress_bar_not_into_its_line(tmp_path: Path) -> None:
    # "... 0.0 calls/sWARNING: upstream attempt 1 failed ...": the log sink held the
    # stderr of start-up, so rich's bar never saw the record and kept drawing over it
    tasks = _tasks(tmp_path / "tasks.jsonl", 2)
    retried = [FakeReply(status=503), FakeReply(text='{"final": {"content": "done"}}')] * 2
    with FakeUpstream(retried) as fake:
        seen = _on_a_terminal([sys.executable, "-m", "agentfsm", "batch", str(tasks), "-o", str(tmp_path / "out.jsonl"),
                               *_model(fake), "--concurrency", "1"])
    assert seen.count("WARNING: upstream attempt 1 failed") == 2, seen[-2000:]
    assert re.search(r"calls/s *WARNING", seen) is None, seen[-2000:]
    assert "\x1b[2KWARNING: upstream attempt 1 failed" in seen  # the bar's line cleared first
    assert "2/2" in seen


@pytest.mark.parametrize("command", ["report", "diagram"])
def test_reading_many_transcripts_shows_progress_on_a_terminal_only(
    tmp_path: Path, batch_dir: Path, command: str
) -> None:
    # 20,000 transcripts kept report silent for 30 s and diagram for 20 s (the scale audit)
    args = [sys.executable, "-m", "agentfsm", command, str(batch_dir / "runs"), "-o", str(tmp_path / f"out.{command}")]
    if command == "diagram":
        args[-1] = str(tmp_path / "out.mmd")
    seen = _on_a_terminal(args)
    assert "reading transcripts" in seen and "12/12" in seen, seen[-1500:]
    piped = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert piped.returncode == 0, piped.stderr
    assert "reading transcripts" not in piped.stderr + piped.stdout  # nothing drawn into a pipe or a log


# --- replay ------------------------------------------------------------------------------


def test_replay_prints_paths_as_they_are(tmp_path: Path, batch_dir: Path) -> None:
    # "runs/[bold]x.jsonl" was printed as "runs/x.jsonl"; a "[/]" in a path was a
    # rich MarkupError traceback
    (tmp_path / "a[").mkdir()
    named = [tmp_path / "[bold]t000.jsonl", tmp_path / "a[" / "]t001.jsonl"]
    for path, source in zip(named, ("t000", "t001"), strict=True):
        path.write_bytes((batch_dir / "runs" / f"{source}.jsonl").read_bytes())
    result = CliRunner().invoke(app, ["replay", *map(str, named)])
    assert result.exit_code == 0, result.output
    for path in named:
        assert f"identical  {path}  (" in result.output


def _with_config(source: Path, target: Path, **changes: Any) -> Path:
    lines = source.read_text().splitlines()
    start = json.loads(lines[0])
    start["config"].update(changes)
    target.write_text("\n".join([json.dumps(start), *lines[1:]]) + "\n")
    return target


def test_a_divergence_is_printed_one_line_each_whatever_the_width(tmp_path: Path, batch_dir: Path) -> None:
    # the then/now JSON was broken at the 80th column, mid-string
    changed = _with_config(batch_dir / "runs" / "t003.jsonl", tmp_path / "t003.jsonl", max_corrections=1)
    result = CliRunner(env={"COLUMNS": "80"}).invoke(app, ["replay", str(changed)])
    assert result.exit_code == 1, result.output
    then = next(line for line in result.output.splitlines() if line.startswith("    then: "))
    now = next(line for line in result.output.splitlines() if line.startswith("    now:  "))
    assert json.loads(then.removeprefix("    then: "))["type"]
    assert json.loads(now.removeprefix("    now:  "))["type"]


def test_a_transcript_that_cannot_be_replayed_is_named(tmp_path: Path, batch_dir: Path) -> None:
    # "agentfsm: error: run '07ea…' has no RunStartEvent" and "consensus_samples must be at
    # least 2; got -1": which of the hundreds of files replayed was it?
    headless = tmp_path / "headless.jsonl"
    headless.write_text("".join((batch_dir / "runs" / "t000.jsonl").read_text().splitlines(True)[1:]))
    tampered = _with_config(batch_dir / "runs" / "t000.jsonl", tmp_path / "tampered.jsonl", consensus=-1)
    for path in (headless, tampered):
        proc = subprocess.run(
            [sys.executable, "-m", "agentfsm", "replay", str(path)], cwd=REPO, capture_output=True, timeout=60,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        assert proc.returncode == 2
        assert proc.stderr.decode().startswith(f"agentfsm: error: {path}: run "), proc.stderr.decode()


def test_a_recording_cut_before_its_contract_says_nothing_of_the_contract(tmp_path: Path, batch_dir: Path) -> None:
    # a run cut off after its request (SIGINT, SIGKILL) was noted as "today's contract text
    # differs from the recorded one": there was no recorded one
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join((batch_dir / "runs" / "t001.jsonl").read_text().splitlines(True)[:2]))
    result = CliRunner().invoke(app, ["replay", str(cut), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["identical"] and not report["contract_changed"]
    assert report["notes"] == [f"run {json.loads(cut.read_text().splitlines()[0])['run']}: "
                               "the recording has no run_end; compared as far as it goes"]


# --- diagram -----------------------------------------------------------------------------


def test_the_observed_diagram_starts_every_run(batch_dir: Path) -> None:
    # the 3 runs whose upstream failed before the first decision were missing: the title
    # said "12 runs", the start edge "9 runs"
    result = CliRunner().invoke(app, ["diagram", str(batch_dir / "runs")])
    assert result.exit_code == 0, result.output
    assert 'title: "agentfsm observed paths (12 runs in 12 transcripts)"' in result.output
    assert 'run_start -->|"12 runs"| s_first_decision' in result.output


# --- report ------------------------------------------------------------------------------


def test_report_finds_a_batchs_transcripts_from_any_directory(
    tmp_path: Path, fake: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    # results name their transcripts relative to where the batch ran ("out/runs/t000.jsonl");
    # a report run elsewhere found none, said nothing, and told each run "no transcript was
    # written for this task"
    monkeypatch.chdir(tmp_path)
    _tasks(tmp_path / "tasks.jsonl", 4)
    batch = CliRunner().invoke(app, [
        "batch", "tasks.jsonl", "-o", "out/results.jsonl", "--transcripts", "out/runs", *_model(fake), "--no-progress",
    ])
    assert batch.exit_code == 1, batch.output
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    result = CliRunner().invoke(app, ["report", str(tmp_path / "out" / "results.jsonl"), "-o", "r.html"])
    assert result.exit_code == 0, result.output
    assert "4 runs (2 failed) from 4 transcripts" in result.stderr
    for name in ("t000", "t001", "t002", "t003"):
        (tmp_path / "out" / "runs" / f"{name}.jsonl").unlink()
    result = CliRunner().invoke(app, ["report", str(tmp_path / "out" / "results.jsonl"), "-o", "r.html"])
    assert result.exit_code == 0, result.output
    assert "4 transcripts it names were not found (first: out/runs/t000.jsonl)" in result.stderr
    page = (elsewhere / "r.html").read_text()
    assert "its transcript out/runs/t000.jsonl was not found" in page
