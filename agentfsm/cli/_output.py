"""Standard output that cannot be written: one line saying why, not a traceback.

``agentfsm replay > /dev/full`` (or onto a full disk) ended in rich's or Python's
``OSError: [Errno 28] No space left on device`` traceback. A reader that left (``| head``)
is click's to handle, as before: the command ends quietly.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from agentfsm.core.errors import UsageError

__all__ = ["stdout_writes"]


@contextmanager
def stdout_writes() -> Iterator[None]:
    """Writes to standard output (flushed inside): an error writing them is a
    :class:`UsageError` naming it, and what is left unwritten is dropped."""
    try:
        yield
    except BrokenPipeError:
        raise
    except OSError as exc:
        from agentfsm.runtime.transcript import os_error_reason

        try:  # what the buffer still holds would fail again, at exit, as "Exception ignored"
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.close(null)
        except OSError:
            pass
        raise UsageError(f"cannot write standard output: {os_error_reason(exc)}") from exc
