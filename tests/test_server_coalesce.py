"""The proxy's responses leave in one write per loop turn (server/coalesce.py)."""

from __future__ import annotations

import asyncio
from typing import Any

from agentfsm.server.coalesce import CoalescingTransport


class _Recording(asyncio.Transport):
    """A transport that keeps what is written to it (the socket's side of the test)."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: Any) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_write_buffer_size(self) -> int:
        return 0

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else default


async def test_writes_in_one_turn_leave_as_one_and_later_turns_on_their_own() -> None:
    real = _Recording()
    out = CoalescingTransport(real, asyncio.get_running_loop())
    out.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
    out.write(b"ok")
    assert real.writes == []  # held until the turn ends
    await asyncio.sleep(0)
    assert real.writes == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"]
    # a stream: each event written in its own turn leaves on its own
    for event in (b"data: 1\n\n", b"data: 2\n\n"):
        out.write(event)
        await asyncio.sleep(0)
    assert real.writes[1:] == [b"data: 1\n\n", b"data: 2\n\n"]
    # other calls reach the socket's transport
    assert out.get_extra_info("peername") == ("127.0.0.1", 1)
    out.write(b"held")
    assert out.get_write_buffer_size() == 4


async def test_close_sends_what_is_held_first_and_abort_drops_it() -> None:
    real = _Recording()
    out = CoalescingTransport(real, asyncio.get_running_loop())
    out.write(b"last words")
    out.close()
    assert real.writes == [b"last words"] and real.closed
    await asyncio.sleep(0)  # the scheduled flush finds nothing more to send
    assert real.writes == [b"last words"]
