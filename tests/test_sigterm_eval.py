"""``agentfsm eval bfcl``, ``eval quality`` and ``calibrate`` stopped part way keep what ran.

Ctrl-C and SIGTERM stop them as they stop ``run`` and ``batch``: exit 130 / 143, each run
under way ends its transcript with ``run_end`` status ``cancelled``. An upstream that fails
part way (answers 503 for good) stops them with exit 2. Either way the runs that ended are
written as a report (a profile, for ``calibrate``) whose first line is ``PARTIAL: n of N
runs; why``, to the path with ``.partial`` before its suffix: a complete report or profile
already at the path is left as it was. One line on stderr says why, how far it got and
where the partial report is. Before, a signal kept nothing, a 503 from the prompt-mode
baseline (or any BFCL case) lost the whole eval, and one part way through the task suite was scored as
the model's failure on every task after it, in a complete-looking report that replaced the
last one. Real parts: the CLI as a subprocess, a FakeUpstream, real signals."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentfsm.core.profile import Profile
from agentfsm.runtime.transcript import read_transcript
from agentfsm.server.models_file import read_profile
from agentfsm.testing import FakeReply, FakeUpstream, ReceivedRequest
from tests._fake import HoldAfter
from tests._procs import reaped

REPO = Path(__file__).resolve().parent.parent
UPSTREAM = ("--backend", "openai", "--base-url")
#: each command, the reports it writes when whole, and the partial ones it writes when stopped
COMMANDS = {
    "eval-bfcl": (["eval", "bfcl", "--limit", "20", "--no-baseline", "-o", "{out}/bfcl", "--transcripts", "{out}/t"],
                  ["bfcl.json", "bfcl.md"], ["bfcl.partial.json", "bfcl.partial.md"]),
    "eval-quality": (["eval", "quality", "--fast", "--categories", "none", "--live-categories", "none",
                      "-o", "{out}/quality.md", "--transcripts", "{out}/t"], ["quality.md"],
                     ["quality.partial.json", "quality.partial.md"]),
    "calibrate": (["calibrate", "-o", "{out}/profile.json", "--transcripts", "{out}/t"], ["profile.json", "profile.md"],
                  ["profile.partial.json", "profile.partial.md"]),
}
SIGNALS = {"SIGTERM": (signal.SIGTERM, 143, "terminated", "terminated (SIGTERM)"),
           "SIGINT": (signal.SIGINT, 130, "interrupted", "interrupted (Ctrl-C)")}
#: ``0 of 10 runs were done, kept in A, B; C was not written (one there is as it was)``
SAID = re.compile(r"(\d+) of (\d+) (runs|items) were done(?:, kept in (.+))?; (.+) was not written \(one there is as it was\)$")

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


def _start(args: list[str], out: Path, fake: FakeUpstream, sigint: Any = signal.SIG_DFL) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "agentfsm", *(a.format(out=out) for a in args), *UPSTREAM, fake.base_url],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)}, preexec_fn=lambda: signal.signal(signal.SIGINT, sigint))


def _earlier(out: Path, reports: list[str]) -> dict[str, str]:
    """An earlier report or profile at each path (left as it was)."""
    earlier = {name: json.dumps(Profile().to_json()) if name.endswith(".json") else "earlier\n" for name in reports}
    for name, text in earlier.items():
        (out / name).write_text(text)
    return earlier


def _ends(out: Path) -> list[str]:
    """How each transcript ended (each has its ``run_end``)."""
    ends = [read_transcript(p)[-1] for p in (out / "t").rglob("*.jsonl")]
    assert ends and all(e["type"] == "run_end" for e in ends)
    return [str(e["status"]) for e in ends]


def _check_partial(command: str, out: Path, done: int, total: int, why: str) -> None:
    """The partial report holds the ``done`` runs (items) that ended, and says so first."""
    unit = "items" if command == "calibrate" else "runs"
    title = f"PARTIAL: {done} of {total} {unit}; {why}"
    partial = COMMANDS[command][2]
    markdown = (out / next(n for n in partial if n.endswith(".md"))).read_text()
    assert markdown.splitlines()[0] == f"# {title}", markdown[:300]
    if command == "eval-bfcl":
        report = json.loads((out / "bfcl.partial.json").read_text())
        assert report["meta"]["partial"] == title
        assert len(report["cases"]) == done == sum(r["cases"] for r in report["rows"] if r["category"] != "mean")
    elif command == "eval-quality":  # the task suite only: every run is a task
        assert re.search(rf"^\| \*\*tasks\*\* \| \*\*all\*\* \| \*\*{done}\*\* \|", markdown, re.M), markdown
    else:
        (entry,) = json.loads((out / "profile.partial.json").read_text())["models"].values()
        assert entry["note"] == title and len(entry["items"]) == done
        assert {row["cases"] for row in entry["table"]} == {done}  # every setting ran the same items
        assert read_profile(out / "profile.partial.json").models  # a profile serve --models can read


#: each command under SIGTERM and Ctrl-C from a terminal, and SIGTERM to a script's background
#: job (SIGINT ignored: SIGTERM cannot take asyncio's SIGINT path)
CASES = [(c, s, signal.SIG_DFL) for c in COMMANDS for s in SIGNALS] + [(c, "SIGTERM", signal.SIG_IGN) for c in COMMANDS]


@pytest.mark.parametrize(("command", "sent", "sigint"), CASES,
                         ids=[f"{c}-{s}-{'background' if i == signal.SIG_IGN else 'terminal'}" for c, s, i in CASES])
def test_a_stopped_eval_ends_its_runs_and_keeps_those_done_as_a_partial_report(
    tmp_path: Path, command: str, sent: str, sigint: signal.Handlers
) -> None:
    signum, code, word, why = SIGNALS[sent]
    args, reports, partial = COMMANDS[command]
    earlier = _earlier(tmp_path, reports)
    # calibrate's item runs under each of the backend's 8 settings, one model call each here:
    # past 12 calls, its first item has ended
    wait_for = 12 if command == "calibrate" else 4
    # the requests before it answered, that one held: the signal lands while its run is under way
    with FakeUpstream(HoldAfter(wait_for - 1, "The answer is 42.", latency=0.3)) as fake:
        proc = _start(args, tmp_path, fake, sigint)
        with reaped(proc):
            deadline = time.monotonic() + 60
            while len(fake.chat_requests) < wait_for:
                assert time.monotonic() < deadline and proc.poll() is None, "the command never asked the upstream"
                time.sleep(0.05)
            proc.send_signal(signum)
            _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert "Traceback" not in err, err
    line = err.strip().splitlines()[-1]
    assert line.startswith(f"agentfsm: {word}: "), err
    said = SAID.search(line)
    assert said is not None, line
    done, total = int(said.group(1)), int(said.group(2))
    assert 0 < done < total
    assert said.group(4) == ", ".join(str(tmp_path / name) for name in partial)  # the line names the partial report
    assert all((tmp_path / name).read_text() == text for name, text in earlier.items())
    statuses = _ends(tmp_path)
    assert "cancelled" in statuses
    if command != "calibrate":  # how far it got: the runs whose transcripts ended
        assert done == len(statuses) - statuses.count("cancelled")
    _check_partial(command, tmp_path, done, total, why)


def test_a_stopped_eval_with_no_run_done_writes_nothing(tmp_path: Path) -> None:
    args, reports, _ = COMMANDS["eval-quality"]
    earlier = _earlier(tmp_path, reports)
    with FakeUpstream(lambda request: FakeReply(text="The answer is 42.", latency=30)) as fake:
        proc = _start(args, tmp_path, fake)
        with reaped(proc):
            deadline = time.monotonic() + 60
            while not fake.chat_requests:
                assert time.monotonic() < deadline and proc.poll() is None, "the command never asked the upstream"
                time.sleep(0.05)
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    said = SAID.search(err.strip().splitlines()[-1])
    assert said is not None and said.group(1) == "0" and said.group(4) is None, err
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*reports, "t"])
    assert all((tmp_path / name).read_text() == text for name, text in earlier.items())


#: after this many answers the upstream fails for good: 503 to every request
ANSWERED = 5
#: what a command whose upstream failed exits with
FAILING_EXIT = 2


def _failing_after(limit: int) -> Callable[[ReceivedRequest], FakeReply]:
    """An upstream that answers ``limit`` requests, then 503s every one."""
    answered = 0

    def failing(request: ReceivedRequest) -> FakeReply:
        nonlocal answered
        answered += 1
        return FakeReply(text="The answer is 42.") if answered <= limit else FakeReply(status=503)

    return failing


def _ended(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """The command's stdout and stderr once it has ended by itself (killed, past two minutes)."""
    with reaped(proc):
        return proc.communicate(timeout=120)


