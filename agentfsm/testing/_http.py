"""A minimal HTTP/1.1 server on asyncio, run in a background thread.

Just enough HTTP for a fake upstream: keep-alive, ``Content-Length`` and chunked
request bodies, JSON and chunked (SSE) responses, and faults a real framework
would not let a handler produce (an abrupt TCP reset, a silent stall, a drip).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

__all__ = ["HTTPRequest", "ResponseWriter", "ThreadedHTTPServer"]

_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    408: "Request Timeout",
    409: "Conflict",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


@dataclass(frozen=True)
class HTTPRequest:
    """One request as received: method, path, lower-cased headers, raw body, query string."""

    method: str
    path: str
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    #: the target's query string, without its ``?`` ('' when none)
    query: str = ""

    def json(self) -> Any:
        """The body parsed as JSON, or None when it is empty or not JSON."""
        if not self.body:
            return None
        try:
            return orjson.loads(self.body)
        except orjson.JSONDecodeError:
            pass  # what orjson refuses (NaN, huge integers, lone surrogates) json may read
        try:
            return json.loads(self.body)
        except ValueError:
            return None


class ResponseWriter:
    """Writes one response on a connection; also knows how to break it."""

    def __init__(self, writer: asyncio.StreamWriter, reader: asyncio.StreamReader | None = None) -> None:
        self._writer = writer
        self._reader = reader
        self.keep_alive = True

    async def wait(self, seconds: float, every: float = 0.05) -> None:
        """Sleep ``seconds``, unless the client leaves first (its end of the connection
        closed): :class:`ConnectionResetError` then, as a write to it would raise, so a
        reply held back stops as a real server's does when its client goes away."""
        loop = asyncio.get_running_loop()
        end = loop.time() + seconds
        while (left := end - loop.time()) > 0:
            if (self._reader is not None and self._reader.at_eof()) or self._writer.transport.is_closing():
                raise ConnectionResetError("the client went away")
            await asyncio.sleep(min(every, left))

    async def send(
        self,
        status: int,
        body: bytes,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> None:
        """A complete response with ``Content-Length``."""
        head = self._head(status, content_type, headers, {"content-length": str(len(body))})
        self._writer.write(head + body)
        await self._writer.drain()

    async def start_chunked(
        self, status: int, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        """Start a chunked response (used for SSE and for drips)."""
        self._writer.write(
            self._head(status, content_type, headers, {"transfer-encoding": "chunked"})
        )
        await self._writer.drain()

    async def chunk(self, data: bytes) -> None:
        """Send one chunk of a chunked response (empty data is skipped)."""
        if data:
            self._writer.write(b"%x\r\n%s\r\n" % (len(data), data))
            await self._writer.drain()

    async def end_chunked(self) -> None:
        """Terminate a chunked response cleanly."""
        self._writer.write(b"0\r\n\r\n")
        await self._writer.drain()

    async def raw(self, data: bytes) -> None:
        """Write bytes as they are (for dripping a response byte by byte)."""
        self._writer.write(data)
        await self._writer.drain()

    def reset(self) -> None:
        """Drop the connection with a TCP RST, without any response."""
        self.keep_alive = False
        sock = self._writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self._writer.transport.abort()

    def close(self) -> None:
        """Close the connection after what has been written (a FIN, not a RST)."""
        self.keep_alive = False
        self._writer.close()

    def _head(
        self,
        status: int,
        content_type: str,
        headers: dict[str, str] | None,
        framing: dict[str, str],
    ) -> bytes:
        lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}"]
        merged = {"content-type": content_type, **(headers or {}), **framing}
        if not self.keep_alive:
            merged["connection"] = "close"
        lines += [f"{k}: {v}" for k, v in merged.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


Handler = Callable[[HTTPRequest, ResponseWriter], Awaitable[None]]


async def _read_request(reader: asyncio.StreamReader) -> HTTPRequest | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, target, _version = (lines[0].split(" ", 2) + ["", ""])[:3]
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    if "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    elif headers.get("transfer-encoding", "").lower() == "chunked":
        parts: list[bytes] = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            data = await reader.readexactly(size + 2)
            if size == 0:
                break
            parts.append(data[:-2])
        body = b"".join(parts)
    else:
        body = b""
    path, _, query = target.partition("?")
    return HTTPRequest(method=method, path=path, headers=headers, body=body, query=query)


class ThreadedHTTPServer:
    """Serves ``handler`` on 127.0.0.1 from an event loop in a daemon thread."""

    def __init__(self, handler: Handler, host: str = "127.0.0.1", port: int = 0) -> None:
        self._handler = handler
        self._host = host
        self._port = port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        #: each open connection's task and its writer (until its socket is closed)
        self._connections: dict[asyncio.Task[None], asyncio.StreamWriter] = {}
        self.port = 0

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The server's event loop (valid while started)."""
        if self._loop is None:
            raise RuntimeError("server not started")
        return self._loop

    def start(self) -> None:
        """Bind, start the loop thread, and return once the socket listens."""
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name="fake-upstream", daemon=True)
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self._listen(), loop)
        self.port = future.result(timeout=10)

    def stop(self) -> None:
        """Close every connection, stop the loop and join its thread."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()
        self._loop = self._thread = None

    async def _listen(self) -> int:
        self._server = await asyncio.start_server(
            self._serve_connection, self._host, self._port, backlog=1024
        )
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for _ in range(5):
            # a connection accepted just before the close gets its transport and its task
            # over the next turns of the loop (cancelled before that, its socket would leak)
            await asyncio.sleep(0)
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.wait(list(self._connections), timeout=5)
        for writer in self._connections.values():
            # a connection whose close still waits to flush to a client that stopped
            # reading: its socket would outlive the loop (and be collected unclosed)
            writer.transport.abort()
        self._connections.clear()
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections[task] = writer
        response = ResponseWriter(writer, reader)
        try:
            while response.keep_alive:
                request = await _read_request(reader)
                if request is None:
                    break
                if request.headers.get("connection", "").lower() == "close":
                    response.keep_alive = False
                await self._handler(request, response)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away: nothing to answer
        except asyncio.CancelledError:
            pass  # server shutdown
        finally:
            if not writer.transport.is_closing():
                writer.close()
            try:
                await asyncio.wait_for(writer.wait_closed(), 1)
            except Exception:  # noqa: BLE001 - unflushed to a client that stopped reading, or reset
                writer.transport.abort()  # close() waits for the flush: drop the socket now
            self._connections.pop(task, None)
