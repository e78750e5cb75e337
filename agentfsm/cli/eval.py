"""``agentfsm eval bfcl``: BFCL cases through the runtime, beside BFCL's own prompt mode."""

from __future__ import annotations

import asyncio
import shlex
import sys
from collections.abc import Awaitable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from agentfsm.cli._common import ApiKeyOpt, BackendOpt, BaseUrlOpt, ModelOpt, make_backend
from agentfsm.cli._options import config_options
from agentfsm.cli._partial import Partial, partial_path, remove_partials, starting, stopped_part_way, writable_outputs
from agentfsm.cli._signals import Stop, sigterm_as_interrupt
from agentfsm.core.config import DEFAULTS, RunConfig
from agentfsm.core.errors import AgentFSMError

if TYPE_CHECKING:
    from rich.console import Console

    from agentfsm.core.backend import Backend, GenerationOptions
    from agentfsm.eval.runner import CaseResult, EvalPlan

__all__ = ["bfcl", "eval_app", "register"]

T = TypeVar("T")

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
    Path,
    typer.Option("-o", "--output", help="Report path stem: writes STEM.json, STEM.md and STEM.png. Stopped part way "
                 "(Ctrl-C, SIGTERM, the upstream gone), the cases done go to STEM.partial.json and .md, marked PARTIAL; a complete run removes them."),
]
BaselineOpt = Annotated[bool, typer.Option("--baseline/--no-baseline", help="Add BFCL's prompt-mode row.")]
ResumeOpt = Annotated[
    bool,
    typer.Option("--resume", help="Go on from STEM.partial.json, which a stopped run of the same plan (categories, "
                 "limit, runs, backend, model, settings) wrote: its cases are kept, the others run, and the report holds all."),
]
MaxTokensOpt = Annotated[int, typer.Option("--max-tokens", min=16, help="Generation bound per model call.")]
DataDirOpt = Annotated[
    Path | None, typer.Option("--data-dir", help="BFCL data folder (default: the installed bfcl-eval package).")
]
TranscriptsOpt = Annotated[
    Path | None,
    typer.Option("--transcripts", help="Write one transcript per case and row into this directory (agentfsm replay reads them)."),
]


def bfcl_version() -> str | None:
    from importlib import metadata

    try:
        return metadata.version("bfcl-eval")
    except metadata.PackageNotFoundError:
        return None


class Count:
    """How far an eval got: runs done of those planned, and their results (a partial
    report's, when it is stopped)."""

    def __init__(self) -> None:
        self.done = self.total = 0
        self.results: list[CaseResult] = []