def _finish(proc: subprocess.Popen[str], code: int) -> str:
    """The command's stderr once it has ended by itself with ``code``."""
    _, err = _ended(proc)
    assert proc.returncode == code, err
    return err
#: eval bfcl with its baseline row: two runs per case, so the 5 runs done keep 2 whole cases
FAILING = {
    "eval-bfcl": ["eval", "bfcl", "--limit", "20", "-o", "{out}/bfcl", "--transcripts", "{out}/t"],
    "eval-quality": COMMANDS["eval-quality"][0],
    "calibrate": COMMANDS["calibrate"][0],
}


@pytest.mark.parametrize("command", list(FAILING))
def test_an_upstream_that_fails_part_way_stops_the_eval_and_keeps_what_ran(tmp_path: Path, command: str) -> None:
    reports, partial = COMMANDS[command][1], COMMANDS[command][2]
    earlier = _earlier(tmp_path, reports)
    # calibrate: one whole item (8 settings), then 503s part way through the second
    with FakeUpstream(_failing_after(12 if command == "calibrate" else ANSWERED)) as fake:
        err = _finish(_start(FAILING[command], tmp_path, fake), FAILING_EXIT)
    assert "Traceback" not in err, err
    line = err.strip().splitlines()[-1]
    assert line.startswith("agentfsm: error: upstream answered HTTP 503"), err
    said = SAID.search(line)
    assert said is not None, line
    done, total = int(said.group(1)), int(said.group(2))
    assert said.group(4) == ", ".join(str(tmp_path / name) for name in partial)
    assert all((tmp_path / name).read_text() == text for name, text in earlier.items())
    statuses = _ends(tmp_path)
    # bfcl: 5 runs ended, 2 whole cases kept; calibrate: its first item; quality: the tasks
    # that ended (the one the 503 cut ended its transcript in error and is not scored)
    expected = {"eval-bfcl": 4, "eval-quality": statuses.count("final"), "calibrate": 1}[command]
    assert 0 < done == expected < total, line
    assert statuses.count("error") == 1 and "cancelled" not in statuses
    why = line.removeprefix("agentfsm: error: ").split("; ")[0]
    _check_partial(command, tmp_path, done, total, f"upstream failed: {why}")


