"""What one client may hold of the proxy: a connection's headers in time, a bounded number of
connections, and a share of the upstream's pool.

- **Headers in time.** uvicorn holds a connection whose request headers trickle in for
  as long as they trickle (300 of 300 such connections were open after 60 s). The
  protocol made by :func:`guarded_protocol` closes a connection whose request line and
  headers have not all arrived within ``header_timeout`` seconds of its first byte
  (of the connection, or of the next request on a kept-alive one), with a 408.
- **Headers of a bounded size.** Request headers past ``max_header_bytes`` (64 KiB) are
  answered 431 and the connection closed: uvicorn's httptools parser has no bound of its
  own (a client trickling one endless header grew the process by ~30 MB a second until
  the header deadline).
- **A bounded number of connections.** Past ``max_connections`` open at once, a new
  connection is answered 503 (``retry-after: 1``) and closed: at the process's descriptor
  limit new clients were refused and the upstream could not be reached.
- **A share of the upstream pool.** :class:`ClientShare` lets one client (one address)
  have at most ``share`` requests at each upstream at once; its others wait their turn
  in the proxy instead of taking the pool's every connection (100 slow calls from one
  client made everyone else wait up to 30 s). Each upstream (each served model's
  backend, which has its own pool) is shared apart: a client's calls stuck at a model
  whose upstream hangs held its every place, and its requests for the other models
  waited behind them.

The 408, 431 and 503 are each the provider's JSON error, chosen by the request line's path
(Anthropic's for ``/v1/messages``), so the SDKs raise their own error and retry a 503.
The connection is then half-closed and what the client still sends is read and dropped
for up to :data:`LINGER` seconds: closed at once, a socket with unread request bytes
is reset, and the client saw a connection error instead of the answer (15 of 15
connections past the limit, before).
"""

from __future__ import annotations

import asyncio
import resource
from collections.abc import Hashable
from typing import Any

from agentfsm.server.settings import DEFAULT_HEADER_TIMEOUT

__all__ = [
    "DEFAULT_HEADER_TIMEOUT",
    "LINGER",
    "MAX_HEADER_BYTES",
    "ClientShare",
    "default_max_connections",
    "guarded_protocol",
]

#: the most bytes of request line and headers one request may send (431 above)
MAX_HEADER_BYTES = 64 * 1024
#: seconds a refused connection is read (and dropped) after its answer, and the most a
#: connection past the limit waits for its request line, whose path picks the error's shape
LINGER = 1.0

_REASONS = {408: "Request Timeout", 431: "Request Header Fields Too Large", 503: "Service Unavailable"}
_MESSAGES = {
    408: "the request headers did not arrive in time",
    431: "the request headers are larger than this proxy takes",
    503: "too many open connections to this proxy; retry",
}


def _answer(status: int, head: bytes) -> bytes:
    """A whole HTTP response refusing a connection, its body the error of the protocol
    whose path the request line ``head`` names (OpenAI's when there is none)."""
    import json

    from agentfsm.server.wire import wire_for_path

    parts = bytes(head).split(b" ", 2)
    path = parts[1].decode("latin-1") if len(parts) > 1 else ""
    body = json.dumps(wire_for_path(path).error(status, _MESSAGES[status])).encode()
    retry = b"retry-after: 1\r\n" if status == 503 else b""
    return (
        b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\nconnection: close\r\n%scontent-length: %d\r\n\r\n%s"
        % (status, _REASONS[status].encode(), retry, len(body), body)
    )


def _head_end(tail: bytes, data: bytes) -> int:
    """How many bytes of ``data`` belong to the request's head: up to and including the
    blank line that ends it, or all of them while it has not ended. ``tail`` is the last
    bytes (at most 3) of the head received before, where that line may have begun; the
    chunk itself is searched in place, never copied."""
    if tail:
        split = (tail + data[:3]).find(b"\r\n\r\n")
        if split >= 0:
            return split + 4 - len(tail)
    end = data.find(b"\r\n\r\n")
    return len(data) if end < 0 else end + 4


