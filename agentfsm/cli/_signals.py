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
runner is raised as :class:`KeyboardInterrupt`. With no loop running it raises
:class:`KeyboardInterrupt`, as Python's own SIGINT handler does. ``chat``, which runs a
loop per turn and reads lines between them, takes both signals with :class:`ChatStops`. The
command then exits 143 (128 + SIGTERM) where Ctrl-C exits 130 (128 + SIGINT), and says
``terminated`` where Ctrl-C says ``interrupted``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, NoReturn, TypeVar

__all__ = ["ChatStops", "Stop", "sigterm_as_interrupt"]

T = TypeVar("T")


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


class ChatStops:
    """Ctrl-C and SIGTERM in ``agentfsm chat``, wherever they land.

    A stop cancels the task under way (:meth:`run`: the start of the ``--mcp`` servers, or
    a turn); at the prompt (:meth:`prompt`) it ends the read with :class:`KeyboardInterrupt`;
    anywhere else (a turn's answer being shown, its history kept) it is only recorded, in
    :attr:`stopped`, for the chat to act on once it has done. A turn whose answer exists
    (its transcript ended ``final``) is not cancelled by a stop that lands at its very end:
    :meth:`run` returns that answer, so screen, history and transcript agree. Before, a stop
    there dropped a turn that the transcript said had ended, and one between an answer and
    the prompt ended the chat as ``agentfsm: aborted``, exit 1.

    A second stop while the first one's cancellation of a task is still under way (a tool
    that tidies up before it ends) exits at once, the usual convention: ``agentfsm:
    interrupted`` (``terminated`` after SIGTERM) and 130 (143), with what is on stdout
    flushed and nothing more run. The transcript keeps what was written (each event is
    flushed as it is written; the turn has no ``run_end``, which replay reads as a run cut
    off). Before, a second Ctrl-C only cancelled again: a task that tidied up for a minute
    held the chat that long, whatever the user pressed.

    Unlike :func:`sigterm_as_interrupt`, no :class:`KeyboardInterrupt` is ever raised inside
    the event loop (which left it stopping the next run, ``Event loop stopped before Future
    completed``); a SIGINT that the shell ignores (a script's background job) stays ignored."""

    def __init__(self, stop: Stop) -> None:
        self.stop = stop
        #: a stop arrived and the chat has not yet acted on it
        self.stopped = False
        self._task: asyncio.Task[Any] | None = None
        #: a stop cancelled :attr:`_task`, which has not ended yet
        self._cancelling = False
        self._waiting = False

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.stopped = True
        if signum == signal.SIGTERM:
            self.stop.terminated = True
        task = self._task
        if task is not None and not task.done():
            if self._cancelling:  # the second stop while the first one's cancellation is under way
                self._exit_now()
            self._cancelling = True
            task.cancel()
            task.get_loop().call_soon_threadsafe(lambda: None)  # wake a loop waiting in select
        elif self._waiting:
            raise KeyboardInterrupt

    def _exit_now(self) -> NoReturn:
        """End the process here: stdout flushed as far as it can be, one line, the stop's code.
        Nothing else runs (not the task's tidying, nor the loop's and the servers' closing)."""
        try:
            sys.stdout.flush()
        except (OSError, ValueError, RuntimeError):  # a closed pipe; a write this signal interrupted
            pass
        try:
            os.write(sys.stderr.fileno(), f"agentfsm: {self.stop.word}\n".encode())
        except (OSError, ValueError):
            pass
        os._exit(self.stop.code)

    @contextmanager
    def installed(self) -> Iterator[ChatStops]:
        """The handlers set while inside (SIGINT left alone where ignored), the previous ones
        restored on leaving. Off the main thread (where no handler can be set) nothing changes."""
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
        for sig, handler in previous.items():
            if handler is not signal.SIG_IGN or sig == signal.SIGTERM:
                signal.signal(sig, self._on_signal)
        try:
            yield self
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def run(self, runner: asyncio.Runner, coro: Coroutine[Any, Any, T]) -> T:
        """``coro`` run to its end on ``runner``, as a task that a stop cancels
        (:class:`asyncio.CancelledError`) until it has its result; then its result."""
        done: list[T] = []

        async def task() -> None:
            self._task = asyncio.current_task()
            if self.stopped:  # a stop came before the task began
                coro.close()
                raise asyncio.CancelledError
            done.append(await coro)  # at once: nothing in between can be cancelled

        self._cancelling = False
        try:
            runner.run(task())
        except asyncio.CancelledError:
            if not done:
                raise
        finally:
            self._task = None
            self._cancelling = False
        return done[0]

    @contextmanager
    def held(self) -> Iterator[None]:
        """Ctrl-C and SIGTERM held off while inside, then delivered (so recorded) on leaving:
        a signal that interrupts a large write to a pipe loses what was left of it (CPython
        3.11 wrote 128 KiB of a 500 KB answer, silently), so the answer is written whole."""
        block = getattr(signal, "pthread_sigmask", None)
        if block is None:
            yield
            return
        previous = block(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            yield
        finally:
            block(signal.SIG_SETMASK, previous)

    def prompt(self, read: Callable[[], str]) -> str | None:
        """The next line (``read()``); ``None`` once a stop came, or came while reading."""
        self._waiting = True
        try:
            if self.stopped:
                return None
            return read()
        except KeyboardInterrupt:
            return None
        finally:
            self._waiting = False
