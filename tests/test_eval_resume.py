"""``--resume`` of ``eval bfcl``, ``eval quality`` and ``calibrate``: a stopped run's partial
report read back, and only under the plan that made it. Each command run as a subprocess
against a FakeUpstream, stopped by a real Ctrl-C (SIGINT) while a run is under way, then
resumed: its report equals an unstopped run's but for the timings, another plan is
refused naming what differs, and a resume with nothing to resume says so. (bfcl stopped
by an upstream that fails, and resumed: tests/test_sigterm_eval.py.)"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentfsm.backends.scripted import ScriptedBackend
from agentfsm.core.config import RunConfig
from agentfsm.core.errors import UsageError
from agentfsm.eval.report import aggregate, write_report
from agentfsm.eval.resume import plan_key, remaining, resumed
from agentfsm.eval.runner import EvalPlan, load_plan_cases, resolve_specs, run_eval
from agentfsm.eval.quality_table import COLUMNS
from agentfsm.testing import FakeReply, FakeUpstream
from tests._fake import HoldAfter
from tests._procs import reaped
from tests.test_eval_runner import FIXTURES, _reply


def _plan(config: RunConfig = RunConfig()) -> EvalPlan:
    backend = ScriptedBackend(_reply)
    specs = resolve_specs(backend, "json-action", "prompt")
    return EvalPlan(categories=("simple_python", "irrelevance", "parallel"), specs=specs, limit=1,
                    data_dir=FIXTURES, config=config)


def _key(plan: EvalPlan, model: str | None = None) -> dict[str, object]:
    return plan_key(plan, "scripted", model, 256, "2026.3.23")


def _partial(tmp_path: Path, plan: EvalPlan) -> tuple[Path, list[object]]:
    results = asyncio.run(run_eval(ScriptedBackend(_reply), plan))
    path = write_report(tmp_path / "bfcl.partial", aggregate(results), results, {"plan": _key(plan)})[0]
    return path, list(results)


def test_the_cases_read_back_are_those_written(tmp_path: Path) -> None:
    plan = _plan()
    path, results = _partial(tmp_path, plan)
    back = resumed(path, _key(plan), len(plan.specs))
    assert [r.to_json() for r in back] == [r.to_json() for r in results]  # type: ignore[attr-defined]
    # the rows made of them are the rows of the run that wrote them, but for the seconds,
    # which the report keeps to 4 decimals a case (so a row's mean may move in its last digit)
    rows_back, rows = ([r.to_json() for r in aggregate(cases)] for cases in (back, results))  # type: ignore[arg-type]
    assert [{**r, "seconds_per_case": None} for r in rows_back] == [{**r, "seconds_per_case": None} for r in rows]
    assert all(abs(a["seconds_per_case"] - b["seconds_per_case"]) <= 0.001 for a, b in zip(rows_back, rows))
    assert remaining(load_plan_cases(plan), back) == []
    assert [c.id for c in remaining(load_plan_cases(plan), back[:2])] == [c.id for c in load_plan_cases(plan)[1:]]


@pytest.mark.parametrize(("changed", "named"), [
    (lambda p: _key(p, model="other-model"), "model"),
    (lambda p: _key(_plan(RunConfig(max_corrections=1))), "config"),
    (lambda p: {**_key(p), "limit": 5}, "limit"),
])
def test_a_partial_report_of_another_plan_is_refused_naming_what_differs(tmp_path: Path, changed, named) -> None:  # type: ignore[no-untyped-def]
    plan = _plan()
    path, _ = _partial(tmp_path, plan)
    with pytest.raises(UsageError, match=rf"made by another plan \({named}:"):
        resumed(path, changed(plan), len(plan.specs))


def test_what_cannot_be_resumed_says_why(tmp_path: Path) -> None:
    plan = _plan()
    with pytest.raises(UsageError, match="no partial report at"):
        resumed(tmp_path / "missing.json", _key(plan), 2)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(UsageError, match="cannot read"):
        resumed(bad, _key(plan), 2)
    bad.write_text(json.dumps({"meta": {"command": "x"}, "rows": [], "cases": []}))
    with pytest.raises(UsageError, match="does not say which plan"):
        resumed(bad, _key(plan), 2)
    path, _ = _partial(tmp_path, plan)
    report = json.loads(path.read_text())
    report["cases"] = report["cases"][:3]  # a case with one of its two runs
    path.write_text(json.dumps(report))
    with pytest.raises(UsageError, match="not whole cases of 2 runs"):
        resumed(path, _key(plan), 2)
    report["cases"][0] = {"id": 1}
    path.write_text(json.dumps(report))
    with pytest.raises(UsageError, match="cannot be read back"):
        resumed(path, _key(plan), 3)


# -- the commands, stopped by a real signal and resumed -----------------------------------

REPO = Path(__file__).resolve().parent.parent
ANSWER = "The answer is 42."
#: each command, small enough to run in seconds against a fake upstream; the partial report
#: --resume reads; and how many requests are answered before the one a signal lands in
#: (one model call a run here: bfcl's 5 make 2 whole cases of its 2 rows, quality's 3 its
#: first 3 tasks, calibrate's 19 its first 2 items under its 8 settings)
COMMANDS = {
    "eval-bfcl": (["eval", "bfcl", "--categories", "simple_python,irrelevance", "--limit", "3", "-o", "{out}/bfcl"],
                  "bfcl.partial.json", 5),
    "eval-quality": (["eval", "quality", "--fast", "--languages", "de", "--categories", "simple_python", "--limit", "3",
                      "--live-categories", "none", "-o", "{out}/quality.md"], "quality.partial.json", 3),
    "calibrate": (["calibrate", "-o", "{out}/profile.json"], "profile.partial.json", 19),
}
#: an option that changes each command's plan, and how the refusal names it
OTHER_PLAN = {
    "eval-bfcl": (["--limit", "2"], "limit: 3 there, 2 here"),
    "eval-quality": (["--limit", "2"], "limit: 3 there, 2 here"),
    "calibrate": (["--max-tokens", "64"], "max_tokens: 128 there, 64 here"),
}


def _command(command: str, out: Path, fake: FakeUpstream, *more: str) -> list[str]:
    args = COMMANDS[command][0]
    return [sys.executable, "-m", "agentfsm", *(a.format(out=out) for a in args), "--backend", "openai",
            "--base-url", fake.base_url, *more]


def _start(command: str, out: Path, fake: FakeUpstream, *more: str) -> subprocess.Popen[str]:
    # SIGINT as a terminal's Ctrl-C (a test runner's child may inherit it ignored)
    return subprocess.Popen(_command(command, out, fake, *more), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _run(command: str, out: Path, *more: str) -> tuple[int, str, str, int]:
    """The command run to its end against an upstream that always answers: its exit code,
    stdout, stderr and how many requests the upstream had."""
    with FakeUpstream(lambda request: FakeReply(text=ANSWER)) as fake:
        proc = _start(command, out, fake, *more)
        with reaped(proc):
            stdout, err = proc.communicate(timeout=180)
        return proc.returncode, stdout, err, len(fake.chat_requests)


def _stopped(command: str, out: Path) -> None:
    """The command stopped by Ctrl-C (a real SIGINT) while a run is under way: the upstream
    holds the request after the first few, so the signal lands in that run however slowly
    a loaded machine runs the command."""
    answered = COMMANDS[command][2]
    with FakeUpstream(HoldAfter(answered, ANSWER, latency=0.0)) as fake:
        proc = _start(command, out, fake)
        with reaped(proc):
            deadline = time.monotonic() + 120
            while len(fake.chat_requests) <= answered:
                assert time.monotonic() < deadline and proc.poll() is None, "the command never asked the upstream"
                time.sleep(0.05)
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert f"kept in {out / COMMANDS[command][1]}" in err, err


@pytest.fixture(scope="module")
def stopped(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, Path], None]:
    """Put a stopped run's partial report (one per command, made once) into a folder."""
    made: dict[str, Path] = {}

    def put(command: str, into: Path) -> None:
        if command not in made:
            made[command] = tmp_path_factory.mktemp(command)
            _stopped(command, made[command])
        for path in made[command].iterdir():
            shutil.copy(path, into / path.name)

    return put


