"""Resuming a stopped ``eval bfcl``: the cases its partial report kept, read back.

An ``eval bfcl`` stopped part way (Ctrl-C, SIGTERM, an upstream gone) writes its whole
cases to ``STEM.partial.json`` (:mod:`agentfsm.cli._partial`), with the plan that made
them (:func:`plan_key`: the categories, limit, runs, ``max_tokens``, backend, model, run
settings and BFCL data: everything that decides a case's result). ``--resume`` reads them
back (:func:`resumed`), runs only the cases after them, and reports all of them, as if
the run had not stopped. A partial report made by another plan is refused, naming what
differs: its cases would not be those this command would have scored.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from agentfsm.core.errors import UsageError
from agentfsm.eval.runner import CaseResult, EvalPlan
from agentfsm.eval.runtime_text import CallsSpent

__all__ = ["plan_key", "remaining", "resumed"]

#: the fields of a case that its JSON (CaseResult.to_json) writes under their own names,
#: and read back as written; the id is written as ``id``, the call shares as a dict
_SAME = tuple(f.name for f in fields(CaseResult) if f.name not in ("case_id", "spent"))


def plan_key(plan: EvalPlan, backend: str, model: str | None, max_tokens: int, bfcl_eval: str | None) -> dict[str, Any]:
    """What decides the cases' results: a partial report is resumed only under the same
    (as JSON: what the report holds)."""
    key = {
        "categories": list(plan.categories),
        "limit": plan.limit,
        "runs": [spec.label for spec in plan.specs],
        "max_tokens": max_tokens,
        "backend": backend,
        "model": model,
        "config": plan.config.as_dict(),
        "data_dir": None if plan.data_dir is None else str(plan.data_dir),
        "bfcl_eval": bfcl_eval,
    }
    parsed: dict[str, Any] = json.loads(json.dumps(key, default=str))
    return parsed


def _case(data: Any) -> CaseResult:
    if not isinstance(data, dict) or not isinstance(data.get("id"), str):
        raise ValueError("a case is not an object with an id")
    spent = data.get("spent") or {}
    return CaseResult(
        case_id=data["id"],
        spent=CallsSpent(**{k: int(spent.get(k, 0)) for k in ("extensions", "candidates", "corrections")}),
        **{k: data[k] for k in _SAME},
    )


def resumed(path: Path, key: dict[str, Any], runs: int) -> list[CaseResult]:
    """The cases the partial report at ``path`` kept, made by the plan ``key`` with
    ``runs`` runs a case; a report that is not there, not readable or of another plan is
    a :class:`UsageError` saying so."""
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"--resume: no partial report at {path} (an eval stopped part way writes it)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"--resume: cannot read {path}: {exc}") from None
    meta = report.get("meta") if isinstance(report, dict) else None
    kept = meta.get("plan") if isinstance(meta, dict) else None
    if not isinstance(kept, dict):
        raise UsageError(f"--resume: {path} does not say which plan made it (not a partial report of this version)")
    differs = sorted(k for k in key.keys() | kept.keys() if key.get(k) != kept.get(k))
    if differs:
        shown = "; ".join(f"{k}: {kept.get(k)!r} there, {key.get(k)!r} here" for k in differs)
        raise UsageError(f"--resume: {path} was made by another plan ({shown})")
    try:
        cases = [_case(c) for c in report.get("cases", [])]
    except (TypeError, ValueError, KeyError) as exc:
        raise UsageError(f"--resume: {path} has a case that cannot be read back ({exc!r})") from None
    if len(cases) % runs:
        raise UsageError(f"--resume: {path} holds {len(cases)} case results, not whole cases of {runs} runs each")
    return cases


def remaining(cases: Sequence[Any], done: Sequence[CaseResult]) -> list[Any]:
    """``cases`` (in the plan's order) without those ``done`` holds."""
    ids = {(r.category, r.case_id) for r in done}
    return [c for c in cases if (c.category, c.id) not in ids]
