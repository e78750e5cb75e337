"""OpenAI chat-completions streaming: ``chat.completion.chunk`` server-sent events.

The sequence is: a role chunk, content deltas, tool-call deltas (the first chunk of a
call carries its stable ``index``, ``id`` and name; later chunks carry argument text),
a final chunk with ``finish_reason``, an optional usage chunk, then ``data: [DONE]``.
A failure mid-stream ends it with ``data: {"error": ...}`` and no ``[DONE]``, which
the official SDK raises as an error rather than taking for a clean end.
"""

from __future__ import annotations


from agentfsm.core._types import JSONObject
from agentfsm.core.backend import Usage
from agentfsm.core.errors import UsageError
from agentfsm.core.messages import ToolCall
from agentfsm.protocols.common import dump_arguments, sse_event
from agentfsm.protocols.openai import openai_error
from agentfsm.protocols.openai_response import openai_finish_reason, openai_usage

__all__ = ["OpenAIStreamEncoder"]


class OpenAIStreamEncoder:
    """Turns one reply, as it is produced, into OpenAI SSE strings (``data: {...}\\n\\n``).

    Every method returns the events to write, possibly none. Text sent before
    :meth:`start` starts the stream first. After :meth:`finish` or :meth:`error`
    the encoder is closed and any further call is a :class:`UsageError`.
    """

    def __init__(
        self, model: str, response_id: str, created: int, *, include_usage: bool = False
    ) -> None:
        self.model = model
        self.response_id = response_id
        self.created = created
        self.include_usage = include_usage
        self._started = False
        self._closed = False
        self._call_ids: dict[int, str] = {}

    @property
    def closed(self) -> bool:
        """Whether the stream has been finished or ended with an error."""
        return self._closed

    def start(self) -> list[str]:
        """The role chunk (sent once; later calls return nothing)."""
        self._check_open()
        if self._started:
            return []
        self._started = True
        # no "content": "" here: clients such as the AI SDK show it as an empty text part
        return [self._chunk({"role": "assistant"})]

    def text(self, delta: str) -> list[str]:
        """A content delta (nothing for an empty one)."""
        out = self.start()
        if delta:
            out.append(self._chunk({"content": delta}))
        return out

    def tool_call(self, index: int, call: ToolCall) -> list[str]:
        """A whole call: its id-and-name chunk, then its arguments as one JSON string."""
        out = self.tool_call_start(index, call.id, call.name)
        out += self.tool_call_arguments(index, dump_arguments(call))
        return out

    def tool_call_start(self, index: int, call_id: str, name: str) -> list[str]:
        """The first chunk of call number ``index``: ``id``, ``type`` and function name."""
        out = self.start()
        if index in self._call_ids:
            raise UsageError(f"tool call index {index} was already started")
        self._call_ids[index] = call_id
        entry: JSONObject = {
            "index": index,
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        out.append(self._chunk({"tool_calls": [entry]}))
        return out

    def tool_call_arguments(self, index: int, fragment: str) -> list[str]:
        """A piece of the arguments string of a started call."""
        self._check_open()
        if index not in self._call_ids:
            raise UsageError(f"tool call index {index} has not been started")
        if not fragment:
            return []
        entry: JSONObject = {"index": index, "function": {"arguments": fragment}}
        return [self._chunk({"tool_calls": [entry]})]

    def finish(self, reason: str = "stop", usage: Usage | None = None, stop_sequence: str | None = None) -> list[str]:
        """The final chunk (``finish_reason``), the usage chunk if asked for, and ``[DONE]``.

        ``reason`` is ours (``stop``, ``length``, ``stop_sequence``, sent as ``stop``: chat
        completions do not name the sequence); it is ``tool_calls`` whenever a call was sent.
        """
        out = self.start()
        finish_reason = openai_finish_reason(reason, bool(self._call_ids))
        out.append(self._chunk({}, finish_reason=finish_reason))
        if self.include_usage:
            chunk = self._base()
            chunk["choices"] = []
            chunk["usage"] = openai_usage(usage or Usage())
            out.append(sse_event(chunk))
        out.append(sse_event("[DONE]"))
        self._closed = True
        return out

    def error(
        self, message: str, type: str = "upstream_error", code: str | None = None
    ) -> list[str]:
        """End the stream with ``data: {"error": ...}`` (no ``[DONE]``)."""
        self._check_open()
        self._closed = True
        return [sse_event(openai_error(502, message, type=type, code=code))]

    def _check_open(self) -> None:
        if self._closed:
            raise UsageError("the stream has already ended")

    def _base(self) -> JSONObject:
        return {
            "id": self.response_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
        }

    def _chunk(self, delta: JSONObject, finish_reason: str | None = None) -> str:
        chunk = self._base()
        chunk["choices"] = [
            {"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}
        ]
        return sse_event(chunk)