def _execute(
    backend: Backend, plan: EvalPlan, options: GenerationOptions, console: Console, count: Count,
    done: Sequence[CaseResult] = (),
) -> list[CaseResult]:
    """Run the plan's cases but those ``done`` (a stopped run's, resumed), counting into
    ``count``; returns the results of all of them, in the plan's order."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from agentfsm.eval.resume import remaining
    from agentfsm.eval.runner import load_plan_cases

    cases = load_plan_cases(plan)
    total = count.total = len(cases) * len(plan.specs)
    count.results, count.done = list(done), len(done)
    cases = remaining(cases, done)
    right = sum(r.valid for r in done)
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[last]}"),
        console=console,
        transient=False,
    ) as progress:
        task = progress.add_task("BFCL", total=total, completed=len(done), last=f"{len(done)} resumed" if done else "")

        def on_result(result: CaseResult) -> None:
            nonlocal right
            right += result.valid
            count.done += 1
            count.results.append(result)
            mark = "[green]ok[/]" if result.valid else "[red]x[/]"
            last = f"{result.case_id} {result.dialect}/{result.enforcement} {mark}"
            progress.update(task, advance=1, last=last)
            if not console.is_terminal:  # a log gets one line per case instead of a live bar
                done = int(progress.tasks[0].completed)
                console.print(f"[{done}/{total}] {last} ({result.seconds:.1f} s)", highlight=False)

        from agentfsm.eval.runner import run_eval

        ran = asyncio.run(run_and_close(backend, run_eval(backend, plan, options, on_result=on_result, cases=cases)))
        return [*done, *ran]


async def run_and_close(backend: Backend, work: Awaitable[T]) -> T:
    """Await ``work``, then close the backend's async pool on the loop that opened it."""
    try:
        return await work
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
    resume: ResumeOpt = False,
    config: RunConfig = DEFAULTS,
) -> None:
    """Run Berkeley Function Calling Leaderboard cases through the runtime and score them.

    Each case is one deciding turn; the calls are scored with BFCL's AST checker
    rules (irrelevance: any call is wrong). A baseline row runs BFCL's own prompt
    mode on the same backend and cases. Writes a JSON and a Markdown report and a
    chart of accuracy by dialect x enforcement level.

    Stopped part way (Ctrl-C, SIGTERM, an upstream that fails), the cases done so far
    are written to STEM.partial.json and .md, their first line PARTIAL: n of N runs
    and why; a report at STEM is left as it was. The same command with --resume goes
    on from them.
    """
    from rich.console import Console

    from agentfsm.core.backend import GenerationOptions
    from agentfsm.eval.bfcl_data import parse_categories
    from agentfsm.eval.host import machine_description, now_iso
    from agentfsm.eval.report import REPORT_SUFFIXES, aggregate, render_table, report_stem, write_report
    from agentfsm.eval.resume import plan_key, resumed
    from agentfsm.eval.runner import EvalPlan, resolve_specs

    console = Console()
    if not console.is_terminal:
        console = Console(width=200)  # a log file gets the whole table, not a folded one
    stop, count = Stop(), Count()

    def meta() -> dict[str, Any]:
        return {
            "command": "agentfsm " + " ".join(shlex.quote(a) for a in sys.argv[1:]),
            "date": now_iso(),
            "backend": model_backend.name,
            "model": model,
            "machine": machine_description(),
            "bfcl_eval": bfcl_version(),
            "max_tokens": max_tokens,
            "categories": list(cats),
            "limit": limit,
            "plan": key,  # what --resume checks
        }

    stem = report_stem(output)
    partial_json = partial_path(stem).with_name(partial_path(stem).name + ".json")
    key: dict[str, Any] = {}
    try:
        writable_outputs(f"-o {output}", *(stem.with_name(stem.name + s) for s in REPORT_SUFFIXES))
        cats = parse_categories(categories)
        model_backend = make_backend(backend, base_url, model, api_key)
        specs = resolve_specs(model_backend, dialects, enforcement, baseline)
        plan = EvalPlan(
            categories=cats, specs=specs, limit=limit, data_dir=data_dir, config=config, transcripts_dir=transcripts
        )
        options = GenerationOptions(max_tokens=max_tokens)
        key = plan_key(plan, model_backend.name, model, max_tokens, bfcl_version())
        done = resumed(partial_json, key, len(specs)) if resume else []
        starting(partial_json, resume, console, f"{len(done) // len(specs)} cases done")
        with sigterm_as_interrupt(stop):  # SIGTERM (a scheduler's time limit) as Ctrl-C
            results = _execute(model_backend, plan, options, console, count, done)
    except (AgentFSMError, KeyboardInterrupt) as exc:  # the cases done are kept, marked partial
        done = count.results
        whole = done[: len(done) - len(done) % len(specs)] if done else done  # whole cases: every row has the same ones

        def write_partial(partial: Partial) -> list[Path]:
            return write_report(partial_path(stem), aggregate(whole), whole, {"partial": partial.title, **meta()})

        raise stopped_part_way(
            exc, stop, len(whole), count.total, write_partial, f"the report ({stem}.json, .md, .png)"
        ) from None
    rows = aggregate(results)
    console.print(render_table(rows))
    written = write_report(output, rows, results, meta())
    try:
        from agentfsm.eval.chart import write_chart

        written.append(write_chart(rows, written[0].with_suffix(".png")))
    except AgentFSMError as exc:
        console.print(f"[yellow]chart skipped:[/] {exc}")
    for path in written:
        console.print(f"wrote {path}")
    partial = partial_path(stem)  # an earlier stopped run's, superseded by this report
    said = remove_partials((partial.with_name(partial.name + s) for s in REPORT_SUFFIXES), f"{stem}.json, .md")
    if said is not None:
        console.print(said, highlight=False, markup=False, soft_wrap=True)


eval_app.command("bfcl")(bfcl)


def register(app: typer.Typer) -> None:
    """Add the ``eval`` command group to ``app``: ``bfcl`` and ``quality``
    (:mod:`agentfsm.cli.quality`, which builds on this module)."""
    from agentfsm.cli.quality import quality

    eval_app.command("quality")(quality)
    app.add_typer(eval_app, name="eval")
