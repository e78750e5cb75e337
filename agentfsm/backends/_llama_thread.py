"""One thread for every llama.cpp call in the process.

llama.cpp's CPU threads are an OpenMP team, and libgomp keeps one team per thread that
calls into it. Once the process holds more OpenMP threads than the machine has cores
(the main thread's team, and a team for each worker thread that ever generated), libgomp
cuts the time its threads spin-wait between the steps of a decode, and every step then
pays a sleep and a wake-up: on a 2-core machine, the same greedy generation ran at
0.36x its speed when started from a worker thread (``asyncio.to_thread``, or any
``threading.Thread``) instead of the main one, and at full speed from one dedicated
thread (2.8 s for three 64-token replies in both, against 7.5 s;
``bench/bench_backends.py`` measures it). So every call that runs the model (loading,
generating, scoring) runs on :data:`MODEL_THREAD`: a sync caller waits for it, an async
one awaits it, a stream is handed over from it (:mod:`agentfsm.backends._handoff`).
Generations on one model are serial anyway (its lock), so one thread loses nothing.
"""

from __future__ import annotations

import asyncio
import os
import queue
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from agentfsm.backends._handoff import pump, read_in_thread

__all__ = ["MODEL_THREAD", "ModelThread"]

_T = TypeVar("_T")
_END = object()


class ModelThread:
    """A single worker thread that runs the model's calls (see the module)."""

    def __init__(self, name: str = "agentfsm-llama") -> None:
        self._name = name
        self._lock = threading.Lock()
        self._started: ThreadPoolExecutor | None = None
        self._ident: int | None = None
        # a forked child has no such thread: it starts its own on first use
        os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        self._lock = threading.Lock()
        self._started, self._ident = None, None

    @property
    def _executor(self) -> ThreadPoolExecutor:
        """The thread, started on first use."""
        with self._lock:
            if self._started is None:
                executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=self._name)
                self._ident = executor.submit(threading.get_ident).result()
                self._started = executor
            return self._started

    @property
    def here(self) -> bool:
        """Whether the caller is this thread (a call from it runs inline)."""
        return threading.get_ident() == self._ident

    def call(self, fn: Callable[[], _T]) -> _T:
        """``fn()`` on this thread; the caller waits."""
        if self.here:
            return fn()
        return self._executor.submit(fn).result()

    async def acall(self, fn: Callable[[], _T]) -> _T:
        """``fn()`` on this thread, awaited."""
        if self.here:
            return fn()
        return await asyncio.wrap_future(self._executor.submit(fn))

    def iterate(self, produce: Callable[[], Iterator[str]]) -> Iterator[str]:
        """The deltas of ``produce()``, made on this thread, read by a sync caller;
        closing the iterator stops the producer at its next delta."""
        if self.here:
            yield from produce()
            return
        box: queue.SimpleQueue[object] = queue.SimpleQueue()
        stop = threading.Event()

        def run() -> None:
            try:
                pump(produce, box.put, stop.is_set)
            except BaseException as exc:  # raised to the reader
                box.put(exc)
            box.put(_END)

        done = self._executor.submit(run)
        try:
            while (item := box.get()) is not _END:
                if isinstance(item, BaseException):
                    raise item
                assert isinstance(item, str)
                yield item
        finally:
            stop.set()
            done.result()

    def aiterate(self, produce: Callable[[], Iterator[str]], interval: float = 0.0) -> AsyncIterator[str]:
        """The deltas of ``produce()``, made on this thread, read on the event loop in
        batches (:func:`~agentfsm.backends._handoff.read_in_thread`)."""
        return read_in_thread(produce, interval, self._executor)


#: the process's model thread
MODEL_THREAD = ModelThread()
