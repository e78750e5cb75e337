"""Batch files: the tasks file reader and the append-only, exactly-once results log.

The results log keeps one promise: after a kill at any moment, a re-run loses and
duplicates nothing.

- Each result is ONE ``os.write`` of a complete JSON line on an ``O_APPEND`` file
  descriptor (the loop retries a short write for the rest of the same line), so a
  killed process leaves whole lines plus at most one torn last line.
- On open, a torn last line (no trailing newline) is cut off, and the ids of the whole
  lines are the done set; the controller skips them.
- A process kill does not lose written lines (they are in the kernel's page cache);
  ``fsync`` every ``fsync_every`` lines and on close bounds what a power loss can
  lose to the last few lines, which are then simply run again (never duplicated).
- One writer per file: the file is locked (``flock``, exclusive) while it is open, and
  a second batch on the same file is refused at once. Two controllers would each read
  the same done set and run, and write, every remaining task twice. The lock goes with
  the process (a killed one leaves none behind).
- The results are a regular file: a re-run reads them back, which a pipe, a terminal
  or ``/dev/null`` cannot give (reading ``/dev/stdout`` waits forever, ``/dev/zero``
  never ends), so anything else is refused before the batch starts.
- A write that fails (a full disk, a file size limit) stops the batch with a
  :class:`UsageError` naming the file; the part of the line it wrote is cut off again,
  so the lines before it stay whole and a re-run goes on from them.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, NoReturn

from pydantic import ValidationError

from agentfsm.batch.task import Task, TaskResult
from agentfsm.core.errors import UsageError
from agentfsm.runtime.transcript import os_error_reason

__all__ = ["ResultLog", "load_tasks"]

if sys.platform != "win32":
    import fcntl


def _open_locked(path: Path) -> int:
    """``path`` opened for appending and locked for this process alone (a UsageError
    when another process holds it, or when it cannot be opened). The lock is taken on the file the path names *after*
    locking: a file replaced meanwhile (:meth:`ResultLog.drop`) is opened again."""
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:  # a directory, a missing or read-only place
            raise UsageError(f"cannot write results {path}: {os_error_reason(exc, path)}") from exc
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise UsageError(
                f"cannot write results {path}: not a regular file; a batch reads its results back to "
                "skip the tasks already done, so give it a file (and follow it with tail -f if you like)"
            )
        if sys.platform == "win32":  # no flock: one writer per file is the caller's to keep
            return fd
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise UsageError(
                f"another batch is writing results to {path}: two runs on one file would run "
                "and write every task twice; wait for it to finish, or give this run another output"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)  # the file was replaced between open and lock: lock the new one


def _describe(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ())) or "task"
    return f"{where}: {first.get('msg', 'invalid')}"


def load_tasks(source: str | os.PathLike[str] | Iterable[Task | Mapping[str, Any]]) -> list[Task]:
    """All tasks, validated; duplicate ids and bad lines are a UsageError naming the line.

    A malformed tasks file is refused as a whole, before anything runs: a batch that
    half-runs on a typo is worse than one that does not start.
    """
    tasks: list[Task] = []
    where: list[str] = []
    if isinstance(source, str | os.PathLike):
        path = Path(source)
        try:  # utf-8-sig: a byte order mark (Notepad, PowerShell) is not part of the first line
            lines = path.read_text(encoding="utf-8-sig").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read tasks file {path}: {exc}") from exc
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            label = f"{path}:{number}"
            try:
                tasks.append(Task.model_validate(json.loads(line)))
            except json.JSONDecodeError as exc:
                raise UsageError(f"{label}: not a JSON line ({exc.msg})") from exc
            except ValidationError as exc:
                raise UsageError(f"{label}: bad task: {_describe(exc)}") from exc
            where.append(label)
    else:
        for number, item in enumerate(source, start=1):
            label = f"task #{number}"
            if not isinstance(item, Task | Mapping):
                raise UsageError(f"{label}: bad task: expected a Task or a mapping, got {type(item).__name__}")
            try:
                tasks.append(item if isinstance(item, Task) else Task.model_validate(dict(item)))
            except (ValidationError, TypeError, ValueError) as exc:
                detail = _describe(exc) if isinstance(exc, ValidationError) else str(exc)
                raise UsageError(f"{label}: bad task: {detail}") from exc
            where.append(label)
    seen: dict[str, str] = {}
    for task, label in zip(tasks, where, strict=True):
        if task.id in seen:
            raise UsageError(f"{label}: duplicate task id {task.id!r} (first at {seen[task.id]})")
        seen[task.id] = label
    return tasks


class ResultLog:
    """An append-only JSONL results file with exactly-once appends (see module doc)."""

    def __init__(self, path: str | os.PathLike[str], *, fsync_every: int = 32) -> None:
        if fsync_every < 0:
            raise UsageError("fsync_every must be >= 0 (0: only on close)")
        self.path = Path(path)
        self.fsync_every = fsync_every
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"cannot write results {self.path}: {os_error_reason(exc, self.path)}") from exc
        #: the results already in the file, by id (the last line wins)
        self.done: dict[str, TaskResult] = {}
        #: whether a torn last line was cut off when the file was opened
        self.repaired = False
        self._unsynced = 0
        self._fd = _open_locked(self.path)
        try:
            self._recover()
        except BaseException:
            os.close(self._fd)
            raise

    def _recover(self) -> None:
        data = self.path.read_bytes()
        end = data.rfind(b"\n") + 1  # 0 when there is no complete line
        if end < len(data):
            os.ftruncate(self._fd, end)  # a torn last line: its task runs again
            os.fsync(self._fd)
            self.repaired = True
        for number, line in enumerate(data[:end].split(b"\n")[:-1], start=1):
            if not line.strip():
                continue
            try:
                result = TaskResult.model_validate_json(line)
            except ValidationError as exc:
                raise UsageError(
                    f"{self.path}:{number}: not a result line; refusing to append to a file "
                    "this controller did not write"
                ) from exc
            self.done[result.id] = result

    def append(self, result: TaskResult) -> None:
        """Write one result as one complete line (a UsageError naming the file when it
        cannot be written; nothing of that line is left in the file)."""
        if self._fd < 0:
            raise UsageError(f"cannot write results {self.path}: the file is closed")
        line = result.model_dump_json().encode("utf-8") + b"\n"  # compact UTF-8, as read back
        view = memoryview(line)
        start = os.lseek(self._fd, 0, os.SEEK_END)  # where the line begins (the file is ours alone)
        try:
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
        except OSError as exc:
            self._fail(start, exc)
        self.done[result.id] = result
        self._unsynced += 1
        if self.fsync_every and self._unsynced >= self.fsync_every:
            self.sync()

    def _fail(self, start: int, exc: OSError) -> NoReturn:
        """A line could not be written: cut off what was written of it, close the file, and
        raise the UsageError that stops the batch (a re-run goes on from the whole lines)."""
        try:
            os.ftruncate(self._fd, start)  # else the next line would follow a torn one
        except OSError:
            pass  # a re-run cuts a torn last line off anyway
        try:
            os.close(self._fd)
        finally:
            self._fd = -1
        raise UsageError(
            f"cannot write results {self.path}: {os_error_reason(exc, self.path)}; the batch stopped, "
            "and the results written so far are kept: run it again to go on with the rest"
        ) from exc

    def sync(self) -> None:
        """Flush the file to stable storage."""
        if self._fd >= 0:
            os.fsync(self._fd)
            self._unsynced = 0

    def drop(self, ids: set[str]) -> None:
        """Rewrite the file without the results of ``ids`` (atomic replace), for retries."""
        if not ids:
            return
        kept = [r for r in self.done.values() if r.id not in ids]
        tmp = self.path.with_name(self.path.name + ".tmp")
        new = _open_locked(tmp)  # locked before it takes the path: never an unlocked moment
        try:
            os.ftruncate(new, 0)
            with os.fdopen(os.dup(new), "w", encoding="utf-8") as fh:
                for result in kept:
                    fh.write(json.dumps(result.model_dump(mode="json"), ensure_ascii=False) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            os.close(new)
            raise
        os.close(self._fd)
        self._fd = new
        self.done = {r.id: r for r in kept}

    def close(self) -> None:
        """Sync and close (idempotent; the file is closed even when the sync fails)."""
        if self._fd >= 0:
            try:
                self.sync()
            finally:
                os.close(self._fd)
                self._fd = -1

    def __enter__(self) -> ResultLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