def default_max_connections() -> int:
    """Client connections open at once by default: 1,000, or half the descriptors this
    process may open when that is fewer (the rest are for upstream connections and files)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 1000
    return max(16, min(1000, soft // 2))


def guarded_protocol(
    header_timeout: float, max_connections: int, max_header_bytes: int = MAX_HEADER_BYTES
) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol (httptools where installed, else h11) with a header deadline,
    a header size bound and a connection limit; pass it as ``uvicorn.run(app, http=...)``."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as Base
    except ImportError:  # httptools not installed
        from uvicorn.protocols.http.h11_impl import H11Protocol as Base  # type: ignore[assignment]

    # past this many open (the refused ones lingering included), a connection is closed
    # at once, unread: lingering must not spend the descriptors the limit keeps
    ceiling = max_connections + max(16, max_connections // 4)

    class GuardedProtocol(Base):
        """See :mod:`agentfsm.server.limits`."""

        _deadline: asyncio.TimerHandle | None = None
        _waiting_for: Any = None
        #: the request line and headers received so far (of the request being waited for)
        _head: bytearray | None = None
        _head_bytes = 0
        #: the last bytes received while the headers are awaited (an end split across reads)
        _tail = b""
        #: the status this connection is refused with (0: it is served)
        _refusing = 0
        _answered = False

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                self._refusing = 503
                if len(self.connections) > ceiling:
                    transport.write(_answer(503, b""))
                    transport.close()
                    return
                # answered once its request line says which protocol it speaks
                self._deadline = self.loop.call_later(min(header_timeout, LINGER), self._refuse)
                return
            self._arm()

        def data_received(self, data: bytes) -> None:
            if self._refusing:
                if not self._answered:
                    self._head = bytearray(data[:256])
                    self._refuse()
                return  # read and dropped until the linger ends
            if self._deadline is None and (self.cycle is None or self.cycle.response_complete):
                self._arm()  # the next request on a kept-alive connection starts
            if self._deadline is not None and self._head is not None:  # headers awaited
                if len(self._head) < 256:
                    self._head += data[: 256 - len(self._head)]
                # their size, measured before the parser sees them (it would start the
                # request as soon as they end, in this very chunk)
                self._head_bytes += _head_end(self._tail, data)
                if self._head_bytes > max_header_bytes:
                    self._refuse(431)
                    return
                self._tail = (self._tail + data)[-3:] if len(data) < 3 else data[-3:]
            super().data_received(data)
            if self._deadline is not None and self.cycle is not None and self.cycle is not self._waiting_for:
                self._disarm()  # its headers are in: the body has its own timeout

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._waiting_for = self.cycle
            self._head, self._head_bytes, self._tail = bytearray(), 0, b""
            self._deadline = self.loop.call_later(header_timeout, self._refuse, 408)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None
            self._head = None

        def _refuse(self, status: int = 0) -> None:
            """Answer ``status`` (or the one this connection was refused with), stop
            serving it, half-close it and drop what it still sends for :data:`LINGER` seconds."""
            head = bytes(self._head or b"")
            self._disarm()
            self._refusing = self._refusing or status
            if self._answered or self.transport.is_closing():
                return
            self._answered = True
            self.transport.write(_answer(self._refusing, head))
            if self.transport.can_write_eof():
                self.transport.write_eof()
            self._deadline = self.loop.call_later(LINGER, self.transport.close)

    return GuardedProtocol


class ClientShare:
    """At most ``share`` requests of one client at one upstream at once (None: no bound);
    ``client`` is what tells them apart (the proxy's: the address and the upstream).
    :meth:`enter` waits for one of the client's places; :meth:`leave` gives it back (once
    per successful ``enter``)."""

    def __init__(self, share: int | None) -> None:
        self.share = share
        #: client -> (its places, requests holding or waiting for one)
        self._gates: dict[Hashable, tuple[asyncio.Semaphore, int]] = {}

    def busy(self, client: Hashable) -> int:
        """Requests of ``client`` holding or waiting for a place."""
        return self._gates.get(client, (None, 0))[1]

    async def enter(self, client: Hashable) -> None:
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

    def leave(self, client: Hashable) -> None:
        """Give the place back."""
        if self.share is None:
            return
        self._gates[client][0].release()
        self._forget(client)

    def _forget(self, client: Hashable) -> None:
        gate, users = self._gates[client]
        if users <= 1:
            del self._gates[client]  # no state kept for clients that are gone
        else:
            self._gates[client] = (gate, users - 1)
