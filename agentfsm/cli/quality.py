"""``agentfsm eval quality``: the task suite and BFCL's single-turn categories, one table.

A part of the ``eval`` group (:mod:`agentfsm.cli.eval` registers it): the table takes half
an hour, so a run stopped part way keeps what ran (``quality.partial.md`` and ``.json``)
and ``--resume`` goes on from it (:mod:`agentfsm.eval.resume`).
"""

from __future__ import annotations

import asyncio
import json
import shlex
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer

from agentfsm.cli._common import ApiKeyOpt, BackendOpt, BaseUrlOpt, ModelOpt, make_backend
from agentfsm.cli._partial import Partial, partial_path, remove_partials, starting, stopped_part_way, writable_outputs
from agentfsm.cli._signals import Stop, sigterm_as_interrupt
from agentfsm.cli.eval import Count, DataDirOpt, bfcl_version, run_and_close
from agentfsm.core.errors import AgentFSMError, UsageError

if TYPE_CHECKING:
    from agentfsm.eval.quality import Split
    from agentfsm.eval.runner import CaseResult
    from agentfsm.eval.suite import SuiteResult

__all__ = ["quality"]

SplitOpt = Annotated[
    str | None,
    typer.Option("--split", help="The task suite's split to run: 'tuned', 'held-out' or 'all' (default: all; --fast: tuned)."),
]


