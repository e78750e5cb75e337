"""``StreamParser``: parse a reply while it arrives, chunk by chunk.

Prose is emitted as :class:`TextDelta` as soon as it can no longer be the start of an
action (only a tail that could still grow into an opener, such as a lone ``{"na`` or
two backticks, is held back); a complete :class:`ToolCallDelta` is emitted when its
block closes. The outcome does not depend on how the reply was cut into chunks.

Whitespace: the deltas carry the prose exactly as written, blocks removed, with a
json-protocol thought or final answer in its block's place; ``result().content`` is
their concatenation with surrounding whitespace stripped (``None`` when empty), which is
exactly what :func:`~agentfsm.dialects.parse.parse_reply` returns for the whole text.

``feed`` takes ``str`` or ``bytes``: bytes are decoded as UTF-8 incrementally, so a
character split across chunks is fine (invalid bytes become U+FFFD).

In json-protocol strict mode a call is only valid if nothing but the one object was
written, which is known at the end: there, tool calls are emitted by :meth:`close`.
"""

from __future__ import annotations

import codecs
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

from agentfsm.core._types import DialectName
from agentfsm.dialects._collect import CALL
from agentfsm.dialects._scan import Scanner
from agentfsm.core.parsed import ParsedReply
from agentfsm.core.errors import UsageError
from agentfsm.core.messages import ToolCall, ToolDefinition
from agentfsm.dialects.parse import scanner_for

__all__ = ["StreamEvent", "StreamParser", "TextDelta", "ToolCallDelta"]


@dataclass(frozen=True)
class TextDelta:
    """A piece of prose, final: it will not turn out to be part of an action."""

    text: str


@dataclass(frozen=True)
class ToolCallDelta:
    """A complete tool call; ``index`` is its position in ``result().tool_calls``."""

    index: int
    call: ToolCall


StreamEvent: TypeAlias = TextDelta | ToolCallDelta


class StreamParser:
    """Incremental counterpart of :func:`~agentfsm.dialects.parse.parse_reply`."""

    def __init__(
        self,
        tools: Sequence[ToolDefinition] | None = None,
        dialect: DialectName | None = None,
        *,
        strict: bool = False,
    ) -> None:
        self._scanner: Scanner = scanner_for(tools, dialect, strict, stream=True)
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._calls = 0
        self._result: ParsedReply | None = None

    def feed(self, chunk: str | bytes) -> list[StreamEvent]:
        """Parse the next chunk; the events it completes, in order."""
        if self._result is not None:
            raise UsageError("StreamParser.feed() after close()")
        if isinstance(chunk, (bytes, bytearray, memoryview)):
            text = self._decoder.decode(bytes(chunk))
        else:
            text = self._decoder.decode(b"", final=True) + chunk
        self._scanner.feed(text)
        return self._take()

    def close(self) -> list[StreamEvent]:
        """The reply is over: flush what was held back, end open blocks (as truncated)."""
        if self._result is not None:
            return []
        self._scanner.feed(self._decoder.decode(b"", final=True), final=True)
        events = self._take()
        self._result = self._scanner.result()
        if self._scanner.strict:
            events.extend(ToolCallDelta(i, c) for i, c in enumerate(self._result.tool_calls))
        return events

    def result(self) -> ParsedReply:
        """The parsed reply, equal to ``parse_reply`` of the whole text (after :meth:`close`)."""
        if self._result is None:
            raise UsageError("StreamParser.result() before close()")
        return self._result

    def _take(self) -> list[StreamEvent]:
        out = self._scanner.out
        raw, out.events = out.events, []
        events: list[StreamEvent] = []
        for kind, value in raw:
            if kind == CALL:
                if not self._scanner.strict:
                    events.append(ToolCallDelta(self._calls, value))
                    self._calls += 1
            else:
                events.append(TextDelta(value))
        return events
