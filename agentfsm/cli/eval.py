"""``agentfsm eval bfcl``: BFCL cases through the runtime, beside BFCL's own prompt mode."""

from __future__ import annotations

import asyncio
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentfsm.cli._common import ApiKeyOpt, BackendOpt, BaseUrlOpt, ModelOpt, make_backend
from agentfsm.cli._options import config_options
from agentfsm.core.config import DEFAULTS, RunConfig
from agentfsm.core.errors import AgentFSMError

if TYPE_CHECKING:
    from rich.console import Console

    from agentfsm.core.backend import Backend, GenerationOptions
    from agentfsm.eval.bfcl_data import BfclCase
    from agentfsm.eval.runner import CaseResult, EvalPlan
    from agentfsm.eval.suite import SuiteResult

__all__ = ["bfcl", "eval_app", "quality", "register"]

eval_app = typer.Typer(name="eval", help="Benchmarks through the agentfsm runtime.", no_args_is_help=True)

CategoriesOpt = Annotated[
    str,
    typer.Option(
        "--categories",
        help="Comma list: simple_python, simple_java, simple_javascript, multiple, parallel, parallel_multiple, "
        "irrelevance, live_* ... or 'all' "
        "(simple_python, multiple, parallel, irrelevance).",
    ),
]
LimitOpt = Annotated[int | None, typer.Option("--limit", min=1, help="First N cases of each category.")]
DialectsOpt = Annotated[str, typer.Option("--dialects", help="'all' or a comma list of dialects.")]
LevelsOpt = Annotated[
    str, typer.Option("--enforcement", help="'all' or a comma list of auto, prompt, prefill, constrained.")
]
OutputOpt = Annotated[
    Path, typer.Option("-o", "--output", help="Report path stem: writes STEM.json, STEM.md and STEM.png.")
]
BaselineOpt = Annotated[bool, typer.Option("--baseline/--no-baseline", help="Add BFCL's prompt-mode row.")]
MaxTokensOpt = Annotated[int, typer.Option("--max-tokens", min=16, help="Generation bound per model call.")]
DataDirOpt = Annotated[
    Path | None, typer.Option("--data-dir", help="BFCL data folder (default: the installed bfcl-eval package).")
]
TranscriptsOpt = Annotated[
    Path | None,
    typer.Option("--transcripts", help="Write one transcript per case and row into this directory (agentfsm replay reads them)."),
]


def _bfcl_version() -> str | None:
    from importlib import metadata

    try:
        return metadata.version("bfcl-eval")
    except metadata.PackageNotFoundError:
        return None


def _execute(backend: Backend, plan: EvalPlan, options: GenerationOptions, console: Console) -> list[CaseResult]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from agentfsm.eval.runner import load_plan_cases

    cases = load_plan_cases(plan)
    total = len(cases) * len(plan.specs)
    right = 0
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[last]}"),
        console=console,
        transient=False,
    ) as progress:
        task = progress.add_task("BFCL", total=total, last="")

        def on_result(result: CaseResult) -> None:
            nonlocal right
            right += result.valid
            mark = "[green]ok[/]" if result.valid else "[red]x[/]"
            last = f"{result.case_id} {result.dialect}/{result.enforcement} {mark}"
            progress.update(task, advance=1, last=last)
            if not console.is_terminal:  # a log gets one line per case instead of a live bar
                done = int(progress.tasks[0].completed)
                console.print(f"[{done}/{total}] {last} ({result.seconds:.1f} s)", highlight=False)

        return asyncio.run(_run_and_close(backend, plan, options, on_result, cases))


async def _run_and_close(
    backend: Backend,
    plan: EvalPlan,
    options: GenerationOptions,
    on_result: Callable[[CaseResult], None],
    cases: list[BfclCase],
) -> list[CaseResult]:
    """Run the eval, then close the backend's async pool on the loop that opened it."""
    from agentfsm.eval.runner import run_eval

    try:
        return await run_eval(backend, plan, options, on_result=on_result, cases=cases)
    finally:
        aclose = getattr(backend, "aclose", None)
        if aclose is not None:
            await aclose()
        close = getattr(backend, "close", None)
        if close is not None:
            close()


