"""What ``eval bfcl``, ``eval quality`` and ``calibrate`` keep when they stop part way.

Ctrl-C, SIGTERM (a scheduler's time limit) or an upstream that goes away can end an eval
that has run for half an hour. The runs that ended are not thrown away: they are written as
a report (a profile, for ``calibrate``) marked partial, its first line
``PARTIAL: 6 of 10 runs; terminated (SIGTERM)``, to the path with ``.partial`` before its
suffix (``quality.md``: ``quality.partial.md``), so a complete report already at the path
is left as it was. One line on stderr says what stopped it, how far it got and where the
partial report is. A signal exits 130 / 143 as before; an upstream failure exits 2, the
code of every upstream error (``docs/cli.md``). A later complete run to the same path
supersedes them: once its report is written, :func:`remove_partials` removes that
path's partial files and says so in one line (before, they stayed beside the complete
report, an older and smaller one that looked as current). The partial report's JSON
holds the runs and the plan that made them: the same command with ``--resume`` reads
them back (:mod:`agentfsm.eval.resume`) and goes on from them, as :func:`starting` says.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from agentfsm.cli._signals import Stop
from agentfsm.core.errors import AgentFSMError, BackendError, UsageError

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["Partial", "partial_path", "remove_partials", "starting", "stopped_part_way", "writable_outputs"]


@dataclass(frozen=True)
class Partial:
    """How far a stopped eval got, and why it stopped."""

    done: int
    total: int
    #: ``interrupted (Ctrl-C)``, ``terminated (SIGTERM)`` or ``upstream failed: ...``
    why: str
    #: what ``done`` counts: ``runs`` (the evals) or ``items`` (calibrate)
    unit: str = "runs"

    @property
    def title(self) -> str:
        """The report's first line: ``PARTIAL: 6 of 10 runs; terminated (SIGTERM)``."""
        return f"PARTIAL: {self.done} of {self.total} {self.unit}; {self.why}"


def partial_path(path: Path, suffixes: Sequence[str] = (".json", ".md", ".png")) -> Path:
    """``path`` with ``.partial`` before its suffix (``q.md``: ``q.partial.md``); a path
    without one of ``suffixes`` (a report stem) gets it at its end."""
    if path.suffix in suffixes:
        return path.with_name(f"{path.stem}.partial{path.suffix}")
    return path.with_name(f"{path.name}.partial")


def remove_partials(partials: Iterable[Path], complete: str) -> str | None:
    """Remove those of ``partials`` (one report's partial files, :func:`partial_path`) that
    exist, now that the complete report (named by ``complete``) is written; the one line
    that says what was removed (and what could not be), or None when there were none."""
    from agentfsm.runtime.transcript import os_error_reason

    removed: list[str] = []
    kept: list[str] = []
    for path in dict.fromkeys(partials):
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        except OSError as exc:  # said, not raised: the complete report is written
            kept.append(f"{path} ({os_error_reason(exc, path)})")
            continue
        removed.append(str(path))
    if not removed and not kept:
        return None
    said = [f"removed {', '.join(removed)}, superseded by {complete}"] if removed else []
    said += [f"could not remove the partial {', '.join(kept)}"] if kept else []
    return "; ".join(said)


def starting(partial: Path, resume: bool, console: Console, done: str) -> None:
    """Say where a run starts: from the partial report at ``partial`` (``--resume``, read
    back already; ``done`` says how far it had got), or over, where a stopped run left one."""
    if resume:
        console.print(f"resuming from {partial}: {done}", highlight=False, markup=False, soft_wrap=True)
    elif partial.exists():
        console.print(f"{partial} is a stopped run's (--resume goes on from it); this run starts over",
                      highlight=False, markup=False, soft_wrap=True)


def writable_outputs(option: str, *paths: Path) -> None:
    """Refuse now, before a run of an hour, the output ``paths`` (named by ``option``,
    ``-o out``) that could not be written at its end: a folder in a file's place, a folder
    that cannot be made or written in."""
    from agentfsm.runtime.transcript import os_error_reason

    for path in paths:
        if path.is_dir():
            raise UsageError(f"{option}: {path} is a folder")
    for folder in dict.fromkeys(p.parent for p in paths):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile(dir=folder):  # the permission bits do not say it all
                pass
        except OSError as exc:
            raise UsageError(f"{option}: cannot write in {folder}: {os_error_reason(exc, folder)}") from None


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def stopped_part_way(
    exc: BaseException,
    stop: Stop,
    done: int,
    total: int,
    write: Callable[[Partial], Sequence[Path]],
    complete: str,
    unit: str = "runs",
) -> typer.Exit:
    """Write what ran (``write``, given how far it got) unless nothing did, say so in one
    line, and return the exit to raise. ``exc`` is the ``KeyboardInterrupt`` of Ctrl-C or
    SIGTERM, or the error that ended it (the upstream's, a transcript that could not be
    written); ``complete`` names the report that was not written. With nothing planned
    yet (``total`` 0: a mistake in the options, a model that cannot load) the line is
    the plain one."""
    if isinstance(exc, KeyboardInterrupt):
        head, code = stop.word, stop.code
        why = "terminated (SIGTERM)" if stop.terminated else "interrupted (Ctrl-C)"
    else:
        head, code = f"error: {_one_line(exc)}", 2
        why = f"{'upstream failed' if isinstance(exc, BackendError) else 'failed'}: {_one_line(exc)}"
    if not total:
        plain = f"{stop.word}: {complete} was not written (one there is as it was)" if code != 2 else f"error: {exc}"
        typer.echo(f"agentfsm: {plain}", err=True)
        return typer.Exit(code)
    kept = ""
    if done:
        try:
            kept = f", kept in {', '.join(map(str, write(Partial(done, total, why, unit))))}"
        except (OSError, AgentFSMError) as failure:  # said, not raised: the line below is the one
            kept = f", not kept ({_one_line(failure)})"
    said = f"{done} of {total} {unit} were done{kept}; {complete} was not written (one there is as it was)"
    typer.echo(f"agentfsm: {head}{'; ' if code == 2 else ': '}{said}", err=True)
    return typer.Exit(code)