def quality(
    categories: Annotated[
        str, typer.Option("--categories", help="Comma list of BFCL categories, or 'none' (default: the seven single-turn ones).")
    ] = "default",
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="First N cases of each BFCL category (default 40; --fast 10).")] = None,
    live_categories: Annotated[
        str,
        typer.Option("--live-categories", help="Comma list of live BFCL categories (the untuned group), or 'none' "
                     "(default: every live single-turn category the installed bfcl-eval ships)."),
    ] = "default",
    live_limit: Annotated[
        int | None, typer.Option("--live-limit", min=1, help="First N cases of each live category (default 30; --fast 10).")
    ] = None,
    tasks: Annotated[bool, typer.Option("--tasks/--no-tasks", help="Run the task suite.")] = True,
    split: SplitOpt = None,
    languages: Annotated[
        str | None, typer.Option("--languages", help="Comma list of the suite's languages to run: en, de, es, fr (default: all).")
    ] = None,
    fast: Annotated[
        bool,
        typer.Option("--fast", help="The fast subset for iteration: --limit 10 --live-limit 10 --split tuned "
                     "--languages en,de (options given as well win); writes runs/quality-fast.md by default."),
    ] = False,
    output: Annotated[
        Path | None,
        typer.Option("-o", "--output", help="Markdown report path (default bench/results/quality.md). Stopped part way "
                     "(Ctrl-C, SIGTERM, the upstream gone), the runs done go to PATH with .partial before .md (and .json), "
                     "marked PARTIAL; a complete run removes them."),
    ] = None,
    resume: Annotated[
        bool,
        typer.Option("--resume", help="Go on from the runs a stopped run of the same plan (categories, limits, tasks, "
                     "split, languages, backend, model) kept beside the report (with .partial before .md, and .json): "
                     "they are kept, the others run, and the table holds all."),
    ] = False,
    transcripts: Annotated[
        Path | None,
        typer.Option("--transcripts", help="Write one transcript per task (DIR/tasks/) and BFCL case (DIR/bfcl/) into "
                     "this directory (agentfsm replay reads them)."),
    ] = None,
    data_dir: DataDirOpt = None,
    backend: BackendOpt = "local",
    base_url: BaseUrlOpt = None,
    model: ModelOpt = None,
    api_key: ApiKeyOpt = None,
) -> None:
    """The quality gate of the model-facing path: the task suite and BFCL's single-turn categories.

    Prints one table (per row: cases, accuracy with its 95 % interval, protocol-valid,
    model calls and seconds per case, answers carrying runtime text, answers that repeat
    the request; tuned and held-out side by side) and writes it, with date, machine and
    command, to the Markdown report. Stopped part way (Ctrl-C, SIGTERM, an upstream
    that fails), the runs done so far are written beside it (quality.partial.md and
    .json), their first line PARTIAL: n of N runs and why; the report itself is left as
    it was. The same command with --resume goes on from them.
    """
    from rich.console import Console

    from agentfsm.eval.bfcl_data import parse_categories
    from agentfsm.eval.host import machine_description, now_iso
    from agentfsm.eval.quality import CATEGORIES, FAST, FULL, available_live_categories, plan_cases, run_quality
    from agentfsm.eval.quality_table import build_rows, render_markdown, render_table
    from agentfsm.eval.resume import quality_key, remaining, resumed_quality, task_json
    from agentfsm.eval.suite_data import HELD_OUT_SEED
    from agentfsm.runtime.files import write_whole

    console = Console(width=200) if not Console().is_terminal else Console()
    base = FAST if fast else FULL
    path = output or (Path("runs/quality-fast.md") if fast else Path("bench/results/quality.md"))
    partial_md = partial_path(path, (".md",))
    partial_json = (partial_md.with_suffix(".json") if partial_md.suffix == ".md"
                    else partial_md.with_name(partial_md.name + ".json"))
    stop, count = Stop(), Count()
    task_results: list[SuiteResult] = []
    key: dict[str, Any] = {}

    def meta() -> dict[str, Any]:
        return {
            "command": "agentfsm " + " ".join(shlex.quote(a) for a in sys.argv[1:]),
            "date": now_iso(),
            "backend": model_backend.name,
            "machine": machine_description(),
            "bfcl_eval": bfcl_version(),
            "BFCL cases": f"first {plan.limit} of each category, first {plan.live_limit} of each live one",
            "tasks": f"{len(todo)} (split: {plan.split or 'both'}; languages: {', '.join(plan.languages or ('all',))}; "
                     f"held-out seed {HELD_OUT_SEED})",
        }

    def write(partial: Partial | None = None) -> list[Path]:
        """The runs done as the report (printed too), or as a partial one beside it, with
        its runs as JSON (what --resume reads)."""
        rows = build_rows(task_results, count.results, live=set(plan.live_categories))
        head = {"partial": partial.title} if partial is not None else {}
        to = path if partial is None else partial_md
        if partial is None:
            console.print(render_table(rows))
        to.parent.mkdir(parents=True, exist_ok=True)
        written = []
        if partial is not None:
            runs = {"tasks": [task_json(r) for r in task_results], "cases": [r.to_json() for r in count.results]}
            write_whole(partial_json, json.dumps({"meta": {**head, **meta(), "plan": key}, **runs}, indent=1) + "\n")
            written.append(partial_json)
        write_whole(to, render_markdown(rows, {**head, **meta()}, task_results, count.results))
        return [*written, to]

    try:
        if split not in (None, "tuned", "held-out", "all"):
            raise UsageError(f"--split must be 'tuned', 'held-out' or 'all', not {split!r}")
        plan = replace(
            base,
            categories=() if categories == "none" else CATEGORIES if categories == "default" else parse_categories(categories),
            limit=limit or base.limit,
            live_categories=(() if live_categories == "none" else available_live_categories(data_dir)
                             if live_categories == "default" else parse_categories(live_categories)),
            live_limit=live_limit or base.live_limit,
            split=base.split if split is None else None if split == "all" else cast("Split", split),  # checked above
            languages=tuple(x.strip() for x in languages.split(",") if x.strip()) if languages else base.languages,
        )
        writable_outputs(f"-o {path}", path)
        todo = plan.tasks() if tasks else ()
        cases = plan_cases(plan, data_dir)
        model_backend = make_backend(backend, base_url, model, api_key)
        key = quality_key(plan, tasks, model_backend.name, model, data_dir, bfcl_version())
        if resume:  # the runs a stopped table kept, under the same plan only
            task_results[:], count.results = resumed_quality(partial_json, key, todo, cases)
        count.total, count.done = len(todo) + len(cases), len(task_results) + len(count.results)
        right = sum(r.valid for r in task_results) + sum(r.valid for r in count.results)
        starting(partial_json, resume, console, f"{count.done} of {count.total} runs done, {right} right")

        def progress(valid: bool, line: str) -> None:
            nonlocal right
            count.done, right = count.done + 1, right + valid
            console.print(f"[{count.done}/{count.total}, {right} right] {line}", highlight=False, markup=False)

        def on_task(r: SuiteResult) -> None:
            task_results.append(r)
            mark = "ok" if r.valid else f"x ({r.error or r.why})"
            calls = ", ".join(f"{n}{a}" for n, a in r.calls) or "no call"
            progress(r.valid, f"task {r.task.name}: {mark} [{calls}] -> {r.answer[:80]!r} ({r.seconds:.1f} s)")

        def on_case(r: CaseResult) -> None:
            count.results.append(r)
            progress(r.valid, f"{r.case_id}: {'ok' if r.valid else 'x'} ({r.seconds:.1f} s)")

        with sigterm_as_interrupt(stop):  # SIGTERM (a scheduler's time limit) as Ctrl-C
            asyncio.run(run_and_close(
                model_backend, run_quality(model_backend, todo[len(task_results):], remaining(cases, count.results),
                                           transcripts, on_task, on_case, plan.max_tokens)
            ))
    except (AgentFSMError, KeyboardInterrupt) as exc:  # the runs done are kept, marked partial
        raise stopped_part_way(exc, stop, count.done, count.total, write, str(path)) from None
    console.print(f"wrote {write()[0]}")
    said = remove_partials([partial_json, partial_md], str(path))  # an earlier stopped run's
    if said is not None:
        console.print(said, highlight=False, markup=False, soft_wrap=True)

