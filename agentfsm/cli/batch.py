"""``agentfsm batch TASKS.jsonl -o RESULTS.jsonl``: the batch controller on the command line.

A progress bar goes to stderr while it runs, with the done count, the ETA and the
counters after them (failures by reason, corrections by guard, calls/s; cut to the
terminal's width), and a summary table at the end. Exit code: 0 when every task in the
output succeeded, 1 when some are recorded as failed (re-run with ``--retry-failed`` to
run those again), 2 for misuse (a bad tasks line, a duplicate id, a tool the module
lacks, an output or transcripts directory that cannot be written) or a results file
that stopped taking writes, 130 when interrupted (Ctrl-C: the results written are kept,
and the same command goes on with the rest), 143 when terminated (SIGTERM: the same).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from agentfsm.cli._common import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_SEED,
    DEFAULT_TEMPERATURE,
    ApiKeyOpt,
    BackendOpt,
    BaseUrlOpt,
    MaxTokensOpt,
    ModelOpt,
    SeedOpt,
    TemperatureOpt,
    TopPOpt,
    generation_options,
    make_backend,
)
from agentfsm.cli._options import config_options
from agentfsm.cli._signals import Stop, sigterm_as_interrupt
from agentfsm.core.config import DEFAULTS, RunConfig

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from agentfsm.batch.controller import BatchRun, BatchStats

__all__ = ["live_counters", "register", "summary_table"]

#: the largest counts named beside the progress bar (the summary names them all)
_SHOWN = 3


def _largest(counts: dict[str, int]) -> str:
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    named = ", ".join(f"{name} {n}" for name, n in ranked[:_SHOWN])
    return f" ({named}{', …' if len(ranked) > _SHOWN else ''})" if ranked else ""


def live_counters(stats: BatchStats) -> str:
    """What the progress bar shows beside itself, as the batch goes: failures by reason,
    corrections by guard, model calls per second."""
    return (
        f"failed {stats.failed}{_largest(stats.failures)}  "
        f"corrections {stats.corrections}{_largest(stats.guards)}  "
        f"{stats.calls_per_second:.1f} calls/s"
    )


def summary_table(stats: BatchStats) -> Table:
    """The end-of-batch summary as a rich table."""
    from rich.table import Table

    table = Table(title="batch summary", show_header=True, header_style="bold")
    table.add_column("metric")
    table.add_column("value", justify="right")
    rows: list[tuple[str, str]] = [
        ("tasks in file", str(stats.total)),
        ("already done (skipped)", str(stats.skipped)),
        ("run now", str(stats.done)),
        ("succeeded", str(stats.ok)),
        ("failed", str(stats.failed)),
        ("success rate", f"{stats.success_rate:.1%}"),
        ("corrections", str(stats.corrections)),
    ]
    rows += [(f"  by guard: {name}", str(n)) for name, n in sorted(stats.guards.items())]
    rows += [(f"failed by reason: {name}", str(n)) for name, n in sorted(stats.failures.items())]
    rows += [
        ("refusals", str(stats.refusals)),
        ("tool calls", str(stats.tool_calls)),
        ("model calls", str(stats.model_calls)),
        ("tokens (prompt / completion)", f"{stats.prompt_tokens} / {stats.completion_tokens}"),
        ("wall time", f"{stats.wall_seconds:.2f} s"),
        ("model calls / s", f"{stats.calls_per_second:.1f}"),
    ]
    for metric, value in rows:
        table.add_row(metric, value)
    return table


async def _drive(run: BatchRun, console: Console, show_progress: bool) -> BatchStats:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        Task,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.table import Column
    from rich.text import Text

    class CountersColumn(ProgressColumn):
        """The live counters, last and cut to the room left: they grow with the reasons
        named, and the bar, the done count and the ETA must stay in view."""

        def __init__(self) -> None:
            super().__init__(table_column=Column(no_wrap=False))  # the one column that gives way

        def render(self, task: Task) -> Text:
            return Text(str(task.fields.get("counters", "")), no_wrap=True, overflow="ellipsis")

    await run.start()
    stats = run.stats
    columns = (
        TextColumn("[bold]batch"),
        BarColumn(bar_width=24),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        CountersColumn(),
    )
    with Progress(*columns, console=console, disable=not show_progress, transient=False) as progress:
        bar = progress.add_task("batch", total=stats.pending, counters=live_counters(stats))
        async for _ in run:
            progress.update(bar, advance=1, counters=live_counters(run.stats))
    return run.stats


@config_options()
def batch(
    tasks: Annotated[str, typer.Argument(help="Tasks file: one JSON object per line (id, prompt or messages, tools, tool_choice).")],
    output: Annotated[str, typer.Option("--output", "-o", help="Results file (JSONL, appended; re-runs skip done ids).")],
    concurrency: Annotated[int, typer.Option("--concurrency", "-c", min=1, help="Tasks in flight at once.")] = 8,
    transcripts: Annotated[str | None, typer.Option("--transcripts", help="Write one transcript per task into this directory.")] = None,
    tools_module: Annotated[
        str | None,
        typer.Option("--tools-module", help="Python module (or MODULE:ATTR) implementing the tasks' tools; a task "
                     "without \"tools\" is offered its TOOLS list (or every tool of MODULE:ATTR)."),
    ] = None,
    backend: BackendOpt = "local",
    base_url: BaseUrlOpt = None,
    model: ModelOpt = None,
    api_key: ApiKeyOpt = None,
    max_tokens: MaxTokensOpt = DEFAULT_MAX_TOKENS,
    temperature: TemperatureOpt = DEFAULT_TEMPERATURE,
    seed: SeedOpt = DEFAULT_SEED,
    top_p: TopPOpt = None,
    retry_failed: Annotated[bool, typer.Option("--retry-failed", help="Run tasks recorded as failed again.")] = False,
    fsync_every: Annotated[int, typer.Option("--fsync-every", min=0, help="fsync the results every N lines (0: at the end).")] = 32,
    ramp: Annotated[float, typer.Option("--ramp", min=0.0, help="Seconds over which the concurrent tasks start (0: all at once).")] = 0.1,  # DEFAULT_RAMP (the controller loads on use)
    no_progress: Annotated[bool, typer.Option("--no-progress", help="No progress bar.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as one JSON object.")] = False,
    config: RunConfig = DEFAULTS,
) -> None:
    """Run every task of TASKS through the agent, exactly once each, into RESULTS.

    --tool-choice is the choice of a task that names none. --max-tokens,
    --temperature, --seed and --top-p apply to every model call of every task
    (a task line carries no generation options of its own).
    """
    from rich.console import Console

    from agentfsm.batch.controller import run_batch
    from agentfsm.batch.loop import run_on_batch_loop

    console = Console(stderr=True, highlight=False)
    run = run_batch(
        tasks,
        output=output,
        backend=lambda: make_backend(backend, base_url, model, api_key),
        tools_module=tools_module,
        concurrency=concurrency,
        transcripts_dir=transcripts,
        config=config,
        retry_failed=retry_failed,
        fsync_every=fsync_every,
        ramp=ramp,
        options=generation_options(max_tokens, temperature, seed, top_p),
    )
    stop = Stop()
    try:
        with sigterm_as_interrupt(stop):  # SIGTERM (a scheduler's time limit) as Ctrl-C
            stats = run_on_batch_loop(lambda: _drive(run, console, show_progress=not no_progress and not as_json))
    except KeyboardInterrupt:
        # the tasks in flight were cancelled; every result written is whole and kept
        if run.log is None:
            console.print(f"agentfsm: {stop.word} before the batch started; nothing was run", markup=False, soft_wrap=True)
        else:
            done = run.stats.skipped + run.stats.done
            console.print(
                f"agentfsm: {stop.word}: {done} of {run.stats.total} tasks are done in {output}; "
                "run the same command again to go on with the rest",
                markup=False,
                soft_wrap=True,
            )
        raise typer.Exit(stop.code) from None
    if as_json:
        print(json.dumps(stats.as_dict()))
    else:
        Console(highlight=False).print(summary_table(stats))
    failed_in_file = run.log is not None and any(not r.ok for r in run.log.done.values())
    if failed_in_file:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add ``batch`` to the CLI."""
    app.command("batch")(batch)
