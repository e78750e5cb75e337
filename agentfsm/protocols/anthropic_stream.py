"""Anthropic messages streaming: named server-sent events.

The sequence is: ``message_start`` (usage: the input tokens of the first model call's
prompt, as measured before the call); for each content block ``content_block_start``,
deltas (``text_delta`` for text, ``input_json_delta`` with ``partial_json`` for
``tool_use``), ``content_block_stop``; then ``message_delta`` with ``stop_reason`` and
the final usage (``input_tokens`` and ``output_tokens``, cumulative over the model calls,
the numbers a non-streamed answer reports), and ``message_stop``. A failure mid-stream ends it with ``event: error``, which
the official SDK raises as an error rather than taking for a clean end.
"""

from __future__ import annotations

from typing import Any

from agentfsm.core._types import JSONObject
from agentfsm.core.backend import Usage
from agentfsm.core.errors import UsageError
from agentfsm.core.messages import ToolCall
from agentfsm.protocols.anthropic import anthropic_error, anthropic_stop_reason
from agentfsm.protocols.common import dump_arguments, sse_event

__all__ = ["AnthropicStreamEncoder"]


def _event(name: str, **fields: Any) -> str:
    return sse_event({"type": name, **fields}, event=name)


class AnthropicStreamEncoder:
    """Turns one reply, as it is produced, into Anthropic SSE strings.

    Every method returns the events to write, possibly none. Text opens a text block
    (closed by the next tool call or by :meth:`finish`); each tool call is one complete
    ``tool_use`` block. After :meth:`finish` or :meth:`error` the encoder is closed and
    any further call is a :class:`UsageError`.
    """

    def __init__(self, model: str, message_id: str, *, input_tokens: int = 0) -> None:
        self.model = model
        self.message_id = message_id
        self.input_tokens = input_tokens
        self._started = False
        self._closed = False
        self._index = 0
        self._open: str | None = None  # type of the open block, if any
        self._calls = 0

    @property
    def closed(self) -> bool:
        """Whether the stream has been finished or ended with an error."""
        return self._closed

    def start(self) -> list[str]:
        """``message_start`` (sent once; later calls return nothing)."""
        self._check_open()
        if self._started:
            return []
        self._started = True
        message: JSONObject = {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": self.input_tokens, "output_tokens": 0},
        }
        return [_event("message_start", message=message)]

    def text(self, delta: str) -> list[str]:
        """A ``text_delta``, opening a text block first when none is open."""
        out = self.start()
        if not delta:
            return out
        if self._open != "text":
            out += self._close_block()
            out.append(self._open_block({"type": "text", "text": ""}, "text"))
        out.append(
            _event(
                "content_block_delta",
                index=self._index,
                delta={"type": "text_delta", "text": delta},
            )
        )
        return out

    def tool_call(self, call: ToolCall) -> list[str]:
        """One ``tool_use`` block: start (id, name, empty input), its input JSON, stop."""
        out = self.tool_call_start(call.id, call.name)
        out += self.tool_call_arguments(dump_arguments(call))
        out += self._close_block()
        return out

    def tool_call_start(self, call_id: str, name: str) -> list[str]:
        """Open a ``tool_use`` block (closing any open block); feed it with tool_call_arguments."""
        out = self.start()
        out += self._close_block()
        block = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
        out.append(self._open_block(block, "tool_use"))
        self._calls += 1
        return out

    def tool_call_arguments(self, fragment: str) -> list[str]:
        """An ``input_json_delta`` for the open ``tool_use`` block."""
        self._check_open()
        if self._open != "tool_use":
            raise UsageError("no tool_use block is open")
        if not fragment:
            return []
        delta = {"type": "input_json_delta", "partial_json": fragment}
        return [_event("content_block_delta", index=self._index, delta=delta)]

    def finish(
        self, reason: str = "stop", usage: Usage | None = None, stop_sequence: str | None = None
    ) -> list[str]:
        """Close the open block, then ``message_delta`` (stop_reason, usage) and ``message_stop``.

        ``reason`` is ours (``stop``, ``length``, ``stop_sequence``); it is ``tool_use``
        whenever a call was sent.
        """
        out = self.start()
        out += self._close_block()
        stop_reason = anthropic_stop_reason(reason, self._calls > 0)
        delta = {
            "stop_reason": stop_reason,
            "stop_sequence": stop_sequence if stop_reason == "stop_sequence" else None,
        }
        # message_delta's usage is cumulative: the final input count (every attempt's
        # prompt, contract included) replaces message_start's first-attempt count
        final = {"input_tokens": self.input_tokens, "output_tokens": 0}
        if usage is not None:
            final = {"input_tokens": usage.prompt_tokens, "output_tokens": usage.completion_tokens}
        out.append(_event("message_delta", delta=delta, usage=final))
        out.append(_event("message_stop"))
        self._closed = True
        return out

    def error(self, message: str, type: str = "api_error") -> list[str]:
        """End the stream with ``event: error`` (no ``message_stop``)."""
        self._check_open()
        self._closed = True
        return [sse_event(anthropic_error(502, message, type=type), event="error")]

    def _check_open(self) -> None:
        if self._closed:
            raise UsageError("the stream has already ended")

    def _open_block(self, block: JSONObject, kind: str) -> str:
        self._open = kind
        return _event("content_block_start", index=self._index, content_block=block)

    def _close_block(self) -> list[str]:
        if self._open is None:
            return []
        self._open = None
        index = self._index
        self._index += 1
        return [_event("content_block_stop", index=index)]
