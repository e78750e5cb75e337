"""``agentfsm report PATH... -o report.html``: a page for reviewing runs in a browser."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["register"]


def report_cmd(
    paths: Annotated[
        list[Path],
        typer.Argument(
            help="Transcripts, directories of them, batch results files (agentfsm batch -o) or "
            "replay output (agentfsm replay --json > FILE); directories are searched for *.jsonl, "
            "subdirectories included, as replay and diagram search them. Files only: not - "
            "(standard input), since each input is read twice.",
            metavar="PATH",
            show_default=False,
        ),
    ],
    output: Annotated[
        Path,
        typer.Option("--output", "-o", help="The HTML file to write.", metavar="FILE"),
    ] = Path("report.html"),
) -> None:
    """Write one self-contained HTML report: the observed state diagram, a table of runs
    (sortable, filterable by outcome and guard reason), each run's timeline, and the
    failures grouped by reason. It opens from disk, with no network and no server. A file
    that does not read, and a run whose events are out of order (seq not increasing; shown
    in file order), are named in notes on stderr and in the page."""
    from agentfsm.cli._progress import reading
    from agentfsm.report import write_report

    with reading("transcripts") as tick:
        stats = write_report(paths, output, tick)
    for note in stats.notes:
        typer.echo(f"note: {note}", err=True)
    typer.echo(
        f"wrote {output}: {stats.runs} run{'' if stats.runs == 1 else 's'} "
        f"({stats.failed} failed) from {stats.transcripts} transcript"
        f"{'' if stats.transcripts == 1 else 's'}, {stats.size / 1024:.0f} KiB",
        err=True,
    )


def register(app: typer.Typer) -> None:
    """Add ``report`` to the CLI."""
    app.command("report")(report_cmd)
