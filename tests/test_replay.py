"""Replay: recorded runs re-decided by today's code; divergences found at the right event."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest
from typer.testing import CliRunner

import agentfsm.guards.schema
from agentfsm.core.backend import Capabilities
from agentfsm.cli import app
from agentfsm.dialects import get_dialect
from agentfsm.core.errors import AgentFSMError, BackendTimeout, UsageError
from agentfsm.guards.base import ACCEPT
from agentfsm.core.messages import ToolCall
from agentfsm.replays.compare import areplay, replay
from agentfsm.runtime.agent import Agent
from agentfsm.testing import ScriptedBackend
from agentfsm.testing.pytest_replay import assert_replays, replay_snapshot
from agentfsm.runtime.transcript import read_transcript


def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


def convert(value: float, unit: Literal["km", "mi"]) -> str:
    """Convert a distance to the other unit."""
    return f"{value * (0.621371 if unit == 'km' else 1.609344):.3f}"


def lookup(key: str) -> str:
    """Look a key up (always fails)."""
    raise KeyError(key)


TOOLS = [add, convert, lookup]
REPO = Path(__file__).resolve().parent.parent


def call(name: str, dialect: str = "json-action", **args: Any) -> str:
    return get_dialect(dialect).render_call(ToolCall(id="x", name=name, arguments=args))


def calls(*pairs: tuple[str, dict[str, Any]], dialect: str = "json-action") -> str:
    rendered = [ToolCall(id=f"x{i}", name=n, arguments=a) for i, (n, a) in enumerate(pairs)]
    return get_dialect(dialect).render_calls(rendered)


@dataclass
class Scenario:
    name: str
    replies: Sequence[str | Exception]
    options: dict[str, Any] = field(default_factory=dict)
    capabilities: Capabilities = field(default_factory=Capabilities)


SCENARIOS = [
    Scenario("answer-direct", ["Paris is the capital of France."]),
    Scenario("one-tool", [call("add", a=2, b=3), "2 + 3 = 5"]),
    Scenario("parallel-calls", [calls(("add", {"a": 1, "b": 2}), ("convert", {"value": 5, "unit": "km"})), "3 and 3.107"]),
    Scenario("sequential-calls", [call("add", a=1, b=2), call("add", a=3, b=4), "3 then 7"]),
    Scenario("schema-correction", [call("convert", value=5, unit="parsecs"), call("convert", value=5, unit="km"), "3.107 miles"]),
    Scenario("unknown-tool-correction", [call("multiply", a=2, b=3), call("add", a=2, b=3), "5"]),
    Scenario("refusal-correction", ["I'm sorry, but I don't have access to any tools.", call("add", a=1, b=1), "2"]),
    Scenario("tool-error-result", [call("lookup", key="k"), "The lookup failed."]),
    # under auto a spent budget ends with the model's latest prose; without prose, and
    # under required, an error (the runtime never writes the answer)
    Scenario("budget-spent", [call("nope")] * 3 + ["I cannot find that tool.\n" + call("nope")]),
    Scenario("budget-spent-no-prose", [call("nope")] * 4),
    Scenario("budget-spent-required", [call("nope")] * 4, {"tool_choice": "required"}),
    Scenario("loop-detected", [call("add", a=1, b=1)] * 5 + ["2"]),
    Scenario("max-steps", [call("add", a=1, b=1), call("add", a=2, b=2), "done"], {"max_steps": 2}),
    # a forced tool is forced on every turn: this run ends when max_steps is spent
    Scenario("prefill-forced", [call("add", a=4, b=4), call("add", a=8, b=8)],
             {"tool_choice": "add", "max_steps": 2}, Capabilities(prefill=True)),
    Scenario("constrained-auto", [call("add", a=4, b=4), "8"], {}, Capabilities(json_schema=True)),
    Scenario("backend-error", [call("add", a=1, b=2), BackendTimeout("upstream timed out")]),
    Scenario("no-parallel", [calls(("add", {"a": 1, "b": 2}), ("add", {"a": 3, "b": 4})), "3"], {"parallel": False}),
    # under none an action is sent back for prose, never run
    Scenario("tool-choice-none", [call("add", a=1, b=2) + "\nNo tools today.", "No tools today: 1 + 2 is 3."],
             {"tool_choice": "none"}),
    Scenario("command-dialect", [call("add", "command", a=2, b=2), "4"], {"dialect": "command"}),
    Scenario("smiley-dialect", [call("add", "smiley", a=2, b=2), "4"], {"dialect": "smiley"}),
    Scenario("json-protocol-dialect", [call("add", "json-protocol", a=2, b=2), get_dialect("json-protocol").render_final("4")],
             {"dialect": "json-protocol"}),
]


def record(scenario: Scenario, path: Path) -> Path:
    """Run the scenario with a scripted model, writing its transcript to ``path``."""
    # the scripted values are not in the prompt: grounding (policy/grounding.py, tested on
    # its own) would turn these flows into answers; replay must honour the recorded flag
    agent = Agent(ScriptedBackend(list(scenario.replies), scenario.capabilities), TOOLS,
                  transcript=path, **{"grounding": "off", **scenario.options})
    try:
        agent.run(f"Scenario {scenario.name}: please help.")
    except AgentFSMError:
        pass  # runs that end in an error are recorded too
    return path


@pytest.fixture(params=SCENARIOS, ids=lambda s: s.name)
def recorded(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    scenario: Scenario = request.param
    return record(scenario, tmp_path / f"{scenario.name}.jsonl")


def test_every_scenario_replays_identical_and_matches_its_snapshot(recorded: Path, snapshot: Any) -> None:
    report = assert_replays(recorded)
    assert report.compared > 0 and not report.contract_changed and report.runs == 1
    assert replay_snapshot(recorded) == snapshot


def _types(path: Path) -> list[str]:
    return [e["type"] for e in read_transcript(path)]


def test_the_scenarios_cover_corrections_errors_and_finals(tmp_path: Path) -> None:
    kinds = {s.name: _types(record(s, tmp_path / f"{s.name}.jsonl")) for s in SCENARIOS}
    assert "retry" in kinds["schema-correction"] and "final" in kinds["schema-correction"]
    assert "retry" in kinds["refusal-correction"] and "final" in kinds["refusal-correction"]
    assert "error" in kinds["backend-error"] and "error" in kinds["prefill-forced"]
    assert "final" in kinds["budget-spent"] and "error" not in kinds["budget-spent"]
    assert "error" in kinds["budget-spent-required"] and "error" in kinds["budget-spent-no-prose"]
    assert "retry" in kinds["tool-choice-none"] and "final" in kinds["tool-choice-none"]
    assert "tool_call" not in kinds["tool-choice-none"]
    assert "error" in kinds["loop-detected"] and "error" in kinds["max-steps"]
    assert "tool_result" in kinds["parallel-calls"]


def _first(path: Path, type_: str) -> int:
    return next(i for i, e in enumerate(read_transcript(path)) if e["type"] == type_)


def test_a_guard_that_now_accepts_everything_diverges_at_the_recorded_correction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = record(SCENARIOS[4], tmp_path / "schema.jsonl")  # schema-correction
    monkeypatch.setattr(agentfsm.guards.schema, "check", lambda *a, **k: ACCEPT)
    report = replay(path)
    assert not report.identical and report.divergence is not None
    d = report.divergence
    assert d.index == _first(path, "guard")
    assert d.event_type == "guard" and d.then["guard"] == "schema" and d.then["verdict"] == "correct"
    assert d.now and d.now != d.then
    with pytest.raises(AssertionError, match=f"diverged at event {d.index}"):
        assert_replays(path)


def test_replay_needing_more_model_output_than_recorded_is_a_divergence(tmp_path: Path) -> None:
    path = record(SCENARIOS[1], tmp_path / "one.jsonl")  # one-tool
    events = read_transcript(path)
    last_output = max(i for i, e in enumerate(events) if e["type"] == "model_output")
    events[last_output]["text"] = call("add", a=9, b=9)  # now the model "asked" for another call
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    report = replay(path)
    assert not report.identical and report.divergence is not None
    assert report.divergence.index > last_output


def test_a_cut_off_recording_is_compared_as_far_as_it_goes(tmp_path: Path) -> None:
    path = record(SCENARIOS[3], tmp_path / "seq.jsonl")  # sequential-calls
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join(lines[: len(lines) // 2]) + "\n" + lines[len(lines) // 2][:25], encoding="utf-8")
    report = replay(path)
    assert report.identical and any("no run_end" in n for n in report.notes)



def test_a_recording_torn_inside_its_request_line_is_compared_as_far_as_it_goes(tmp_path: Path) -> None:
    # a writer killed while writing the request (the whole conversation: the longest line
    # a run starts with) left run_start alone: "has no RequestEvent: cannot replay it", exit 2
    path = record(SCENARIOS[1], tmp_path / "torn.jsonl")
    lines = path.read_text(encoding="utf-8").splitlines(True)
    assert json.loads(lines[1])["type"] == "request"
    path.write_text(lines[0] + lines[1][:40], encoding="utf-8")
    report = replay(path)
    assert report.identical and report.compared == 0 and report.runs == 1
    assert report.notes == [f"run {json.loads(lines[0])['run']}: the recording has no run_end; compared as far as it goes"]
    path.write_text(lines[0] + json.dumps({**json.loads(lines[-1]), "status": "cancelled"}) + "\n", encoding="utf-8")
    assert replay(path).identical  # cancelled before its request was recorded: nothing was decided either
    path.write_text(lines[0] + lines[-1], encoding="utf-8")  # ended, yet no request: not a recording replay can read
    with pytest.raises(AgentFSMError, match="has no RequestEvent"):
        replay(path)

def test_a_file_holding_two_runs_replays_both(tmp_path: Path) -> None:
    path = tmp_path / "two.jsonl"
    record(SCENARIOS[0], path)
    record(SCENARIOS[1], path)
    report = replay(path)
    assert report.identical and report.runs == 2


def test_a_changed_contract_is_noted_but_is_not_a_divergence(tmp_path: Path) -> None:
    path = record(SCENARIOS[1], tmp_path / "c.jsonl")
    events = read_transcript(path)
    for e in events:
        if e["type"] == "contract":
            e["hash"] = "0" * 64
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    report = replay(path)
    assert report.identical and report.contract_changed


@pytest.fixture
def answered(tmp_path: Path) -> Path:
    return record(SCENARIOS[0], tmp_path / "a.jsonl")


async def test_replay_inside_a_running_loop_says_to_use_areplay(answered: Path) -> None:
    path = answered
    with pytest.raises(UsageError, match="areplay"):
        replay(path)
    assert (await areplay(path)).identical


def test_cli_replay_exit_codes_and_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    good = record(SCENARIOS[1], tmp_path / "good.jsonl")
    changed = record(SCENARIOS[4], tmp_path / "changed.jsonl")
    ok = CliRunner().invoke(app, ["replay", str(good)])
    assert ok.exit_code == 0 and "identical" in ok.output
    monkeypatch.setattr(agentfsm.guards.schema, "check", lambda *a, **k: ACCEPT)
    bad = CliRunner().invoke(app, ["replay", str(tmp_path), "--json"])
    assert bad.exit_code == 1
    reports = {Path(r["path"]).name: r for r in map(json.loads, bad.output.splitlines())}
    assert reports["good.jsonl"]["identical"] is True
    assert reports["changed.jsonl"]["divergence"]["index"] == _first(changed, "guard")


def test_an_unreadable_transcript_is_named_and_the_others_are_still_replayed(tmp_path: Path) -> None:
    # one torn or tampered file of a directory of hundreds stopped the command at it: the
    # files after it were never replayed, and nothing of those before reached --json
    record(SCENARIOS[1], tmp_path / "a-good.jsonl")
    lines = (tmp_path / "a-good.jsonl").read_text().splitlines(True)
    (tmp_path / "b-broken.jsonl").write_text("".join(lines[:3]) + "not json\n" + "".join(lines[3:]))
    (tmp_path / "c-empty.jsonl").write_text("")
    record(SCENARIOS[2], tmp_path / "d-good.jsonl")
    for args in ([], ["--json"]):
        proc = subprocess.run([sys.executable, "-m", "agentfsm", "replay", str(tmp_path), *args],
                              capture_output=True, text=True, timeout=120, cwd=REPO)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.splitlines() == [
            f"agentfsm: error: {tmp_path / 'b-broken.jsonl'}:4: the line is not valid JSON: "
            "Expecting value: line 1 column 1 (char 0)",
            f"agentfsm: error: {tmp_path / 'c-empty.jsonl'}: no events to replay",
        ]
        replayed = [line for line in proc.stdout.splitlines() if "identical" in line]
        assert len(replayed) == 2 and "a-good.jsonl" in replayed[0] and "d-good.jsonl" in replayed[1]
    # a path that is not there is said before anything is replayed, as diagram and report say it
    proc = subprocess.run([sys.executable, "-m", "agentfsm", "replay", str(tmp_path / "a-good.jsonl"),
                           str(tmp_path / "missing.jsonl")], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == f"agentfsm: error: no such transcript file or directory: {tmp_path / 'missing.jsonl'}\n"


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("args", [["replay"], ["replay", "--json"], ["diagram"]], ids=" ".join)
def test_standard_output_that_cannot_be_written_is_one_line(tmp_path: Path, args: list[str]) -> None:
    # "> /dev/full", a full disk: rich's or Python's OSError traceback (28, no space left on device)
    record(SCENARIOS[1], tmp_path / "good.jsonl")
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "agentfsm", *args, str(tmp_path)], stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 2
    assert proc.stderr == "agentfsm: error: cannot write standard output: no space left on device\n"


@pytest.mark.skipif(not Path("/dev/stdin").exists(), reason="needs /dev/stdin")
def test_a_transcript_piped_in_through_dev_stdin(tmp_path: Path) -> None:
    # "zcat run.jsonl.gz | agentfsm replay /dev/stdin" worked until replay took its paths
    # as diagram does, which said "no such transcript file or directory: /dev/stdin"
    path = record(SCENARIOS[1], tmp_path / "good.jsonl")

    def piped(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "agentfsm", *args], input=path.read_text(),
                              capture_output=True, text=True, timeout=120, cwd=REPO)

    done = piped("replay", "/dev/stdin")
    assert done.returncode == 0 and done.stdout.startswith("identical  /dev/stdin"), done.stderr
    drawn = piped("diagram", "/dev/stdin")
    assert drawn.returncode == 0 and "(1 run in 1 transcript)" in drawn.stdout, drawn.stderr
    # the report reads an input twice (its first line to tell what it is, then all of it)
    refused = piped("report", "/dev/stdin", "-o", str(tmp_path / "r.html"))
    assert refused.returncode == 2
    assert refused.stderr == ("agentfsm: error: /dev/stdin is not a regular file: a report reads each input twice; "
                              "write it to a file first (zcat run.jsonl.gz > run.jsonl)\n")
