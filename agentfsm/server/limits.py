"""What one client may hold of the proxy: a connection's headers in time, a bounded number of
connections, and a share of the upstream's pool.

- **Headers in time.** uvicorn holds a connection whose request headers trickle in for
  as long as they trickle (300 of 300 such connections were open after 60 s). The
  protocol made by :func:`guarded_protocol` closes a connection whose request line and
  headers have not all arrived within ``header_timeout`` seconds of its first byte
  (of the connection, or of the next request on a kept-alive one), with a 408.
- **A bounded number of connections.** Past ``max_connections`` open at once, a new
  connection is answered 503 and closed at once: at the process's descriptor limit new
  clients were refused and the upstream could not be reached.
- **A share of the upstream pool.** :class:`ClientShare` lets one client (one address)
  have at most ``share`` requests at the upstream at once; its others wait their turn
  in the proxy instead of taking the pool's every connection (100 slow calls from one
  client made everyone else wait up to 30 s).
"""

from __future__ import annotations

import asyncio
import resource
from typing import Any

from agentfsm.server.settings import DEFAULT_HEADER_TIMEOUT

__all__ = [
    "DEFAULT_HEADER_TIMEOUT",
    "ClientShare",
    "default_max_connections",
    "guarded_protocol",
]

_TOO_MANY = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"connection: close\r\ncontent-length: 48\r\n\r\ntoo many open connections to this proxy; retry.\n"
)
_TOO_SLOW = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"connection: close\r\ncontent-length: 45\r\n\r\nthe request headers did not arrive in time.\n"
)


def default_max_connections() -> int:
    """Client connections open at once by default: 1,000, or half the descriptors this
    process may open when that is fewer (the rest are for upstream connections and files)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 1000
    return max(16, min(1000, soft // 2))


def guarded_protocol(header_timeout: float, max_connections: int) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol (httptools where installed, else h11) with a header deadline
    and a connection limit; pass it as ``uvicorn.run(app, http=...)``."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as Base
    except ImportError:  # httptools not installed
        from uvicorn.protocols.http.h11_impl import H11Protocol as Base  # type: ignore[assignment]

    class GuardedProtocol(Base):
        """See :mod:`agentfsm.server.limits`."""

        _deadline: asyncio.TimerHandle | None = None
        _waiting_for: Any = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                transport.write(_TOO_MANY)
                transport.close()
                return
            self._arm()

        def data_received(self, data: bytes) -> None:
            if self._deadline is None and (self.cycle is None or self.cycle.response_complete):
                self._arm()  # the next request on a kept-alive connection starts
            super().data_received(data)
            if self._deadline is not None and self.cycle is not None and self.cycle is not self._waiting_for:
                self._disarm()  # its headers are in: the body has its own timeout

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._waiting_for = self.cycle
            self._deadline = self.loop.call_later(header_timeout, self._too_slow)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _too_slow(self) -> None:
            self._deadline = None
            if not self.transport.is_closing():
                self.transport.write(_TOO_SLOW)
                self.transport.close()

    return GuardedProtocol


class ClientShare:
    """At most ``share`` requests of one client (by address) at the upstream at once
    (None: no bound). :meth:`enter` waits for one of the client's places; :meth:`leave`
    gives it back (once per successful ``enter``)."""

    def __init__(self, share: int | None) -> None:
        self.share = share
        #: client -> (its places, requests holding or waiting for one)
        self._gates: dict[str, tuple[asyncio.Semaphore, int]] = {}

    def busy(self, client: str) -> int:
        """Requests of ``client`` holding or waiting for a place."""
        return self._gates.get(client, (None, 0))[1]

    async def enter(self, client: str) -> None:
        """Wait for a place (cancellable: a cancelled wait holds nothing)."""
        if self.share is None:
            return
        gate, users = self._gates.get(client, (asyncio.Semaphore(self.share), 0))
        self._gates[client] = (gate, users + 1)
        try:
            await gate.acquire()
        except BaseException:
            self._forget(client)
            raise

    def leave(self, client: str) -> None:
        """Give the place back."""
        if self.share is None:
            return
        self._gates[client][0].release()
        self._forget(client)

    def _forget(self, client: str) -> None:
        gate, users = self._gates[client]
        if users <= 1:
            del self._gates[client]  # no state kept for clients that are gone
        else:
            self._gates[client] = (gate, users - 1)