def test_a_partial_calibration_of_a_profile_named_without_json_leaves_its_table_alone(tmp_path: Path) -> None:
    # ``-o profile`` writes profile and profile.md: the partial table went to
    # profile.partial with .md in place of its suffix, i.e. over the whole one's profile.md
    (tmp_path / "profile.md").write_text("earlier\n")
    with FakeUpstream(_failing_after(12)) as fake:  # one whole item (8 settings), then 503s
        err = _finish(_start(["calibrate", "-o", "{out}/profile"], tmp_path, fake), FAILING_EXIT)
    said = SAID.search(err.strip().splitlines()[-1])
    assert said is not None and said.group(4) == f"{tmp_path / 'profile.partial'}, {tmp_path / 'profile.partial.md'}", err
    assert (tmp_path / "profile.md").read_text() == "earlier\n"
    assert (tmp_path / "profile.partial.md").read_text().startswith("# PARTIAL: 1 of ")
    assert read_profile(tmp_path / "profile.partial").models


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_complete_run_removes_the_partial_report_of_a_stopped_one(tmp_path: Path, command: str) -> None:
    """A complete report supersedes the partial one a stopped run left at the same path:
    before, the partial files stayed beside it, older and smaller, looking as current.
    Only that path's partial files go (another report's stay), said in one line."""
    args, reports, partial = COMMANDS[command]
    others = ["other.partial.json", "other.partial.md"]  # another report's: left alone
    for name in others:
        (tmp_path / name).write_text("another report\n")
    with FakeUpstream(_failing_after(12 if command == "calibrate" else ANSWERED)) as fake:
        _finish(_start(args, tmp_path, fake), FAILING_EXIT)
    assert all((tmp_path / name).exists() for name in partial)
    code, out, err, _ = _run(args, tmp_path, lambda request: FakeReply(text="The answer is 42."))
    assert code == 0, err
    assert all((tmp_path / name).exists() for name in reports)
    assert not any((tmp_path / name).exists() for name in partial)
    assert all((tmp_path / name).read_text() == "another report\n" for name in others)
    (said,) = [line for line in out.splitlines() if line.startswith("removed ")]
    assert said.startswith(f"removed {', '.join(str(tmp_path / name) for name in partial)}, superseded by "), said


