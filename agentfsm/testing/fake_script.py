"""What a fake upstream's script holds: the replies and faults it serves, and the requests it received.

Each step of a :class:`~agentfsm.testing.fake_upstream.FakeUpstream` script is a
:class:`FakeReply` (or a string, a plain reply); the constructors below build the
faults: ``latency``, ``stall``, ``reset``, ``status`` (with ``Retry-After``), ``garbage``,
a stream with no terminator, one that drips. :class:`ReceivedRequest` is what a client
sent, for assertions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from agentfsm.core._types import JSONObject

__all__ = [
    "FakeReply",
    "Fault",
    "ReceivedRequest",
    "Script",
    "drip",
    "flood",
    "garbage",
    "latency",
    "raw_body",
    "reply",
    "reset",
    "stall",
    "status",
    "stream_no_terminator",
]

Fault: TypeAlias = Literal["stall", "reset", "garbage", "no_terminator", "drip", "raw", "flood"]


@dataclass(frozen=True)
class FakeReply:
    """One scripted answer. Build it with the helper functions of this module."""

    text: str = ""
    finish_reason: str = "stop"
    #: the stop sequence that ended the text, reported as vLLM does (``stop_reason``)
    stop_reason: str | None = None
    #: seconds to wait before answering (concurrent requests wait concurrently); a client
    #: that leaves meanwhile ends the wait, and the request, as a real upstream's would
    latency: float = 0.0
    status: int = 200
    retry_after: float | str | None = None
    #: raw body for an error status (default: an OpenAI-style error object)
    body: str | None = None
    fault: Fault | None = None
    #: stall duration, or the interval between two dripped bytes
    seconds: float = 0.0
    #: drip filler forever (whitespace / SSE comments) instead of ever finishing
    forever: bool = False
    #: the usage to report, ``(prompt_tokens, completion_tokens)`` (default: counted, four
    #: characters a token)
    usage: tuple[int, int] | None = None
    #: the raw body of a ``raw`` reply, and its content type
    raw: bytes = b""
    content_type: str = "application/json"
    #: headers of a ``raw`` reply (``content-encoding`` ...)
    headers: tuple[tuple[str, str], ...] = ()


def reply(text: str, finish_reason: str = "stop", usage: tuple[int, int] | None = None) -> FakeReply:
    """A normal completion with ``text`` (reporting ``usage``, prompt and completion tokens,
    when given)."""
    return FakeReply(text=text, finish_reason=finish_reason, usage=usage)


def latency(seconds: float, text: str = "ok") -> FakeReply:
    """A normal completion sent after ``seconds`` (for concurrency benchmarks)."""
    return FakeReply(text=text, latency=seconds)


def stall(seconds: float) -> FakeReply:
    """Send nothing for ``seconds``, then close the connection without a response."""
    return FakeReply(fault="stall", seconds=seconds)


def reset() -> FakeReply:
    """Drop the connection with a TCP reset right after reading the request."""
    return FakeReply(fault="reset")


def status(code: int, retry_after: float | str | None = None, body: str | None = None) -> FakeReply:
    """An HTTP error status, optionally with a ``Retry-After`` header."""
    return FakeReply(status=code, retry_after=retry_after, body=body)


def garbage() -> FakeReply:
    """A 200 whose body is not JSON (as SSE: events whose data is not JSON)."""
    return FakeReply(fault="garbage")


def raw_body(
    body: bytes | str, content_type: str = "application/json", *, status: int = 200,
    headers: dict[str, str] | None = None,
) -> FakeReply:
    """Exactly ``body`` as the response (whatever the request asked for), with its
    ``content_type``, ``status`` and ``headers``: HTML, an error object with a 200, an SSE
    body written by hand, a gzip bomb with ``content-encoding: gzip``."""
    data = body.encode() if isinstance(body, str) else body
    return FakeReply(fault="raw", status=status, raw=data, content_type=content_type,
                     headers=tuple((headers or {}).items()))


def flood(text: str = "x" * 1000) -> FakeReply:
    """A 200 that never ends, as fast as the client reads: ``text`` as one SSE delta after
    another (streamed), or a JSON completion whose content never closes."""
    return FakeReply(text=text, fault="flood")


def stream_no_terminator(text: str = "partial") -> FakeReply:
    """SSE deltas, then a clean end of body with neither finish_reason nor ``[DONE]``.

    To a non-streaming request: a JSON body cut in the middle (with a matching length).
    """
    return FakeReply(text=text, fault="no_terminator")


def drip(interval: float, text: str = "slow", forever: bool = False) -> FakeReply:
    """Send the response one byte every ``interval`` seconds (or filler forever)."""
    return FakeReply(text=text, fault="drip", seconds=interval, forever=forever)


@dataclass(frozen=True)
class ReceivedRequest:
    """A request the fake received: for assertions on what a client sent."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    #: time.monotonic() when it arrived
    received_at: float = field(default=0.0, compare=False)
    #: the query string of the request's target, without its ``?``
    query: str = ""

    @property
    def stream(self) -> bool:
        """Whether the client asked for SSE."""
        return isinstance(self.body, dict) and bool(self.body.get("stream"))

    @property
    def messages(self) -> list[JSONObject]:
        """The ``messages`` of a chat request (empty for other requests)."""
        if isinstance(self.body, dict) and isinstance(self.body.get("messages"), list):
            return list(self.body["messages"])
        return []


Script: TypeAlias = "Iterable[FakeReply | str] | Callable[[ReceivedRequest], FakeReply | str] | None"
