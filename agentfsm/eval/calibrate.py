"""``agentfsm calibrate``: which settings a model follows best, measured on a short fixed set.

The calibration set (:data:`CALIBRATION_SET`) is a few tasks of the task suite
(:mod:`agentfsm.eval.suite`: tool calls run, answers checked) and a few single-turn BFCL
cases (one deciding turn, scored by the AST checker). It takes none of ``make quality``'s
held-out tasks (:func:`load_items` refuses them) and no BFCL case that ``make quality``
runs: its BFCL cases come after the first 40 of their categories.

Every setting of the grid (:func:`settings_grid`: each value of each axis in :data:`AXES`,
by default every dialect x every enforcement level the backend supports; with
:data:`POLICY_AXES`, the grounding and consensus switches too) runs every item,
item by item with the settings interleaved, so a slow spell of the machine hits all rows
alike. Each row of the table: accuracy with its 95 % Wilson interval, protocol-valid,
mean model calls and seconds per item.

**The choice rule** (:func:`choose`, written into every profile as :data:`RULE`): the best
row is the one with the most right items; among equals, the fewer model calls per item,
then the fewer seconds. The best row replaces the default setting only when its interval
clears the default's (its lower bound above the default's upper bound); otherwise the
default is kept: a difference the set cannot tell from noise changes nothing.

A setting stops early (:func:`hopeless`) once it could not clear the default even with
every remaining item right: the choice is the one running it to the end would make, and
a model that fails a format pays for a few items of it, not for the whole set. Its row
shows the items it ran. A calibration given a time limit stops starting runs when it
passes; the table then holds the items every live setting completed, and the profile says so.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentfsm.core._types import DIALECT_NAMES
from agentfsm.core.backend import Backend, Capabilities, GenerationOptions
from agentfsm.core.config import DEFAULTS, RunConfig
from agentfsm.engine.decisions import switch_on
from agentfsm.core.errors import UsageError
from agentfsm.core.profile import ProfileRow, value_text
from agentfsm.eval.bfcl_data import BfclCase, load_cases
from agentfsm.eval.runner import RunSpec, run_runtime_case
from agentfsm.eval.stats import wilson_interval
from agentfsm.eval.suite import SuiteTask, run_suite_task
from agentfsm.eval.suite_data import TASKS
from agentfsm.core.choice import ToolChoice
from agentfsm.prompt.enforcement import choose_level

__all__ = [
    "AXES",
    "CALIBRATION_SET",
    "DEFAULT_MAX_TOKENS",
    "POLICY_AXES",
    "RULE",
    "Axis",
    "CalibrationSet",
    "Item",
    "Outcome",
    "Setting",
    "choose",
    "default_setting",
    "hopeless",
    "load_items",
    "policy_axes",
    "run_calibration",
    "run_item",
    "settings_grid",
    "table",
]

#: the choice rule, as written into each profile
RULE = (
    "best accuracy; ties to fewer model calls per item, then fewer seconds; the best setting replaces "
    "the default only when its 95 % interval clears the default's (lower bound above the default's upper bound); "
    "a setting stops early once it could not clear the default even with every remaining item right"
)

#: the generation bound per model call of a calibration (``agentfsm calibrate --max-tokens``):
#: a reply that does not follow the format costs at most this
DEFAULT_MAX_TOKENS = 128

#: a setting: run-configuration fields and their values, in axis order
Setting = dict[str, Any]


def _levels(caps: Capabilities) -> tuple[str, ...]:
    """``auto``, then each level the backend supports that ``auto`` does not already
    amount to on every call (a backend that constrains decoding makes ``auto``
    ``constrained``: that row would be run twice)."""
    out = ["auto"]
    for level in ("prompt", "prefill", "constrained"):
        try:
            choose_level(level, caps, ToolChoice.AUTO)
        except UsageError:
            continue  # the backend cannot do it
        if any(choose_level("auto", caps, choice) != level for choice in (ToolChoice.AUTO, ToolChoice.REQUIRED)):
            out.append(level)
    return tuple(out)


@dataclass(frozen=True)
class Axis:
    """One run-configuration field the calibration varies, and its candidate values on a backend."""

    field: str
    values: Callable[[Capabilities], tuple[Any, ...]]


#: the grid, one axis per varied field (a new axis is one more line)
AXES: tuple[Axis, ...] = (
    Axis("dialect", lambda caps: DIALECT_NAMES),
    Axis("enforcement", _levels),
)


def _switch(name: str) -> Axis:
    """The axis of an ``auto | on | off`` field: its default, and the value that amounts
    to the other state on the backend (``auto`` where it does, else ``on`` or ``off``)."""

    def values(caps: Capabilities) -> tuple[str, ...]:
        default: str = getattr(DEFAULTS, name)
        other = next(v for v in ("auto", "on", "off") if switch_on(v, caps) != switch_on(default, caps))
        return (default, other)

    return Axis(name, values)


#: the policy choices of the run configuration a calibration may vary too (``--vary``):
#: each doubles the grid, so the default grid leaves them at their defaults
POLICY_AXES: dict[str, Axis] = {name: _switch(name) for name in ("grounding", "consensus")}


def default_setting(base: RunConfig = DEFAULTS, axes: Sequence[Axis] = AXES) -> Setting:
    """The setting ``base`` already has, on the calibrated axes."""
    return {axis.field: getattr(base, axis.field) for axis in axes}


def policy_axes(names: Sequence[str]) -> tuple[Axis, ...]:
    """:data:`AXES` and the policy axes ``names`` (a UsageError for a name that is none)."""
    unknown = sorted(set(names) - set(POLICY_AXES))
    if unknown:
        raise UsageError(f"cannot vary {', '.join(unknown)}; the policy choices: {', '.join(POLICY_AXES)}")
    return AXES + tuple(POLICY_AXES[n] for n in dict.fromkeys(names))


def settings_grid(caps: Capabilities, base: RunConfig = DEFAULTS, axes: Sequence[Axis] = AXES) -> list[Setting]:
    """Every combination of the axes' values on a backend with ``caps``, the default first."""
    default = default_setting(base, axes)
    choices = [axis.values(caps) for axis in axes]
    grid = [dict(zip(default, combo, strict=True)) for combo in itertools.product(*choices)]
    return [default] + [s for s in grid if s != default]


