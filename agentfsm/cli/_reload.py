"""``agentfsm serve`` (one process): SIGHUP builds the app again, as a worker's restart does.

With ``--workers``, uvicorn's supervisor answers SIGHUP by replacing the workers one at
a time, each building its app from the options again: so the models file, its profiles
and the transcripts folder are read again, and an edit to the file is applied without a
request being dropped. One process does the same here: :class:`Reloadable` is the ASGI
app uvicorn runs, holding the app the options describe; on SIGHUP it builds a new one
(off the loop: a models file is read, an embedded model may be loaded), and from then on
new requests go to it, while those under way end on the app they began on, whose
upstream pools are closed once the last of them has ended. A file that no longer loads
changes nothing: the models served stay as they were, and one line says why.

The keys are read from the variables the process started with (a process's environment
cannot be changed from outside), so a rotated key needs a restart, as it does with
workers.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable, MutableMapping
from contextlib import AbstractAsyncContextManager
from typing import Any

from loguru import logger

from agentfsm.core.errors import AgentFSMError

__all__ = ["Reloadable"]

#: None where the platform has no SIGHUP (Windows)
_SIGHUP: signal.Signals | None = getattr(signal, "SIGHUP", None)
#: how long the stop waits for a replaced app's last requests before closing its pools
_SETTLE = 1.0

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class _Generation:
    """One built app, its lifespan (entered while it serves) and its requests under way."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.lifespan: AbstractAsyncContextManager[Any] = app.router.lifespan_context(app)
        self.requests = 0
        self.idle = asyncio.Event()
        self.idle.set()

    async def serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.requests += 1
        self.idle.clear()
        try:
            await self.app(scope, receive, send)
        finally:
            self.requests -= 1
            if not self.requests:
                self.idle.set()


class Reloadable:
    """The ASGI app of a one-process ``serve``: ``app`` (built from the options) until
    SIGHUP, then what ``build`` returns, called off the loop."""

    def __init__(self, app: Any, build: Callable[[], Any]) -> None:
        self._first: Any = app
        self._build = build
        self._current: _Generation | None = None
        self._retiring: set[asyncio.Task[None]] = set()
        self._reloading: asyncio.Task[None] | None = None
        self._again = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        current = self._current
        if current is None:  # served without a lifespan (uvicorn's lifespan="off")
            await self._first(scope, receive, send)
            return
        await current.serve(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        await receive()  # lifespan.startup
        self._current, self._first = _Generation(self._first), None  # not held once replaced
        await self._current.lifespan.__aenter__()
        loop = asyncio.get_running_loop()
        if _SIGHUP is not None:
            loop.add_signal_handler(_SIGHUP, self._hup)
        await send({"type": "lifespan.startup.complete"})
        await receive()  # lifespan.shutdown: the requests under way have ended or been cancelled
        if _SIGHUP is not None:
            loop.remove_signal_handler(_SIGHUP)
        if self._reloading is not None:
            self._reloading.cancel()
            await asyncio.gather(self._reloading, return_exceptions=True)
        await self._current.lifespan.__aexit__(None, None, None)
        if self._retiring:  # each closes its pools once its last request has ended (bounded: they have)
            _, left = await asyncio.wait(set(self._retiring), timeout=_SETTLE)
            for task in left:
                task.cancel()
            await asyncio.gather(*left, return_exceptions=True)
        await send({"type": "lifespan.shutdown.complete"})

    def _hup(self) -> None:
        if self._reloading is not None:  # one at a time; a signal during one reads the file once more after it
            self._again = True
            return
        self._reloading = asyncio.get_running_loop().create_task(self._reload())

    async def _reload(self) -> None:
        try:
            while True:
                self._again = False
                await self._replace()
                if not self._again:
                    return
        finally:
            self._reloading = None

    async def _replace(self) -> None:
        try:
            app = await asyncio.to_thread(self._build)
        except Exception as exc:  # noqa: BLE001 - whatever failed, the running app keeps serving
            why = str(exc) if isinstance(exc, AgentFSMError) else f"{type(exc).__name__}: {exc}"
            logger.error(f"SIGHUP: not built again, the models served stay as they were: {why}")
            return
        new = _Generation(app)
        await new.lifespan.__aenter__()
        old, self._current = self._current, new
        logger.warning(f"SIGHUP: serving {', '.join(app.state.models.names)} as built again")
        if old is not None:
            task = asyncio.get_running_loop().create_task(self._retire(old))
            self._retiring.add(task)
            task.add_done_callback(self._retiring.discard)

    @staticmethod
    async def _retire(old: _Generation) -> None:
        """Close the old app's upstream pools once its last request has ended."""
        try:
            await old.idle.wait()
        finally:
            await old.lifespan.__aexit__(None, None, None)
