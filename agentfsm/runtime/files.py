"""Files written whole: a page, a report, a partial report that ``--resume`` reads, a
profile holding other models' entries. None of them may be left cut short by a second
Ctrl-C or a full disk mid-write, so each is written beside itself and renamed over the
old one (:func:`write_whole`)."""

from __future__ import annotations

import os
from pathlib import Path

from agentfsm.core.errors import UsageError

__all__ = ["write_whole"]


def _bytes(text: str | bytes) -> bytes:
    return text.encode("utf-8") if isinstance(text, str) else text


def write_whole(path: Path, text: str | bytes) -> None:
    """``text`` into ``path`` whole or not at all: written beside it, then renamed over it.
    Text is written as UTF-8; bytes (a PNG) as they are.

    A link is followed: its target is written whole, and the link kept. A path that is
    there and is not a file (a device or a pipe: ``-o /dev/stdout``) is written to as it
    is, never replaced by a file. An error writing is a :class:`UsageError` naming the
    path and why."""
    if path.exists() and not path.is_file():
        try:
            with path.open("wb") as fh:
                fh.write(_bytes(text))
        except OSError as exc:
            raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
        return
    target = path.resolve() if path.is_symlink() else path
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with temporary.open("wb") as fh:
            fh.write(_bytes(text))
        os.replace(temporary, target)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
