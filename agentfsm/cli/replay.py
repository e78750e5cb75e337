"""``agentfsm replay TRANSCRIPT... [--json]``: re-decide recorded runs with today's code.

Prints, per transcript, ``identical`` or the first divergence (event index, what was
decided then, what is decided now); a transcript that does not read is named on stderr
and the others are still replayed. Exit code 0 only when every transcript replays
identical, 1 otherwise (2 for a transcript that does not read, a path that does not
exist, or a directory without any). With ``--json`` each error is also one JSON line on
standard output, among the reports: ``{"path": FILE, "error": "TranscriptError",
"message": ...}`` (no ``path`` for the paths given as a whole: ``"UsageError"``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentfsm.core.errors import TranscriptError, UsageError

if TYPE_CHECKING:
    from rich.console import Console

    from agentfsm.replays.compare import ReplayReport

__all__ = ["register"]


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


def _error_line(error: Exception, path: str | None = None) -> None:
    """An error as one JSON line among ``--json``'s reports (it is also said on stderr)."""
    from agentfsm.cli._output import stdout_writes

    line = ({"path": path} if path is not None else {}) | {"error": type(error).__name__, "message": str(error)}
    with stdout_writes():
        print(json.dumps(line, ensure_ascii=False), flush=True)


def replay_cmd(
    transcripts: Annotated[
        list[str],
        typer.Argument(
            help="Transcript files, directories (searched for *.jsonl, subdirectories included), "
            "or - for standard input.",
            metavar="TRANSCRIPT_OR_DIR",
            show_default=False,
        ),
    ],
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help='One JSON report per line; a transcript that does not read is one line too: '
            '{"path": FILE, "error": "TranscriptError", "message": ...}.',
        ),
    ] = False,
) -> None:
    """Replay transcripts through today's contract, parser, guards and engine.

    Exit code 0 when every transcript replays identical, 1 when one diverged, 2 when one
    does not read (named on stderr, and with --json in a JSON line; the others are still
    replayed) or a path is missing (said before anything is replayed; with --json also as
    {"error": "UsageError", "message": ...}). A run whose events are out of order (seq not
    increasing) is named in a note (FILE:LINE) and compared in file order.
    """
    from rich.console import Console

    from agentfsm.cli._output import stdout_writes
    from agentfsm.diagram.build import transcript_files
    from agentfsm.replays.compare import replay

    # one line per line, never wrapped at the terminal's width: a divergence's JSON is
    # copied and grepped whole
    console = Console(highlight=False, soft_wrap=True)
    all_identical, unreadable = True, False
    # the paths checked first, as diagram and report do: a typo is said before any replay
    try:
        files = transcript_files(transcripts)
    except UsageError as exc:
        if as_json:
            _error_line(exc)
        raise
    for path in files:
        try:
            report = replay(path)
        except TranscriptError as exc:  # one unreadable file of hundreds: named, the rest still replayed
            typer.echo(f"agentfsm: error: {exc}", err=True)
            if as_json:
                _error_line(exc, str(path))
            unreadable = True
            continue
        all_identical = all_identical and report.identical
        with stdout_writes():
            if as_json:
                print(report.model_dump_json(), flush=True)
            else:
                _print(console, report)
    if unreadable:
        raise typer.Exit(2)
    if not all_identical:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add ``replay`` to the CLI."""
    app.command("replay")(replay_cmd)
