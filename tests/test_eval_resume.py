"""``eval bfcl --resume``: a stopped eval's partial report read back, and only under the
plan that made it. The CLI's whole path (stopped by an upstream that fails, resumed, the
report equal to an unstopped run's) is in tests/test_sigterm_eval.py."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from agentfsm.backends.scripted import ScriptedBackend
from agentfsm.core.config import RunConfig
from agentfsm.core.errors import UsageError
from agentfsm.eval.report import aggregate, write_report
from agentfsm.eval.resume import plan_key, remaining, resumed
from agentfsm.eval.runner import EvalPlan, load_plan_cases, resolve_specs, run_eval
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
