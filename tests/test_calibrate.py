"""agentfsm calibrate: the grid, the calibration set, the choice rule, and two scripted upstreams
that each follow one format only (command, json-protocol): each gets its own dialect."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentfsm.backends import OpenAICompatBackend
from agentfsm.core.backend import Capabilities
from agentfsm.core.config import DEFAULTS
from agentfsm.core.errors import UsageError
from agentfsm.core.profile import Profile, ProfileRow
from agentfsm.eval.calibrate import (
    CALIBRATION_SET,
    CalibrationSet,
    Outcome,
    Setting,
    choose,
    hopeless,
    load_items,
    policy_axes,
    run_calibration,
    settings_grid,
    table,
)
from agentfsm.eval.suite_data import TASKS
from agentfsm.testing import FakeUpstream
from tests._followers import follower, item_answers

ITEMS = load_items()


@pytest.fixture(scope="module")
def followers() -> Iterator[dict[str, FakeUpstream]]:
    answers = item_answers(ITEMS)
    with FakeUpstream(follower("command", answers)) as a, FakeUpstream(follower("json-protocol", answers)) as b:
        yield {"command": a, "json-protocol": b}


def _backend(fake: FakeUpstream) -> OpenAICompatBackend:
    return OpenAICompatBackend(fake.base_url, model="fake-model", api_key="", max_retries=0, json_schema_mode="off")


@pytest.mark.parametrize(
    ("caps", "levels"),
    [
        (Capabilities(), ["auto"]),  # auto is prompt on every call
        (Capabilities(prefill=True), ["auto", "prompt", "prefill"]),  # auto prefills only a required call
        (Capabilities(json_schema=True), ["auto", "prompt"]),  # auto is constrained
        (Capabilities(prefill=True, json_schema=True), ["auto", "prompt", "prefill"]),  # the embedded model
    ],
)
def test_grid_is_every_dialect_by_every_distinct_level(caps: Capabilities, levels: list[str]) -> None:
    grid = settings_grid(caps)
    assert grid[0] == {"dialect": "json-action", "enforcement": "auto"}  # the default first
    assert sorted(map(str, grid)) == sorted(
        str({"dialect": d, "enforcement": e}) for d in ("json-action", "json-protocol", "command", "smiley") for e in levels
    )


def test_the_default_comes_from_the_base_config() -> None:
    grid = settings_grid(Capabilities(), DEFAULTS.replace(dialect="smiley"))
    assert grid[0] == {"dialect": "smiley", "enforcement": "auto"} and len(grid) == 4


def test_calibration_set_takes_no_held_out_task() -> None:
    names = {i.name for i in ITEMS}
    held_out = {f"task:{t.name}" for t in TASKS if t.held_out}
    assert held_out and names and not names & held_out
    assert [i.name for i in ITEMS][: len(CALIBRATION_SET.bfcl)] == list(CALIBRATION_SET.bfcl)
    # a kind whose every task is held out has no task to calibrate on
    only_held_out = [t for t in TASKS if t.held_out]
    with pytest.raises(UsageError, match="no tuned task"):
        load_items(CalibrationSet(task_kinds=(only_held_out[0].kind,), bfcl=()), tasks=only_held_out)
    with pytest.raises(UsageError, match="no BFCL case"):
        load_items(CalibrationSet(task_kinds=(), bfcl=("simple_python_99999",)))


def _row(dialect: str, correct: int, calls: float = 1.0, *, default: bool = False, n: int = 10) -> ProfileRow:
    from agentfsm.eval.stats import wilson_interval

    low, high = wilson_interval(correct, n)
    return ProfileRow(settings={"dialect": dialect}, cases=n, correct=correct, low=low, high=high,
                      protocol_valid=n, model_calls=calls, seconds=1.0, default=default)


def test_choice_rule() -> None:
    # the best clears the default's interval: chosen
    assert choose([_row("json-action", 2, default=True), _row("command", 10)]).settings == {"dialect": "command"}
    # better, but within the noise of 10 items: the default is kept
    assert choose([_row("json-action", 6, default=True), _row("command", 8)]).default
    # equal accuracy: the fewer model calls (both clear the default)
    rows = [_row("json-action", 0, default=True), _row("smiley", 10, 2.0), _row("command", 10, 1.5)]
    assert choose(rows).settings == {"dialect": "command"}
    # as good as the default with fewer calls, but not clear of it: the default is kept
    assert choose([_row("json-action", 9, default=True), _row("command", 9, 0.5)]).default
    # a setting stopped early is never chosen, even over a default it beat on the items it ran
    stopped = _row("command", 3, n=3)
    assert choose([_row("json-action", 2, default=True), stopped]).default


def test_a_setting_stops_once_it_cannot_clear_the_default() -> None:
    # ten items, the default right on two so far: nine right of ten would still clear it
    assert not hopeless(correct=3, run=4, total=10, default_correct=2)
    # a second wrong item: at best eight of ten, not clear of the default's interval
    assert hopeless(correct=3, run=5, total=10, default_correct=2)
    # a default right on five: only all ten would clear it, and one is already wrong
    assert hopeless(correct=0, run=1, total=10, default_correct=5)


async def _calibrate(fake: FakeUpstream) -> tuple[list[Outcome], list[Setting], list[tuple[Setting, int]]]:
    backend = _backend(fake)
    grid = settings_grid(backend.capabilities)
    stops: list[tuple[Setting, int]] = []
    try:
        outcomes = await run_calibration(backend, ITEMS, grid, on_stop=lambda s, n: stops.append((s, n)))
    finally:
        await backend.aclose()
    return outcomes, grid, stops


def test_each_follower_gets_its_own_dialect(followers: dict[str, FakeUpstream]) -> None:
    for dialect, fake in followers.items():
        outcomes, grid, stops = asyncio.run(_calibrate(fake))
        rows = table(outcomes, grid)
        by = {r.settings["dialect"]: r for r in rows}
        # its own format: every item right; the default (json-action) only the irrelevance cases
        assert (by[dialect].correct, by[dialect].cases) == (len(ITEMS), len(ITEMS))
        assert by["json-action"].default and by["json-action"].correct == 2
        assert choose(rows).settings == {"dialect": dialect, "enforcement": "auto"}
        # the other formats stopped once they could not clear the default
        assert sorted(s["dialect"] for s, _ in stops) == sorted({"json-protocol", "command", "smiley"} - {dialect})
        assert all(by[s["dialect"]].cases == n < len(ITEMS) for s, n in stops)


def _cli(fake: FakeUpstream, model: str, output: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentfsm", "calibrate", "--backend", "openai", "--base-url", fake.base_url,
         "--model", model, "-o", str(output)],
        capture_output=True, text=True, timeout=300,
    )


def test_cli_writes_one_profile_entry_per_model(followers: dict[str, FakeUpstream], tmp_path: Path) -> None:
    output = tmp_path / "profiles" / "upstreams.json"
    # json_schema_mode auto: the backend constrains decoding, so auto is constrained and prompt is its own row
    done = _cli(followers["command"], "cmd", output)
    assert done.returncode == 0, done.stderr
    assert "smiley / prompt: stopped after 4 items" in done.stdout  # it could no longer clear the default
    done = _cli(followers["json-protocol"], "jp", output)
    assert done.returncode == 0, done.stderr
    profile = Profile.from_json(json.loads(output.read_text()))
    assert set(profile.models) == {"openai:cmd", "openai:jp"}
    cmd = profile.for_model("openai:cmd")
    assert cmd.chosen == {"dialect": "command", "enforcement": "prompt"}
    assert cmd.run_config() == DEFAULTS.replace(dialect="command", enforcement="prompt")
    assert cmd.items == tuple(i.name for i in ITEMS) and "bfcl-eval" in cmd.versions and cmd.date
    assert cmd.command.startswith("agentfsm calibrate --backend openai")
    row = cmd.chosen_row()
    assert row is not None and (row.correct, row.cases) == (10, 10) and row.low > 0.7
    # the constrained contract shows json-protocol's action shape, which this follower writes: the
    # default (json-action, auto = constrained) is right everywhere and is kept
    assert profile.for_model("openai:jp").chosen == {"dialect": "json-action", "enforcement": "auto"}
    table_md = output.with_suffix(".md").read_text()
    assert table_md.startswith("# Calibration: openai:jp") and "| json-action | auto | 10 | 100 (72-100) |" in table_md


def test_cli_refuses_a_file_that_is_not_a_profile(tmp_path: Path) -> None:
    output = tmp_path / "p.json"
    output.write_text('{"models": {"x": {"model": "x"}}}')
    done = subprocess.run([sys.executable, "-m", "agentfsm", "calibrate", "-o", str(output)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "is not an agentfsm profile: models.x.chosen" in done.stderr


def test_a_time_limit_leaves_the_cut_item_out_of_every_row(followers: dict[str, FakeUpstream]) -> None:
    backend = _backend(followers["command"])
    grid = settings_grid(backend.capabilities)
    asked: list[int] = []

    def stop() -> bool:  # the limit passes while the second item runs, after two of its settings
        asked.append(1)
        return len(asked) > len(grid) + 2

    async def measure() -> list[Outcome]:
        try:
            return await run_calibration(backend, ITEMS, grid, stop=stop)
        finally:
            await backend.aclose()

    rows = table(asyncio.run(measure()), grid)
    assert len(asked) == len(grid) + 3  # no run started once it said stop
    assert [r.cases for r in rows] == [1] * len(grid)  # the first item only, in every row
    assert choose(rows).default  # one item clears nothing


def test_cli_time_limit_writes_what_ran(followers: dict[str, FakeUpstream], tmp_path: Path) -> None:
    output = tmp_path / "p.json"
    done = subprocess.run(
        [sys.executable, "-m", "agentfsm", "calibrate", "--backend", "openai", "--base-url",
         followers["command"].base_url, "--model", "cmd", "-o", str(output), "--time-limit", "0.001",
         "--vary", "grounding"],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    entry = Profile.from_json(json.loads(output.read_text())).for_model("openai:cmd")
    assert len(entry.items) < len(ITEMS) and all(r.cases == len(entry.items) for r in entry.table)
    assert {r.settings["grounding"] for r in entry.table} == {"auto", "on"}  # --vary grounding: a column
    assert entry.note == f"stopped at the time limit (0.001 s): {len(entry.items)} of the set's {len(ITEMS)} items ran"
    assert f"- note: {entry.note}" in output.with_suffix(".md").read_text()


@pytest.mark.parametrize(
    ("small", "grounding", "consensus"), [(False, ["auto", "on"], ["off", "on"]), (True, ["auto", "off"], ["off", "auto"])]
)
def test_policy_axes_add_the_value_the_default_does_not_amount_to(
    small: bool, grounding: list[str], consensus: list[str]
) -> None:
    caps = Capabilities(small_model=small)
    grid = settings_grid(caps, axes=policy_axes(["grounding", "consensus", "grounding"]))
    # the defaults first: grounding auto, consensus off
    assert grid[0] == {"dialect": "json-action", "enforcement": "auto", "grounding": "auto", "consensus": "off"}
    assert len(grid) == 4 * 1 * 2 * 2
    assert [*dict.fromkeys(s["grounding"] for s in grid)] == grounding
    assert [*dict.fromkeys(s["consensus"] for s in grid)] == consensus
    with pytest.raises(UsageError, match="cannot vary max_steps; the policy choices: grounding, consensus"):
        policy_axes(["max_steps"])