def _untimed(report: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in report.items() if k not in ("seconds", "seconds_per_case")}


def _report(command: str, out: Path) -> Any:
    """What a run reported, but its timings (and the command line, date and machine)."""
    if command == "eval-bfcl":
        report = json.loads((out / "bfcl.json").read_text())
        return [_untimed(r) for r in report["rows"]], [_untimed(c) for c in report["cases"]]
    if command == "eval-quality":
        lines = (out / "quality.md").read_text().splitlines()
        table = lines[next(i for i, line in enumerate(lines) if line.startswith("| group |")):]
        seconds = 1 + COLUMNS.index("s/case")  # the cells of a row, after its leading "|"
        return ["|".join(c if i != seconds else "" for i, c in enumerate(line.split("|"))) for line in table]
    (entry,) = json.loads((out / "profile.json").read_text())["models"].values()
    kept = {k: v for k, v in entry.items() if k not in ("date", "seconds", "command", "machine")}
    return {**kept, "table": [_untimed(row) for row in entry["table"]]}


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_run_stopped_by_ctrl_c_and_resumed_reports_what_an_unstopped_run_reports(
    tmp_path: Path, stopped: Callable[[str, Path], None], command: str
) -> None:
    whole, part = tmp_path / "whole", tmp_path / "part"
    whole.mkdir(), part.mkdir()
    code, _, err, unstopped_requests = _run(command, whole)
    assert code == 0, err
    stopped(command, part)
    partial = part / COMMANDS[command][1]
    kept = json.loads(partial.read_text())
    assert kept["meta"]["plan"]
    runs = len(kept.get("cases", [])) + len(kept.get("tasks", [])) + len(kept.get("outcomes", []))
    assert runs > 0
    code, out, err, requests = _run(command, part, "--resume")
    assert code == 0, err
    assert "Traceback" not in err, err
    (said,) = [line for line in out.splitlines() if line.startswith("resuming from ")]
    assert said.startswith(f"resuming from {partial}: "), said
    # the progress goes on from the runs kept (a log gets one line a run: [done/total])
    first = next(line for line in out.splitlines() if line.startswith("["))
    assert first.startswith(f"[{runs + 1}/"), out
    assert requests == unstopped_requests - runs  # one model call a run: the kept ones were not asked again
    assert _report(command, part) == _report(command, whole)
    assert not partial.exists()


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_resume_under_another_plan_is_refused_naming_what_differs(
    tmp_path: Path, stopped: Callable[[str, Path], None], command: str
) -> None:
    stopped(command, tmp_path)
    partial = tmp_path / COMMANDS[command][1]
    before = partial.read_text()
    more, named = OTHER_PLAN[command]
    code, _, err, requests = _run(command, tmp_path, "--resume", *more)
    assert code == 2 and requests == 0, err
    line = err.strip().splitlines()[-1]
    assert line.startswith(f"agentfsm: error: --resume: {partial} was made by another plan ("), err
    assert named in line, line
    code, _, err, requests = _run(command, tmp_path, "--resume", "--model", "other")
    assert code == 2 and requests == 0 and "model: None there, 'other' here" in err, err
    assert partial.read_text() == before


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_resume_with_no_partial_report_says_so(tmp_path: Path, command: str) -> None:
    code, _, err, requests = _run(command, tmp_path, "--resume")
    assert code == 2 and requests == 0, err
    assert err.strip().splitlines()[-1].startswith(
        f"agentfsm: error: --resume: no partial report at {tmp_path / COMMANDS[command][1]} "), err
    assert "Traceback" not in err, err
