"""Appending to a transcript file that a crash may have left torn, beside other writers.

A writer killed mid-line leaves a last line without its newline; a run appended after
it would be glued to it, and the whole file would not read. :func:`cut_torn_tail` cuts
that line off when a :class:`~agentfsm.runtime.transcript.TranscriptWriter` opens the
file (read as it is, the torn line is nothing: the readers pass over it), as
``agentfsm batch``'s results log does. :class:`locked` keeps the cut from taking another
writer's line in flight for a torn one: writers hold a shared ``flock`` while they write
a line, an opening writer an exclusive one while it looks at the end.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import IO

if sys.platform != "win32":
    import fcntl

__all__ = ["cut_torn_tail", "locked"]


class locked:
    """An advisory lock on a transcript file (none on Windows, nor on a pipe or a device):
    shared while a line is written, exclusive while a writer opening the file looks at its
    end, so that it never takes another writer's line in flight for a torn one."""

    def __init__(self, fh: IO[str], *, exclusive: bool) -> None:
        self._fd = fh.fileno()
        self._exclusive = exclusive
        self._held = False

    def __enter__(self) -> None:
        if sys.platform != "win32" and stat.S_ISREG(os.fstat(self._fd).st_mode):
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX if self._exclusive else fcntl.LOCK_SH)
                self._held = True
            except OSError:  # a file system without locks (some network mounts): written unlocked
                pass

    def __exit__(self, *exc: object) -> None:
        if self._held:
            self._held = False
            fcntl.flock(self._fd, fcntl.LOCK_UN)


def cut_torn_tail(path: Path, fd: int) -> None:
    """Cut off the last line of ``path`` (open for appending as ``fd``) when it has no
    newline (a writer killed mid-line), before appending: the next line would be glued to
    it, and the whole file would not read. Read as it is, the torn line is nothing
    (:func:`~agentfsm.runtime.transcript.iter_events` passes over it). Nothing is done to
    what is not a regular file (``--transcript /dev/stdout``, a pipe)."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or not info.st_size:  # a new file (each proxied request's) has no tail
        return
    try:
        fh = path.open("rb")
    except OSError:  # a file this writer may append to but not read: appended to as it is
        return
    with fh:
        end = size = fh.seek(0, os.SEEK_END)
        while end > 0:
            start = max(0, end - 65536)
            fh.seek(start)
            chunk = fh.read(end - start)
            if end == size and chunk.endswith(b"\n"):
                return
            newline = chunk.rfind(b"\n")
            if newline >= 0:
                os.ftruncate(fd, start + newline + 1)
                return
            end = start
    if size:
        os.ftruncate(fd, 0)  # one torn line and nothing else
