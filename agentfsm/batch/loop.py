"""The event loop and garbage collector a batch runs under (:func:`run_on_batch_loop`).

uvloop's loop where it is installed (a dependency off Windows), else asyncio's; the
collector tuned for throughput while the batch runs (:func:`batch_collector`). The one
path of :func:`~agentfsm.batch.controller.run_batch_sync` and ``agentfsm batch``.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from agentfsm.core.errors import UsageError

__all__ = ["YOUNG_COLLECTION_THRESHOLD", "batch_collector", "run_on_batch_loop"]

_T = TypeVar("_T")
#: allocations between young garbage collections while a batch runs (CPython's default: 700)
YOUNG_COLLECTION_THRESHOLD = 50_000


def run_on_batch_loop(main: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
    """``main()`` run to the end on a new event loop, the way a batch runs (the one
    path of :func:`run_batch_sync` and ``agentfsm batch``): uvloop's loop where it is
    installed (a dependency off Windows), else asyncio's, inside :func:`batch_collector`.
    Raises :class:`~agentfsm.core.errors.UsageError` inside a running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise UsageError("run_batch_sync() was called inside a running event loop; use run_batch()")
    with batch_collector(), asyncio.Runner(loop_factory=_fast_loop()) as runner:
        return runner.run(main())


@contextmanager
def batch_collector() -> Iterator[None]:
    """The garbage collector tuned for a batch's throughput, restored on exit.

    What is alive when the batch starts (modules, tools, the task list) is frozen out
    of collections (:func:`gc.freeze`), and young collections run every
    :data:`YOUNG_COLLECTION_THRESHOLD` allocations instead of 700. With CPython's
    defaults a batch of 1,000 conversations collected ~110 times, ~0.5 ms each, and
    its one full collection (~40 ms) stalled every conversation in flight at once,
    which then came back together and queued for the one event loop (bench_batch:
    wall / ideal 1.25x -> 1.21x, medians of 10 alternated runs). Collections still run,
    so cycles are still freed, a few MB later. The settings are the process's: a
    collector the caller froze already stays as it was.
    """
    threshold = gc.get_threshold()
    freeze = gc.get_freeze_count() == 0  # a caller's own freeze is left as it is
    if freeze:
        gc.freeze()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, *threshold[1:])
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        if freeze:
            gc.unfreeze()


def _fast_loop() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop where it is installed (a dependency off Windows), else asyncio's."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop
