"""A sync tool runs in a daemon thread of its own, not in the event loop's executor.

A thread cannot be stopped from outside. In the loop's default executor (``asyncio.to_thread``)
a tool that is still running when its run is cancelled holds up the end of the program:
``asyncio.run`` waits for that executor to shut down, and the interpreter joins its
threads at exit, so Ctrl-C on ``agentfsm run`` during a tool that sleeps or hangs returned
only when the tool did (a second Ctrl-C did not help). In a daemon thread the run ends
when it is cancelled, the program exits when it is told to, and a tool that outlives its
run is left to finish (its result is dropped) or to end with the process.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["in_daemon_thread"]


async def in_daemon_thread(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` in a daemon thread, in a copy of the caller's context (as
    ``asyncio.to_thread``: context variables such as the idempotency key carry over)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def settle(value: Any, error: BaseException | None) -> None:
        if done.cancelled():  # the run was cancelled while the tool ran: nobody waits
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(value)

    def work() -> None:
        value: Any = None
        error: BaseException | None = None
        try:
            value = context.run(fn, *args, **kwargs)
        except BaseException as exc:  # handed to the awaiting run, as to_thread would
            error = exc
        try:
            loop.call_soon_threadsafe(settle, value, error)
        except RuntimeError:  # the loop is closed: the run that asked is long over
            pass

    threading.Thread(target=work, name=f"agentfsm-tool-{getattr(fn, '__name__', 'tool')}", daemon=True).start()
    return await done
