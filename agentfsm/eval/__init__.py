"""Benchmark harness: the Berkeley Function Calling Leaderboard through the agentfsm runtime.

- :mod:`~agentfsm.eval.bfcl_data`: cases from the installed ``bfcl-eval`` data files;
- :mod:`~agentfsm.eval.checker`: a faithful port of BFCL's AST checker;
- :mod:`~agentfsm.eval.baseline`: BFCL's own prompt mode (system prompt, decoder);
- :mod:`~agentfsm.eval.runner`: one deciding turn per case, baseline beside it;
- :mod:`~agentfsm.eval.report` and :mod:`~agentfsm.eval.chart`: tables, JSON, Markdown, PNG;
- :mod:`~agentfsm.eval.quality` and :mod:`~agentfsm.eval.quality_table`: ``make quality``,
  the task suite (:mod:`~agentfsm.eval.suite_data`, with its held-out split: no change is
  tuned on it) and BFCL's single-turn categories in one table with 95 % intervals.

The data and checker modules do not import the runtime; the runner and report names
are loaded on first use, so scoring works on its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentfsm.core._lazy import lazy_exports

from agentfsm.eval.bfcl_data import BfclCase, load_cases, parse_categories
from agentfsm.eval.checker import ast_checker, check_case

if TYPE_CHECKING:
    from agentfsm.eval.report import ReportRow, aggregate, render_markdown, write_report
    from agentfsm.eval.runner import BASELINE, CaseResult, EvalPlan, RunSpec, resolve_specs, run_eval

__all__ = [
    "BASELINE",
    "BfclCase",
    "CaseResult",
    "EvalPlan",
    "ReportRow",
    "RunSpec",
    "aggregate",
    "ast_checker",
    "check_case",
    "load_cases",
    "parse_categories",
    "render_markdown",
    "resolve_specs",
    "run_eval",
    "write_report",
]

_LAZY = {
    "ReportRow": "agentfsm.eval.report",
    "aggregate": "agentfsm.eval.report",
    "render_markdown": "agentfsm.eval.report",
    "write_report": "agentfsm.eval.report",
    "BASELINE": "agentfsm.eval.runner",
    "CaseResult": "agentfsm.eval.runner",
    "EvalPlan": "agentfsm.eval.runner",
    "RunSpec": "agentfsm.eval.runner",
    "resolve_specs": "agentfsm.eval.runner",
    "run_eval": "agentfsm.eval.runner",
}


__getattr__ = lazy_exports(__name__, _LAZY, globals())
