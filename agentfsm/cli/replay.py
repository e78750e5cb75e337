"""``agentfsm replay TRANSCRIPT... [--json]``: re-decide recorded runs with today's code.

Prints, per transcript, ``identical`` or the first divergence (event index, what was
decided then, what is decided now). Exit code 0 only when every transcript replays
identical, 1 otherwise (2 for an unreadable transcript, or a directory without any).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentfsm.core.errors import UsageError

if TYPE_CHECKING:
    from rich.console import Console

    from agentfsm.replays.compare import ReplayReport

__all__ = ["register"]


def _expand(paths: list[str]) -> list[Path]:
    """The transcripts named, a directory's ``*.jsonl`` in its place (one without any is
    a UsageError, as for ``diagram`` and ``report``: replaying nothing is not a success)."""
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found = sorted(p.glob("*.jsonl"))
            if not found:
                raise UsageError(f"no *.jsonl transcripts in directory {p}")
            out.extend(found)
        else:
            out.append(p)
    return out


def _short(event: dict[str, Any]) -> str:
    return json.dumps(event, ensure_ascii=False, sort_keys=True) if event else "(nothing)"


def _print(console: Console, report: ReplayReport) -> None:
    from rich.markup import escape

    # a path or run id is text, never markup: "runs[prod]/a.jsonl" is printed as it is
    path = escape(report.path)
    decisions = f"{report.compared} decision{'' if report.compared == 1 else 's'}"
    if report.identical:
        console.print(f"[green]identical[/]  {path}  [dim]({decisions})[/]")
    else:
        d = report.divergence
        assert d is not None
        console.print(f"[red]diverged[/]   {path}  at event {d.index} ({escape(d.event_type)}, run {escape(d.run)})")
        console.print(f"    then: {_short(d.then)}", markup=False)
        console.print(f"    now:  {_short(d.now)}", markup=False)
    for note in report.notes:
        console.print(f"    [dim]note: {escape(note)}[/]")


def replay_cmd(
    transcripts: Annotated[list[str], typer.Argument(help="Transcript files (or directories of *.jsonl).")],
    as_json: Annotated[bool, typer.Option("--json", help="One JSON report per line.")] = False,
) -> None:
    """Replay transcripts through today's contract, parser, guards and engine."""
    from rich.console import Console

    from agentfsm.replays.compare import replay

    # one line per line, never wrapped at the terminal's width: a divergence's JSON is
    # copied and grepped whole
    console = Console(highlight=False, soft_wrap=True)
    all_identical = True
    for path in _expand(transcripts):
        report = replay(path)
        all_identical = all_identical and report.identical
        if as_json:
            print(report.model_dump_json())
        else:
            _print(console, report)
    if not all_identical:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add ``replay`` to the CLI."""
    app.command("replay")(replay_cmd)
