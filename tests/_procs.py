"""Commands run as subprocesses by the tests: never left running when a test fails."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["reaped"]


@contextmanager
def reaped(proc: subprocess.Popen[Any]) -> Iterator[subprocess.Popen[Any]]:
    """``proc`` inside; at the end (an assertion failed, a wait timed out), killed if it is
    still running, and waited for, its pipes read to their end."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
