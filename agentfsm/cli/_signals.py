"""SIGTERM stops ``run``, ``chat`` and ``batch`` the way Ctrl-C does.

``timeout 60 agentfsm run ...``, a job scheduler's time limit, ``docker stop`` and
``systemctl stop`` send SIGTERM, whose default action kills the process where it stands:
the run's transcript then had no ``run_end`` (replay read a killed writer) and a batch
said nothing of what it had done. Inside :func:`sigterm_as_interrupt`, SIGTERM takes
Ctrl-C's path instead: under :class:`asyncio.Runner` (which ``asyncio.run``, ``Agent.run``
and the batch's loop use) it calls the runner's own SIGINT handler, which cancels the
main task, so every run under way ends its transcript with ``run_end`` status
``cancelled`` and the command's ``KeyboardInterrupt`` handler runs as for Ctrl-C. Where SIGINT is ignored
(a background job of a script), the runner has no handler to call: every task of the
running loop is cancelled instead, and the :class:`asyncio.CancelledError` that ends the
runner is raised as :class:`KeyboardInterrupt`. With no loop running (at chat's prompt)
it raises :class:`KeyboardInterrupt`, as Python's own SIGINT handler does. The
command then exits 143 (128 + SIGTERM) where Ctrl-C exits 130 (128 + SIGINT), and says
``terminated`` where Ctrl-C says ``interrupted``.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["Stop", "sigterm_as_interrupt"]


class Stop:
    """What stopped the command, once a ``KeyboardInterrupt`` was caught: Ctrl-C or SIGTERM."""

    def __init__(self) -> None:
        #: SIGTERM arrived (else the interrupt was Ctrl-C's)
        self.terminated = False

    @property
    def code(self) -> int:
        """The exit status: 128 plus the signal's number, as a shell reports a process it killed."""
        return 128 + (signal.SIGTERM if self.terminated else signal.SIGINT)

    @property
    def word(self) -> str:
        """What the command says it was: ``terminated`` or ``interrupted``."""
        return "terminated" if self.terminated else "interrupted"


@contextmanager
def sigterm_as_interrupt(stop: Stop) -> Iterator[Stop]:
    """SIGTERM handled as Ctrl-C while inside (``stop`` told that it came); the previous
    handler restored on leaving. Off the main thread (where no handler can be set) nothing
    changes."""
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        stop.terminated = True
        interrupt = signal.getsignal(signal.SIGINT)
        if callable(interrupt) and interrupt is not signal.default_int_handler:
            interrupt(signal.SIGINT, frame)  # asyncio.Runner's: cancels its main task, as Ctrl-C does
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise KeyboardInterrupt from None
        # SIGINT ignored, so the runner set no handler: cancel what it would have, and more.
        # (Raised here, KeyboardInterrupt would land inside whichever task was running.)
        for task in asyncio.all_tasks(loop):
            task.cancel()
        loop.call_soon_threadsafe(lambda: None)  # wake a loop waiting in select

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield stop
    except asyncio.CancelledError:
        if not stop.terminated:
            raise
        raise KeyboardInterrupt from None
    finally:
        signal.signal(signal.SIGTERM, previous)
