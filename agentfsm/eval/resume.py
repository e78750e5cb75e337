"""Resuming a stopped eval or calibration: the runs its partial report kept, read back.

``eval bfcl``, ``eval quality`` and ``calibrate`` stopped part way (Ctrl-C, SIGTERM, an
upstream gone) write the runs that ended to a partial report (:mod:`agentfsm.cli._partial`):
``STEM.partial.json``, ``quality.partial.json``, ``profile.partial.json``. Its JSON holds
the plan that made them (``meta.plan``: a *plan key*, everything that decides a run's
result: :func:`plan_key`, :func:`quality_key`, :func:`calibration_key`) and the runs
themselves (``cases``; ``tasks`` too for the quality table; ``outcomes`` for a
calibration). ``--resume`` reads them back (:func:`read_partial`, then the command's own
reader: :func:`resumed`, :func:`resumed_quality`, :func:`resumed_calibration`), runs only
the others, and reports all of them, as if the run had not stopped. A partial report made
by another plan is refused, naming what differs: its runs would not be those this command
would have scored.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any, TypeVar

from agentfsm.core.errors import UsageError
from agentfsm.eval.calibrate import Item, Outcome, Setting
from agentfsm.eval.quality import QualityPlan
from agentfsm.eval.runner import CaseResult, EvalPlan
from agentfsm.eval.runtime_text import CallsSpent
from agentfsm.eval.suite import SuiteResult, SuiteTask

__all__ = [
    "calibration_key",
    "outcome_json",
    "plan_key",
    "quality_key",
    "read_partial",
    "remaining",
    "resumed",
    "resumed_calibration",
    "resumed_quality",
    "task_json",
]

T = TypeVar("T")

#: the fields of a case that its JSON (CaseResult.to_json) writes under their own names,
#: and read back as written; the id is written as ``id``, the call shares as a dict
_SAME = tuple(f.name for f in fields(CaseResult) if f.name not in ("case_id", "spent"))
#: the same of a task's result (:func:`task_json`): the task is written by its name
_TASK_SAME = tuple(f.name for f in fields(SuiteResult) if f.name not in ("task", "calls", "spent"))
_SPENT = tuple(f.name for f in fields(CallsSpent))


def _as_json(key: Mapping[str, Any]) -> dict[str, Any]:
    """``key`` as the partial report holds it (tuples as lists, paths as text)."""
    parsed: dict[str, Any] = json.loads(json.dumps(key, default=str))
    return parsed


def read_partial(path: Path, key: Mapping[str, Any]) -> dict[str, Any]:
    """The partial report at ``path``, made by the plan ``key``; one that is not there,
    not readable or of another plan is a :class:`UsageError` saying so."""
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(
            f"--resume: no partial report at {path} (a run stopped part way writes it; without --resume this one starts over)"
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"--resume: cannot read {path}: {exc}") from None
    meta = report.get("meta") if isinstance(report, dict) else None
    kept = meta.get("plan") if isinstance(meta, dict) else None
    if not isinstance(kept, dict):
        raise UsageError(f"--resume: {path} does not say which plan made it (not a partial report of this version)")
    key = _as_json(key)
    differs = sorted(k for k in key.keys() | kept.keys() if key.get(k) != kept.get(k))
    if differs:
        shown = "; ".join(f"{k}: {kept.get(k)!r} there, {key.get(k)!r} here" for k in differs)
        raise UsageError(f"--resume: {path} was made by another plan ({shown})")
    return dict(report)


def _read_back(path: Path, report: Mapping[str, Any], field: str, read: Callable[[Any], T]) -> list[T]:
    """Each record of the report's ``field``, read back (a UsageError for one that cannot be)."""
    try:
        records = report.get(field, [])
        if not isinstance(records, list):
            raise TypeError(f"{field} is not a list")
        return [read(r) for r in records]
    except (TypeError, ValueError, KeyError) as exc:
        raise UsageError(f"--resume: {path} has a run that cannot be read back ({exc!r})") from None


def _in_order(path: Path, done: Sequence[str], planned: Sequence[str], what: str) -> None:
    """The runs ``done`` are the first of those ``planned`` (runs end in the plan's order)."""
    if list(done) != list(planned[: len(done)]):
        raise UsageError(f"--resume: {path} holds {what} this plan does not run first")


# -- eval bfcl ----------------------------------------------------------------------------


def plan_key(plan: EvalPlan, backend: str, model: str | None, max_tokens: int, bfcl_eval: str | None) -> dict[str, Any]:
    """What decides ``eval bfcl``'s results: a partial report is resumed only under the same
    (as JSON: what the report holds)."""
    return _as_json({
        "categories": list(plan.categories),
        "limit": plan.limit,
        "runs": [spec.label for spec in plan.specs],
        "max_tokens": max_tokens,
        "backend": backend,
        "model": model,
        "config": plan.config.as_dict(),
        "data_dir": None if plan.data_dir is None else str(plan.data_dir),
        "bfcl_eval": bfcl_eval,
    })