# -- the calibration set --------------------------------------------------------------


@dataclass(frozen=True)
class CalibrationSet:
    """The items a calibration runs: suite tasks (the first tuned task of each kind named)
    and BFCL cases (by id)."""

    task_kinds: tuple[str, ...]
    bfcl: tuple[str, ...]


#: ten items (BFCL's first, cheap and single-turn, so a failing setting stops early): at
#: ten, a setting right on all clears a default right on up to four, on nine up to two, on
#: eight up to one (Wilson 95 %)
CALIBRATION_SET = CalibrationSet(
    task_kinds=("one call (required)", "one call (auto)"),
    bfcl=(
        "simple_python_40", "irrelevance_40", "simple_python_44", "multiple_44", "simple_python_41",
        "irrelevance_41", "simple_python_45", "multiple_42",
    ),
)


@dataclass(frozen=True)
class Item:
    """One calibration item: a suite task or a BFCL case."""

    name: str
    task: SuiteTask | None = None
    case: BfclCase | None = None


def load_items(
    chosen: CalibrationSet = CALIBRATION_SET, tasks: Sequence[SuiteTask] = TASKS, data_dir: Path | None = None
) -> list[Item]:
    """The set's items, BFCL cases first (a UsageError for a held-out kind or a missing case)."""
    items: list[Item] = []
    by_category: dict[str, dict[str, BfclCase]] = {}
    for case_id in chosen.bfcl:
        category = case_id.rsplit("_", 1)[0]
        if category not in by_category:
            by_category[category] = {c.id: c for c in load_cases(category, data_dir=data_dir)}
        case = by_category[category].get(case_id)
        if case is None:
            raise UsageError(f"no BFCL case {case_id!r} in the installed data")
        items.append(Item(case.id, case=case))
    for kind in chosen.task_kinds:
        # never one of make quality's held-out tasks (eval.suite_data.HELD_OUT_SEED)
        task = next((t for t in tasks if t.kind == kind and not t.held_out), None)
        if task is None:
            raise UsageError(f"the task suite has no tuned task of kind {kind!r}")
        items.append(Item(f"task:{task.name}", task=task))
    return items


# -- running ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """How one item went under one setting."""

    item: str
    setting: Setting
    valid: bool
    protocol_valid: bool
    model_calls: int
    seconds: float


async def run_item(
    backend: Backend,
    item: Item,
    setting: Setting,
    run: RunConfig,
    options: GenerationOptions,
    transcripts: Path | None = None,
) -> Outcome:
    """``item`` under ``run`` (a task through the agent, a case as one deciding turn);
    with ``transcripts``, its transcript is written there."""
    if item.task is not None:
        path = None
        if transcripts is not None:
            transcripts.mkdir(parents=True, exist_ok=True)
            path = transcripts / f"{item.task.name}.{'.'.join(map(value_text, setting.values()))}.jsonl"
            path.unlink(missing_ok=True)
        result = await run_suite_task(backend, item.task, options, transcript=path, config=run)
        return Outcome(item.name, setting, result.valid, result.protocol_valid, result.model_calls, result.seconds)
    assert item.case is not None
    spec = RunSpec(run.dialect, run.enforcement)
    case = await run_runtime_case(backend, item.case, spec, options, run, transcripts)
    return Outcome(item.name, setting, case.valid, case.protocol_valid, case.replies, case.seconds)


def hopeless(correct: int, run: int, total: int, default_correct: int) -> bool:
    """Whether a setting with ``correct`` of ``run`` items right can no longer clear the
    default's interval, even with all ``total - run`` remaining items right (the default's
    upper bound only rises as it gets more right, so ``default_correct`` so far is its best case)."""
    best_low, _ = wilson_interval(correct + total - run, total)
    _, default_high = wilson_interval(default_correct, total)
    return best_low <= default_high


