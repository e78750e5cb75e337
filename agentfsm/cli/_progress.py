"""A progress bar for reading many transcripts (``report``, ``diagram``): on stderr, only
where stderr is a terminal, and gone once the work is done, so piped output and the
command's own lines stay as they were."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["Tick", "reading"]

#: told after each input is read: how many are done, of how many
Tick = Callable[[int, int], None]


@contextmanager
def reading(what: str) -> Iterator[Tick]:
    """A :data:`Tick` that moves a bar labelled ``what`` (``transcripts``)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    console = Console(stderr=True)
    columns = (TextColumn(f"reading {what}"), BarColumn(bar_width=24), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=True, disable=not console.is_terminal) as progress:
        bar = progress.add_task(what, total=None)

        def tick(done: int, total: int) -> None:
            progress.update(bar, completed=done, total=total)

        yield tick
