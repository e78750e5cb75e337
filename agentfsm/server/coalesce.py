"""One write per response: uvicorn's httptools protocol with writes coalesced.

uvicorn writes a response's status line and headers, then its body, as two
``transport.write`` calls: two ``send`` syscalls (and two wake-ups of the client) for
each non-streamed answer. Here the writes made within one turn of the event loop are
joined and sent once, at the end of that turn (or at once when the connection
closes). A streamed response's events still leave as they are produced: each is
written in its own turn.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["CoalescedHttpTools", "CoalescingTransport", "http_protocol"]


def http_protocol() -> Any:
    """What to pass as uvicorn's ``http``: :class:`CoalescedHttpTools` (httptools is a
    dependency); ``"auto"`` should it be missing."""
    return CoalescedHttpTools


class CoalescingTransport:
    """A transport whose writes within one loop turn leave as one write."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        if not self._pending:
            self._loop.call_soon(self._flush)
        self._pending.append(bytes(data))

    def writelines(self, chunks: Any) -> None:
        for chunk in chunks:
            self.write(chunk)

    def _flush(self) -> None:
        if self._pending:
            data = b"".join(self._pending) if len(self._pending) > 1 else self._pending[0]
            self._pending.clear()
            if not self._transport.is_closing():
                self._transport.write(data)

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def write_eof(self) -> None:
        self._flush()
        self._transport.write_eof()

    def abort(self) -> None:
        self._pending.clear()
        self._transport.abort()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + sum(map(len, self._pending))

    def __getattr__(self, name: str) -> Any:
        # is_closing, get_extra_info, pause_reading, resume_reading, set_protocol, ...
        return getattr(self._transport, name)


class CoalescedHttpTools(HttpToolsProtocol):
    """uvicorn's httptools protocol on a :class:`CoalescingTransport`."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # as uvicorn
        coalescing: Any = CoalescingTransport(transport, asyncio.get_running_loop())  # duck-typed
        super().connection_made(coalescing)