def _case(data: Any) -> CaseResult:
    if not isinstance(data, dict) or not isinstance(data.get("id"), str):
        raise ValueError("a case is not an object with an id")
    spent = data.get("spent") or {}
    return CaseResult(
        case_id=data["id"],
        spent=CallsSpent(**{k: int(spent.get(k, 0)) for k in _SPENT}),
        **{k: data[k] for k in _SAME},
    )


def resumed(path: Path, key: dict[str, Any], runs: int) -> list[CaseResult]:
    """The cases the partial report at ``path`` kept, made by the plan ``key`` with
    ``runs`` runs a case (see :func:`read_partial`)."""
    cases = _read_back(path, read_partial(path, key), "cases", _case)
    if len(cases) % runs:
        raise UsageError(f"--resume: {path} holds {len(cases)} case results, not whole cases of {runs} runs each")
    return cases


def remaining(cases: Sequence[Any], done: Sequence[CaseResult]) -> list[Any]:
    """``cases`` (in the plan's order) without those ``done`` holds."""
    ids = {(r.category, r.case_id) for r in done}
    return [c for c in cases if (c.category, c.id) not in ids]


# -- eval quality -------------------------------------------------------------------------


def quality_key(
    plan: QualityPlan, tasks: bool, backend: str, model: str | None, data_dir: Path | None, bfcl_eval: str | None
) -> dict[str, Any]:
    """What decides ``eval quality``'s results (``tasks``: whether it runs the task suite)."""
    return _as_json({**asdict(plan), "tasks": tasks, "backend": backend, "model": model,
                     "data_dir": data_dir, "bfcl_eval": bfcl_eval})


def task_json(result: SuiteResult) -> dict[str, Any]:
    """A task's result as the partial report holds it (:func:`resumed_quality` reads it)."""
    return {"task": result.task.name, **{k: getattr(result, k) for k in _TASK_SAME},
            "calls": [[name, args] for name, args in result.calls], "spent": asdict(result.spent)}


def resumed_quality(
    path: Path, key: dict[str, Any], tasks: Sequence[SuiteTask], cases: Sequence[Any]
) -> tuple[list[SuiteResult], list[CaseResult]]:
    """The tasks and BFCL cases the partial report at ``path`` kept, made by the plan
    ``key`` that runs ``tasks`` and ``cases`` (each kept one the first of them, in order)."""
    report = read_partial(path, key)
    by_name = {t.name: t for t in tasks}

    def task(data: Any) -> SuiteResult:
        return SuiteResult(
            task=by_name[data["task"]],
            calls=tuple((str(name), dict(args)) for name, args in data["calls"]),
            spent=CallsSpent(**{k: int(data["spent"][k]) for k in _SPENT}),
            **{k: data[k] for k in _TASK_SAME},
        )

    done_tasks = _read_back(path, report, "tasks", task)
    done_cases = _read_back(path, report, "cases", _case)
    _in_order(path, [r.task.name for r in done_tasks], [t.name for t in tasks], "tasks")
    _in_order(path, [f"{r.category}/{r.case_id}" for r in done_cases], [f"{c.category}/{c.id}" for c in cases], "cases")
    return done_tasks, done_cases


# -- calibrate ----------------------------------------------------------------------------


def calibration_key(
    items: Sequence[Item], grid: Sequence[Setting], base: Mapping[str, Any], max_tokens: int,
    backend: str, model: str | None, context_tokens: int | None, time_limit: float | None,
) -> dict[str, Any]:
    """What decides a calibration's outcomes (``base``: its run settings, as a dict)."""
    return _as_json({"items": [i.name for i in items], "grid": list(grid), "config": dict(base),
                     "max_tokens": max_tokens, "backend": backend, "model": model,
                     "context_tokens": context_tokens, "time_limit": time_limit})


def outcome_json(outcome: Outcome) -> dict[str, Any]:
    """An outcome as the partial profile holds it (:func:`resumed_calibration` reads it)."""
    return _as_json(asdict(outcome))


def resumed_calibration(
    path: Path, key: dict[str, Any], items: Sequence[Item], grid: Sequence[Setting]
) -> tuple[list[Outcome], float]:
    """The outcomes of the whole items the partial profile at ``path`` kept, made by the plan
    ``key`` over ``items`` and ``grid`` (each kept item the first of them, in order), and
    the seconds the calibration had run."""
    report = read_partial(path, key)
    settings = [(_as_json(s), s) for s in grid]

    def outcome(data: Any) -> Outcome:
        setting = next((s for written, s in settings if written == data["setting"]), None)  # the grid's own
        if setting is None:
            raise ValueError(f"a setting this plan does not run: {data['setting']!r}")
        return Outcome(setting=setting, **{k: data[k] for k in ("item", "valid", "protocol_valid", "model_calls", "seconds")})

    outcomes = _read_back(path, report, "outcomes", outcome)
    _in_order(path, list(dict.fromkeys(o.item for o in outcomes)), [i.name for i in items], "items")
    seconds = report["meta"].get("seconds", 0.0)
    return outcomes, float(seconds) if isinstance(seconds, int | float) else 0.0