#: --dialects and --enforcement are lists here (one row each); BFCL's tool_choice is auto,
#: its parallel categories need parallel calls, and each case is one deciding turn
@config_options(exclude=("dialect", "enforcement", "tool_choice", "parallel", "max_steps", "result_max_chars"))
def bfcl(
    categories: CategoriesOpt = "simple_python",
    limit: LimitOpt = None,
    dialects: DialectsOpt = "json-action",
    enforcement: LevelsOpt = "auto",
    backend: BackendOpt = "local",
    base_url: BaseUrlOpt = None,
    model: ModelOpt = None,
    api_key: ApiKeyOpt = None,
    output: OutputOpt = Path("runs/eval/bfcl"),
    baseline: BaselineOpt = True,
    max_tokens: MaxTokensOpt = 256,
    data_dir: DataDirOpt = None,
    transcripts: TranscriptsOpt = None,
    config: RunConfig = DEFAULTS,
) -> None:
    """Run Berkeley Function Calling Leaderboard cases through the runtime and score them.

    Each case is one deciding turn; the calls are scored with BFCL's AST checker
    rules (irrelevance: any call is wrong). A baseline row runs BFCL's own prompt
    mode on the same backend and cases. Writes a JSON and a Markdown report and a
    chart of accuracy by dialect x enforcement level.
    """
    from rich.console import Console

    from agentfsm.core.backend import GenerationOptions
    from agentfsm.eval.bfcl_data import parse_categories
    from agentfsm.eval.host import machine_description, now_iso
    from agentfsm.eval.report import aggregate, render_table, write_report
    from agentfsm.eval.runner import EvalPlan, resolve_specs

    console = Console()
    if not console.is_terminal:
        console = Console(width=200)  # a log file gets the whole table, not a folded one
    try:
        cats = parse_categories(categories)
        model_backend = make_backend(backend, base_url, model, api_key)
        specs = resolve_specs(model_backend, dialects, enforcement, baseline)
        plan = EvalPlan(
            categories=cats, specs=specs, limit=limit, data_dir=data_dir, config=config, transcripts_dir=transcripts
        )
        options = GenerationOptions(max_tokens=max_tokens)
        results = _execute(model_backend, plan, options, console)
    except AgentFSMError as exc:
        typer.echo(f"agentfsm: error: {exc}", err=True)
        raise typer.Exit(2) from None
    rows = aggregate(results)
    meta: dict[str, Any] = {
        "command": "agentfsm " + " ".join(shlex.quote(a) for a in sys.argv[1:]),
        "date": now_iso(),
        "backend": model_backend.name,
        "model": model,
        "machine": machine_description(),
        "bfcl_eval": _bfcl_version(),
        "max_tokens": max_tokens,
        "categories": list(cats),
        "limit": limit,
    }
    console.print(render_table(rows))
    written = write_report(output, rows, results, meta)
    try:
        from agentfsm.eval.chart import write_chart

        written.append(write_chart(rows, written[0].with_suffix(".png")))
    except AgentFSMError as exc:
        console.print(f"[yellow]chart skipped:[/] {exc}")
    for path in written:
        console.print(f"wrote {path}")


eval_app.command("bfcl")(bfcl)


def quality(
    categories: Annotated[
        str, typer.Option("--categories", help="Comma list of BFCL categories, or 'none' (default: the seven single-turn ones).")
    ] = "default",
    limit: Annotated[int, typer.Option("--limit", min=1, help="First N cases of each BFCL category.")] = 15,
    tasks: Annotated[bool, typer.Option("--tasks/--no-tasks", help="Run the task suite.")] = True,
    output: Annotated[Path, typer.Option("-o", "--output", help="Markdown report path.")] = Path("bench/results/quality.md"),
    transcripts: TranscriptsOpt = None,
    backend: BackendOpt = "local",
    base_url: BaseUrlOpt = None,
    model: ModelOpt = None,
    api_key: ApiKeyOpt = None,
) -> None:
    """The quality check of the model-facing path: the task suite and BFCL's single-turn categories.

    Prints one table (per category: accuracy, protocol-valid, mean attempts, seconds per
    case) and writes it, with date, machine and command, to the Markdown report.
    """
    from rich.console import Console
    from rich.table import Table

    from agentfsm.eval.bfcl_data import parse_categories
    from agentfsm.eval.host import machine_description, now_iso
    from agentfsm.eval.quality import CATEGORIES, render_markdown, rows_from, run_quality
    from agentfsm.eval.suite import TASKS

    console = Console(width=200) if not Console().is_terminal else Console()
    try:
        cats = () if categories == "none" else CATEGORIES if categories == "default" else parse_categories(categories)
        model_backend = make_backend(backend, base_url, model, api_key)

        def on_task(r: SuiteResult) -> None:
            mark = "ok" if r.valid else f"x ({r.error or r.why})"
            calls = ", ".join(f"{n}{a}" for n, a in r.calls) or "no call"
            console.print(f"task {r.task.name}: {mark} [{calls}] -> {r.answer[:80]!r} ({r.seconds:.1f} s)",
                          highlight=False, markup=False)

        def on_case(r: CaseResult) -> None:
            console.print(f"{r.case_id}: {'ok' if r.valid else 'x'} ({r.seconds:.1f} s)", highlight=False)

        task_results, case_results = asyncio.run(
            run_quality(model_backend, cats, limit, TASKS if tasks else (), transcripts, on_task, on_case)
        )
    except AgentFSMError as exc:
        typer.echo(f"agentfsm: error: {exc}", err=True)
        raise typer.Exit(2) from None
    rows = rows_from(task_results, case_results)
    table = Table(title="Quality (defaults)")
    for col in ("category", "cases", "accuracy %", "protocol-valid %", "mean attempts", "s/case"):
        table.add_column(col, justify="left" if col == "category" else "right")
    for row in rows:
        table.add_row(*row.cells())
    console.print(table)
    meta: dict[str, Any] = {
        "command": "agentfsm " + " ".join(shlex.quote(a) for a in sys.argv[1:]),
        "date": now_iso(),
        "backend": model_backend.name,
        "machine": machine_description(),
        "bfcl_eval": _bfcl_version(),
        "limit": limit,
    }
    failures = [f"{r.task.name}: {r.error or r.why}; calls {list(r.calls)}; answer {r.answer[:120]!r}"
                for r in task_results if not r.valid]
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(render_markdown(rows, meta, failures), encoding="utf-8")
    console.print(f"wrote {output}")


eval_app.command("quality")(quality)


def register(app: typer.Typer) -> None:
    """Add the ``eval`` command group to ``app``."""
    app.add_typer(eval_app, name="eval")