def _run(args: list[str], out: Path, reply: Callable[[ReceivedRequest], FakeReply]) -> tuple[int, str, str, int]:
    """Run a command to its end against an upstream answering ``reply``: its exit code,
    stdout, stderr and how many requests the upstream had."""
    with FakeUpstream(reply) as fake:
        proc = _start(args, out, fake)
        stdout, err = _ended(proc)
        return proc.returncode, stdout, err, len(fake.requests)


def _cases(path: Path) -> list[tuple[str, str, str, bool, str | None]]:
    return [(c["id"], c["dialect"], c["enforcement"], c["valid"], c["answer"]) for c in json.loads(path.read_text())["cases"]]


def test_a_stopped_bfcl_eval_resumes_where_it_stopped(tmp_path: Path) -> None:
    """``eval bfcl --resume`` keeps the cases a stopped run's partial report holds, runs
    only the others, and writes the report an unstopped run writes; a partial report of
    another plan is refused, naming what differs."""
    args = FAILING["eval-bfcl"]
    answer = lambda request: FakeReply(text="The answer is 42.")  # noqa: E731
    whole = tmp_path / "whole"
    whole.mkdir()
    code, _, err, unstopped_requests = _run(args, whole, answer)
    assert code == 0, err
    code, _, err, _ = _run(args, tmp_path, _failing_after(ANSWERED))
    assert code == FAILING_EXIT, err
    kept = json.loads((tmp_path / "bfcl.partial.json").read_text())["cases"]
    assert len(kept) == 4  # two whole cases of two runs each
    # another plan: refused before any model call, the partial report left as it was
    code, _, err, requests = _run([*args, "--resume", "--max-tokens", "128"], tmp_path, answer)
    assert code == 2 and requests == 0, err
    assert "was made by another plan (max_tokens: 256 there, 128 here" in err and "Traceback" not in err, err
    code, out, err, requests = _run([*args, "--resume"], tmp_path, answer)
    assert code == 0, err
    assert "resuming from" in out and "2 cases done" in out, out
    assert requests == unstopped_requests - len(kept)  # one model call a run here: the kept ones were not asked again
    assert _cases(tmp_path / "bfcl.json") == _cases(whole / "bfcl.json")
    resumed = json.loads((tmp_path / "bfcl.json").read_text())["cases"]
    assert resumed[: len(kept)] == kept  # the kept results as they were (their seconds too)
    assert not (tmp_path / "bfcl.partial.json").exists() and not (tmp_path / "bfcl.partial.md").exists()