def _matched(item: str, outcomes: Sequence[Outcome], going: Sequence[tuple[int, Setting]]) -> list[tuple[int, Outcome]]:
    """An item's kept ``outcomes``, each with the index of its setting among those still
    ``going`` (a UsageError where they are not one for each)."""
    matched = [(index, [o for o in outcomes if o.setting == setting]) for index, setting in going]
    if len(outcomes) != len(going) or any(len(mine) != 1 for _, mine in matched):
        raise UsageError(f"--resume: the outcomes kept of item {item} are not one for each setting still running")
    return [(index, mine[0]) for index, mine in matched]


async def run_calibration(
    backend: Backend,
    items: Sequence[Item],
    grid: Sequence[Setting],
    *,
    base: RunConfig = DEFAULTS,
    options: GenerationOptions | None = None,
    on_outcome: Callable[[Outcome], None] | None = None,
    on_stop: Callable[[Setting, int], None] | None = None,
    transcripts: Path | None = None,
    stop: Callable[[], bool] | None = None,
    on_item: Callable[[Sequence[Outcome]], None] | None = None,
    done: Sequence[Outcome] = (),
) -> list[Outcome]:
    """Every item under every setting of ``grid`` (each ``base`` with the setting; the first
    is the default), item by item with the settings interleaved. A setting stops once
    :func:`hopeless` (``on_stop`` is told it, and how many items it ran): it can no longer
    be chosen, so the choice is the one running it to the end would make.

    With ``stop`` (asked before each run: a time limit), no run starts once it says so;
    the item it cut is left out of every row, so the rows still compare the same items.
    ``on_item`` is given each item's outcomes once it ran under every setting still going
    (what a calibration stopped by a signal or the upstream keeps). The items ``done``
    holds outcomes of (a stopped calibration's, resumed) are not run again: their outcomes
    count as if they had just ended (``on_item`` and ``on_stop`` are told them too), so a
    setting stops where it would have; one that does not hold an outcome for each setting
    still going is a UsageError."""
    options = options or GenerationOptions(max_tokens=DEFAULT_MAX_TOKENS)
    runs = [(dict(setting), base.replace(**setting)) for setting in grid]  # checked before any model call
    right = [0] * len(runs)
    counted = [0] * len(runs)
    stopped = [False] * len(runs)
    out: list[Outcome] = []
    kept: dict[str, list[Outcome]] = {}
    for outcome in done:
        kept.setdefault(outcome.item, []).append(outcome)
    done_names = set(kept)
    for item in items:
        going = [(index, setting) for index, (setting, _) in enumerate(runs) if not stopped[index]]
        ran = _matched(item.name, kept.pop(item.name), going) if item.name in kept else []
        for index, (setting, run) in enumerate(runs):
            if stopped[index] or item.name in done_names:
                continue
            if stop is not None and stop():
                return out
            outcome = await run_item(backend, item, setting, run, options, transcripts)
            ran.append((index, outcome))
            if on_outcome is not None:
                on_outcome(outcome)
        for index, outcome in ran:
            right[index] += outcome.valid
            counted[index] += 1
            out.append(outcome)
        if on_item is not None:
            on_item([outcome for _, outcome in ran])
        for index in range(1, len(runs)):
            if not stopped[index] and hopeless(right[index], counted[index], len(items), right[0]):
                stopped[index] = True
                if on_stop is not None:
                    on_stop(runs[index][0], counted[index])
    return out


# -- the table and the choice -----------------------------------------------------------


def table(outcomes: Sequence[Outcome], grid: Sequence[Setting]) -> list[ProfileRow]:
    """One row per setting of ``grid`` (in its order; the first is the default)."""
    rows: list[ProfileRow] = []
    for index, setting in enumerate(grid):
        mine = [o for o in outcomes if o.setting == setting]
        n = len(mine)
        correct = sum(o.valid for o in mine)
        low, high = wilson_interval(correct, n)
        rows.append(ProfileRow(
            settings=dict(setting),
            cases=n,
            correct=correct,
            low=round(low, 4),
            high=round(high, 4),
            protocol_valid=sum(o.protocol_valid for o in mine),
            model_calls=round(sum(o.model_calls for o in mine) / n, 3) if n else 0.0,
            seconds=round(sum(o.seconds for o in mine) / n, 3) if n else 0.0,
            default=index == 0,
        ))
    return rows


def choose(rows: Sequence[ProfileRow]) -> ProfileRow:
    """The row :data:`RULE` picks: the best, where its interval clears the default's, else
    the default."""
    if not rows:
        raise UsageError("nothing was measured: no setting to choose from")
    default = next((r for r in rows if r.default), rows[0])
    whole = [r for r in rows if r.cases == default.cases]  # a setting stopped early cannot be chosen
    best = min(whole, key=lambda r: (-r.correct, r.model_calls, r.seconds, not r.default))
    return best if best.low > default.high else default
