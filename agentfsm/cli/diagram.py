"""``agentfsm diagram``: draw the machine, or the paths that transcripts took."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from agentfsm.core.errors import AgentFSMError, UsageError

__all__ = ["register"]

_FORMATS = ("mermaid", "svg", "png")
_SUFFIX_FORMATS = {".svg": "svg", ".png": "png"}

PathsArg = Annotated[
    list[Path] | None,
    typer.Argument(
        help="Transcripts (*.jsonl), directories (searched for *.jsonl, subdirectories included) "
        "or - for standard input, aggregated into one diagram. None: draw the machine itself.",
        metavar="TRANSCRIPT_OR_DIR",
        show_default=False,
    ),
]
FormatOpt = Annotated[
    str | None,
    typer.Option(
        "--format",
        "-f",
        help="mermaid (needs nothing), svg or png (need graphviz). Default: from -o's suffix, else mermaid.",
        metavar="mermaid|svg|png",
        show_default=False,
    ),
]
OutputOpt = Annotated[
    Path | None,
    typer.Option(
        "--output",
        "-o",
        help="Write here instead of stdout, whole or not at all (an error or Ctrl-C leaves the file "
        "that was there). A .md file gets a markdown page with the mermaid block.",
        metavar="FILE",
        show_default=False,
    ),
]


def _format(fmt: str | None, output: Path | None) -> str:
    if fmt is None:
        return _SUFFIX_FORMATS.get(output.suffix.lower(), "mermaid") if output else "mermaid"
    chosen = fmt.lower()
    if chosen not in _FORMATS:
        raise UsageError(f"--format must be one of {', '.join(_FORMATS)}, not {fmt!r}")
    return chosen


def draw(paths: list[Path] | None, fmt: str | None, output: Path | None) -> bytes:
    """Build the diagram the arguments ask for and return its bytes (also written to ``output``)."""
    from agentfsm.diagram.build import (
        Diagram,
        document_markdown,
        machine_diagram,
        observed_diagram,
        render,
        to_graphviz_dot,
        to_mermaid,
    )

    chosen = _format(fmt, output)
    from agentfsm.cli._progress import reading

    if paths:
        skipped: list[str] = []
        warnings: list[str] = []
        with reading("transcripts") as tick:
            diagram: Diagram = observed_diagram([str(p) for p in paths], tick, skipped.append, warnings.append)
        for reason in skipped:  # after the progress bar, as report's notes; the rest is drawn
            typer.echo(f"note: {reason}; left out", err=True)
        for warning in warnings:  # a run out of order is drawn, in file order, and said to be
            typer.echo(f"note: {warning}", err=True)
    else:
        diagram = machine_diagram()
    if chosen == "mermaid":
        as_page = output is not None and output.suffix.lower() == ".md"
        data = (document_markdown(diagram) if as_page else to_mermaid(diagram)).encode()
    elif chosen == "png" and output is None:
        raise UsageError("--format png writes binary data: give -o FILE.png")
    else:
        data = render("svg" if chosen == "svg" else "png", to_graphviz_dot(diagram))
    if output is not None:
        from agentfsm.runtime.files import write_whole

        try:
            output.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"cannot write {output}: {exc.strerror or exc}") from exc
        write_whole(output, data)  # a full disk or Ctrl-C leaves the diagram that was there, never half of one
    return data


def register(app: typer.Typer) -> None:
    """Add the ``diagram`` command to ``app``."""

    @app.command("diagram")
    def diagram(paths: PathsArg = None, fmt: FormatOpt = None, output: OutputOpt = None) -> None:
        """Draw the machine (no transcripts) or the observed paths of transcripts.

        Edges of observed paths are labelled with how often they were taken; states
        show where retries and refusals happened; unvisited edges are dimmed. A
        transcript that does not read (or holds no events) is named in a note and left
        out; exit code 2 when none is left to draw. A run whose events are out of order
        (seq not increasing) is drawn in file order and named in a note (FILE:LINE).
        """
        try:
            data = draw(paths, fmt, output)
        except AgentFSMError as exc:
            typer.echo(f"agentfsm: error: {exc}", err=True)
            raise typer.Exit(2) from None
        if output is None:
            from agentfsm.cli._output import stdout_writes

            try:
                with stdout_writes():
                    sys.stdout.write(data.decode())
                    sys.stdout.flush()
            except AgentFSMError as exc:
                typer.echo(f"agentfsm: error: {exc}", err=True)
                raise typer.Exit(2) from None
        else:
            typer.echo(f"wrote {output}", err=True)
