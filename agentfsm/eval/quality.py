"""``make quality``: the task suite and BFCL's single-turn categories, on one backend, one table.

Run the full table (:data:`FULL`) before each landing of a change to the model-facing
path (contract, dialects, guards, policy, engine, turn, enforcement), and the fast subset
(:data:`FAST`) while iterating. What runs, with the defaults throughout (``json-action``,
enforcement ``auto``):

- the task suite (:mod:`agentfsm.eval.suite_data`): 15 base tasks x 3 English wordings and
  German, Spanish, French; a third of the base tasks, chosen by a committed seed, are
  held out (no change is tuned on them);
- BFCL's seven single-turn categories that ``make quality`` has always run
  (:data:`CATEGORIES`), the first ``limit`` cases of each in file order;
- BFCL's live single-turn categories (:data:`LIVE_CATEGORIES`, those the installed
  ``bfcl-eval`` ships), the first ``live_limit`` cases of each (all where fewer), as a
  separate, untuned group: no change was tuned on them.

The fast subset: 10 cases per BFCL category (live included) and the tuned split's
tasks in English and German. The table is :mod:`agentfsm.eval.quality_table`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from agentfsm.core.backend import Backend, GenerationOptions
from agentfsm.core.errors import UsageError
from agentfsm.eval.bfcl_data import CATEGORIES as BFCL_CATEGORIES
from agentfsm.eval.bfcl_data import BfclCase, bfcl_data_dir, load_cases
from agentfsm.eval.runner import CaseResult, EvalPlan, resolve_specs, run_eval
from agentfsm.eval.suite import SuiteTask, SuiteResult, run_suite_task
from agentfsm.eval.suite_data import LANGUAGES, TASKS

__all__ = [
    "CATEGORIES",
    "FAST",
    "FULL",
    "LIVE_CATEGORIES",
    "QualityPlan",
    "Split",
    "available_live_categories",
    "plan_cases",
    "run_quality",
    "run_tasks",
    "select_tasks",
]

#: the single-turn, non-live BFCL categories (``make quality`` since its first release)
CATEGORIES: tuple[str, ...] = tuple(c for c in BFCL_CATEGORIES if not c.startswith("live_"))
#: BFCL's live single-turn categories (the untuned group)
LIVE_CATEGORIES: tuple[str, ...] = tuple(c for c in BFCL_CATEGORIES if c.startswith("live_"))

Split = Literal["tuned", "held-out"]


def available_live_categories(data_dir: Path | None = None) -> tuple[str, ...]:
    """The live categories whose data file the installed ``bfcl-eval`` ships."""
    root = data_dir or bfcl_data_dir()
    return tuple(c for c in LIVE_CATEGORIES if (root / f"BFCL_v4_{c}.json").is_file())


def select_tasks(
    tasks: Sequence[SuiteTask], split: Split | None = None, languages: Sequence[str] | None = None
) -> tuple[SuiteTask, ...]:
    """The tasks of one split (``None``: both) in the given languages (``None``: all)."""
    if languages is not None:
        unknown = sorted(set(languages) - {t.language for t in tasks})
        if unknown:
            raise UsageError(f"no task in language(s) {', '.join(unknown)}; the suite has {', '.join(LANGUAGES)}")
    return tuple(
        t for t in tasks
        if (split is None or t.split == split) and (languages is None or t.language in languages)
    )


@dataclass(frozen=True)
class QualityPlan:
    """What one quality run measures."""

    categories: tuple[str, ...] = CATEGORIES
    #: the first N cases of each category in :attr:`categories`
    limit: int = 40
    live_categories: tuple[str, ...] = LIVE_CATEGORIES
    #: the first N cases of each live category (all where fewer)
    live_limit: int = 30
    split: Split | None = None
    languages: tuple[str, ...] | None = None
    max_tokens: int = 256

    def tasks(self, suite: Sequence[SuiteTask] = TASKS) -> tuple[SuiteTask, ...]:
        """The suite's tasks this plan runs."""
        return select_tasks(suite, self.split, self.languages)


#: ``make quality``: the whole suite, 40 cases per BFCL category, 30 per live one
FULL = QualityPlan()
#: ``make quality-fast``: 10 cases per BFCL category (live included), the tuned split in English and German
FAST = QualityPlan(limit=10, live_limit=10, split="tuned", languages=("en", "de"))


def plan_cases(plan: QualityPlan, data_dir: Path | None = None) -> list[BfclCase]:
    """The BFCL cases a plan runs, in order: its categories, then its live ones."""
    return [c for cat in plan.categories for c in load_cases(cat, plan.limit, data_dir)] + [
        c for cat in plan.live_categories for c in load_cases(cat, plan.live_limit, data_dir)
    ]


async def run_tasks(
    backend: Backend,
    tasks: Sequence[SuiteTask],
    transcripts_dir: Path | None = None,
    on_result: Callable[[SuiteResult], None] | None = None,
    options: GenerationOptions | None = None,
) -> list[SuiteResult]:
    """Every task, in order (transcripts written as ``TASK.jsonl`` under ``transcripts_dir``)."""
    out: list[SuiteResult] = []
    for task in tasks:
        path = None
        if transcripts_dir is not None:
            transcripts_dir.mkdir(parents=True, exist_ok=True)
            path = transcripts_dir / f"{task.name}.jsonl"
            path.unlink(missing_ok=True)
        result = await run_suite_task(backend, task, options, transcript=path)
        out.append(result)
        if on_result is not None:
            on_result(result)
    return out


async def run_quality(
    backend: Backend,
    tasks: Sequence[SuiteTask],
    cases: Sequence[BfclCase],
    transcripts_dir: Path | None = None,
    on_task: Callable[[SuiteResult], None] | None = None,
    on_case: Callable[[CaseResult], None] | None = None,
    max_tokens: int = 256,
) -> tuple[list[SuiteResult], list[CaseResult]]:
    """The tasks, then the BFCL cases (one deciding turn each), with the defaults."""
    task_results = await run_tasks(backend, tasks, transcripts_dir / "tasks" if transcripts_dir else None, on_task)
    case_results: list[CaseResult] = []
    if cases:
        plan = EvalPlan(
            categories=tuple(dict.fromkeys(c.category for c in cases)),
            specs=resolve_specs(backend, "json-action", "auto", baseline=False),
            transcripts_dir=transcripts_dir / "bfcl" if transcripts_dir else None,
        )
        if plan.transcripts_dir is not None:
            plan.transcripts_dir.mkdir(parents=True, exist_ok=True)
        case_results = await run_eval(
            backend, plan, GenerationOptions(max_tokens=max_tokens), on_result=on_case, cases=cases
        )
    return task_results, case_results
