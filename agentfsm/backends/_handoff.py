"""Text made in a worker thread, read on the event loop without a wake-up per token.

A generation in a worker thread appends its deltas to a :class:`Mailbox` under a lock;
the event loop is woken only when its reader is waiting, and then takes everything that
has arrived at once. Handing over each token with its own ``call_soon_threadsafe``
costs a loop wake-up (and, on a machine whose cores the model's threads already fill,
a stalled decode) per token.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import Executor

__all__ = ["Mailbox", "pump", "read_in_thread"]


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class Mailbox:
    """Deltas from one producer thread to one reader on ``loop``."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._lock = threading.Lock()
        self._items: list[str] = []
        self._done = False
        self._error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._ending: asyncio.Future[None] | None = None
        #: set when the reader stopped reading (the producer should stop)
        self.cancelled = threading.Event()

    def _post(self, item: str | None, error: BaseException | None = None) -> None:
        with self._lock:
            ending = None
            if item is None:
                self._done, self._error = True, error
                ending, self._ending = self._ending, None
            else:
                self._items.append(item)
            waiter, self._waiter = self._waiter, None
        for future in (waiter, ending):
            if future is not None:
                try:
                    self._loop.call_soon_threadsafe(_wake, future)
                except RuntimeError:  # the loop is gone: nobody is listening
                    self.cancelled.set()

    def put(self, item: str) -> None:
        """Producer: one more delta."""
        self._post(item)

    def close(self, error: BaseException | None = None) -> None:
        """Producer: no more deltas (``error``: raised to the reader after the last one)."""
        self._post(None, error)

    async def pause(self, seconds: float) -> None:
        """Reader: wait ``seconds``, or less if the producer ends meanwhile (the last
        deltas are read at once, not at the end of a batching interval)."""
        with self._lock:
            if self._done:
                return
            ending = self._ending = self._loop.create_future()
        try:
            await asyncio.wait_for(ending, seconds)
        except TimeoutError:
            pass

    async def take(self) -> str | None:
        """Reader: everything that arrived since the last take, joined (waiting for at least
        one delta); ``None`` at the end."""
        while True:
            with self._lock:
                if self._items:
                    items, self._items = self._items, []
                    return "".join(items)
                if self._done:
                    if self._error is not None:
                        raise self._error
                    return None
                waiter = self._waiter = self._loop.create_future()
            await waiter


def pump(produce: Callable[[], Iterator[str]], put: Callable[[str], None], stopped: Callable[[], bool]) -> None:
    """Producer side: each delta of ``produce()`` to ``put`` until it ends or ``stopped()``;
    the generator is closed either way (its errors propagate)."""
    deltas = produce()
    try:
        for delta in deltas:
            if stopped():
                break
            put(delta)
    finally:
        close = getattr(deltas, "close", None)
        if close is not None:
            close()


async def read_in_thread(
    produce: Callable[[], Iterator[str]], interval: float = 0.0, executor: Executor | None = None
) -> AsyncIterator[str]:
    """The deltas of ``produce()``, run in a worker thread, as they arrive (several at once
    when the reader is slower than the producer); closing this stops the producer.

    With ``interval`` > 0, a take comes at least ``interval`` seconds after the one before
    (the first delta is read as soon as it arrives): the deltas of that time are read in
    one batch, and the event loop wakes at most once per interval, not once per token.
    ``executor``: where ``produce`` runs (default: the loop's, as ``asyncio.to_thread``).
    """
    loop = asyncio.get_running_loop()
    mailbox = Mailbox(loop)

    def run() -> None:
        try:
            pump(produce, mailbox.put, mailbox.cancelled.is_set)
        except BaseException as exc:  # handed to the reader, re-raised there
            mailbox.close(exc)
        else:
            mailbox.close()

    worker = asyncio.ensure_future(asyncio.to_thread(run) if executor is None else loop.run_in_executor(executor, run))
    try:
        while (text := await mailbox.take()) is not None:
            taken = loop.time()
            yield text
            if interval > 0 and (left := taken + interval - loop.time()) > 0:
                await mailbox.pause(left)
    finally:
        mailbox.cancelled.set()
        await worker
