"""The proxy's view of the wire protocols: one object per protocol for bodies, errors and streams.

The handlers speak to a :class:`Wire` (:func:`wire_for`, :func:`wire_for_path`) and a
:class:`StreamSink` and never branch on the protocol; each protocol is one subclass,
which says everything that is its own, on top of the pure encoders in
:mod:`agentfsm.protocols`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Protocol, TypeAlias

from agentfsm.core._types import JSONObject
from agentfsm.core.backend import Usage
from agentfsm.core.errors import AgentFSMError
from agentfsm.core.messages import ToolCall
from agentfsm.protocols import (
    AnthropicStreamEncoder,
    OpenAIStreamEncoder,
    ResponsesStreamEncoder,
    WireProtocol,
    anthropic_error,
    anthropic_error_for,
    encode_anthropic_response,
    encode_openai_response,
    encode_responses_response,
    mint_response_id,
    normalize_anthropic,
    normalize_openai,
    normalize_responses,
    openai_error,
    openai_error_for,
)
from agentfsm.protocols.common import NormalizedRequest, sse_event

__all__ = ["AnthropicWire", "OpenAIWire", "ResponsesWire", "StreamSink", "Wire", "wire_for", "wire_for_path"]


class _Encoder(Protocol):
    """What a stream encoder of :mod:`agentfsm.protocols` offers the sink."""

    @property
    def closed(self) -> bool: ...

    def text(self, delta: str) -> list[str]: ...

    def finish(self, reason: str, usage: Usage, stop_sequence: str | None = None) -> list[str]: ...

    def error(self, message: str, type: str) -> list[str]: ...


#: the events of one accepted call, the ``index``-th of the response (the stream
#: encoder's own ``tool_call``, given the index where the protocol numbers its calls)
CallWriter: TypeAlias = Callable[[int, ToolCall], list[str]]


class Wire(ABC):
    """Everything protocol-specific about one endpoint."""

    #: the protocol, as :class:`~agentfsm.protocols.common.NormalizedRequest` names it
    protocol: ClassVar[WireProtocol]
    #: the error type a stream ends with when the failure is not one of ours
    server_error: ClassVar[str] = "server_error"
    #: the request field that holds the conversation (the ``param`` of its errors)
    history_param: ClassVar[str] = "messages"

    @abstractmethod
    def normalize(self, body: Any) -> NormalizedRequest:
        """The client's body as a :class:`NormalizedRequest` (RequestError when malformed)."""

    def error(self, status: int, message: str) -> JSONObject:
        """An error body in this protocol's shape (OpenAI's, unless the protocol has its own)."""
        return openai_error(status, message)

    def error_for(self, exc: AgentFSMError, entry: str | None = None) -> tuple[int, JSONObject]:
        """The status and error body for one of our errors (``entry``: the served model it
        concerns, named in an upstream failure's message)."""
        return openai_error_for(exc, entry)

    def keep_alive(self) -> str:
        """What a stream sends while it has nothing else to (a held stream): an SSE
        comment, which clients ignore, unless the protocol has its own keep-alive."""
        return ": keep-alive\n\n"

    def response_id(self, token: str) -> str:
        """A fresh ``chatcmpl-...``, ``resp_...`` or ``msg_...`` id."""
        return mint_response_id(self.protocol, token)

    @abstractmethod
    def response(
        self,
        *,
        model: str,
        content: str | None,
        calls: Sequence[ToolCall],
        usage: Usage,
        response_id: str,
        created: int,
        finish_reason: str,
        custom_tools: Sequence[str] = (),
        echo: Mapping[str, Any] | None = None,
        stop_sequence: str | None = None,
    ) -> JSONObject:
        """A whole (non-streamed) response body (``custom_tools``: the Responses API's
        freeform tools, whose calls are ``custom_tool_call`` items; ``echo``: the request's
        settings its response repeats, :attr:`NormalizedRequest.response_echo`;
        ``stop_sequence``: the client's stop sequence that ended the answer, which only
        Anthropic's shape names; OpenAI's says ``stop``)."""

    @abstractmethod
    def _stream(
        self, model: str, response_id: str, created: int, include_usage: bool, input_tokens: int,
        custom_tools: Sequence[str], echo: Mapping[str, Any] | None,
    ) -> tuple[_Encoder, CallWriter]:
        """A stream encoder for one response, and how it writes a call."""

    def sink(
        self,
        *,
        model: str,
        response_id: str,
        created: int,
        include_usage: bool,
        input_tokens: int,
        custom_tools: Sequence[str] = (),
        echo: Mapping[str, Any] | None = None,
    ) -> StreamSink:
        """A stream of one response."""
        return StreamSink(
            self, *self._stream(model, response_id, created, include_usage, input_tokens, custom_tools, echo)
        )


class OpenAIWire(Wire):
    """OpenAI chat completions (``/v1/chat/completions``)."""

    protocol = "openai"

    def normalize(self, body: Any) -> NormalizedRequest:
        return normalize_openai(body)

    def response(self, *, model: str, content: str | None, calls: Sequence[ToolCall], usage: Usage,
                 response_id: str, created: int, finish_reason: str, custom_tools: Sequence[str] = (),
                 echo: Mapping[str, Any] | None = None, stop_sequence: str | None = None) -> JSONObject:
        return encode_openai_response(model=model, content=content, tool_calls=calls, usage=usage, created=created,
                                      response_id=response_id, finish_reason=finish_reason)

    def _stream(self, model: str, response_id: str, created: int, include_usage: bool, input_tokens: int,
                custom_tools: Sequence[str], echo: Mapping[str, Any] | None) -> tuple[_Encoder, CallWriter]:
        encoder = OpenAIStreamEncoder(model, response_id, created, include_usage=include_usage)
        return encoder, encoder.tool_call  # chat completions number their tool_calls


class ResponsesWire(Wire):
    """OpenAI's Responses API (``/v1/responses``); errors in OpenAI's shape."""

    protocol = "responses"
    history_param = "input"

    def normalize(self, body: Any) -> NormalizedRequest:
        return normalize_responses(body)

    def response(self, *, model: str, content: str | None, calls: Sequence[ToolCall], usage: Usage,
                 response_id: str, created: int, finish_reason: str, custom_tools: Sequence[str] = (),
                 echo: Mapping[str, Any] | None = None, stop_sequence: str | None = None) -> JSONObject:
        return encode_responses_response(model=model, content=content, tool_calls=calls, usage=usage,
                                         created=created, response_id=response_id, finish_reason=finish_reason,
                                         custom_tools=custom_tools, echo=echo)

    def _stream(self, model: str, response_id: str, created: int, include_usage: bool, input_tokens: int,
                custom_tools: Sequence[str], echo: Mapping[str, Any] | None) -> tuple[_Encoder, CallWriter]:
        encoder = ResponsesStreamEncoder(model, response_id, created, custom_tools, echo)
        return encoder, lambda _index, call: encoder.tool_call(call)


class AnthropicWire(Wire):
    """Anthropic messages (``/v1/messages``)."""

    protocol = "anthropic"
    server_error = "api_error"

    def normalize(self, body: Any) -> NormalizedRequest:
        return normalize_anthropic(body)

    def error(self, status: int, message: str) -> JSONObject:
        return anthropic_error(status, message)

    def error_for(self, exc: AgentFSMError, entry: str | None = None) -> tuple[int, JSONObject]:
        return anthropic_error_for(exc, entry)

    def keep_alive(self) -> str:
        # Anthropic's own: its streams carry ``ping`` events, which its SDKs skip wherever
        # they come (before ``message_start`` too)
        return _PING

    def response(self, *, model: str, content: str | None, calls: Sequence[ToolCall], usage: Usage,
                 response_id: str, created: int, finish_reason: str, custom_tools: Sequence[str] = (),
                 echo: Mapping[str, Any] | None = None, stop_sequence: str | None = None) -> JSONObject:
        return encode_anthropic_response(model=model, content=content, tool_calls=calls, usage=usage,
                                         message_id=response_id, finish_reason=finish_reason,
                                         stop_sequence=stop_sequence)

    def _stream(self, model: str, response_id: str, created: int, include_usage: bool, input_tokens: int,
                custom_tools: Sequence[str], echo: Mapping[str, Any] | None) -> tuple[_Encoder, CallWriter]:
        encoder = AnthropicStreamEncoder(model, response_id, input_tokens=input_tokens)
        return encoder, lambda _index, call: encoder.tool_call(call)


_PING = sse_event({"type": "ping"}, event="ping")

#: one wire per protocol
WIRES: dict[WireProtocol, Wire] = {w.protocol: w for w in (OpenAIWire(), ResponsesWire(), AnthropicWire())}


def wire_for(protocol: WireProtocol) -> Wire:
    """The wire of ``protocol``."""
    return WIRES[protocol]


def wire_for_path(path: str) -> Wire:
    """The protocol whose error shape fits a request path (``/v1/messages`` is Anthropic's)."""
    if path.startswith("/v1/messages"):
        return WIRES["anthropic"]
    return WIRES["responses" if path.startswith("/v1/responses") else "openai"]


class StreamSink:
    """One streamed response: prose deltas, finished tool calls, the end or an error."""

    def __init__(self, wire: Wire, encoder: _Encoder, write_call: CallWriter) -> None:
        self.wire = wire
        self._encoder = encoder
        self._write_call = write_call
        self._calls = 0

    @property
    def closed(self) -> bool:
        """Whether the stream has ended (cleanly or with an error)."""
        return self._encoder.closed

    def text(self, delta: str) -> list[str]:
        """A prose delta (the stream's opening events first, when not sent yet)."""
        return self._encoder.text(delta)

    def calls(self, calls: Sequence[ToolCall]) -> list[str]:
        """Accepted tool calls, each with its id and name first, then its arguments."""
        out: list[str] = []
        for call in calls:
            out += self._write_call(self._calls, call)
            self._calls += 1
        return out

    def finish(self, reason: str, usage: Usage, stop_sequence: str | None = None) -> list[str]:
        """The clean end: finish reason (and the stop sequence that ended the answer,
        where the protocol names it), usage and the protocol's terminator."""
        return self._encoder.finish(reason, usage, stop_sequence)

    def fail(self, exc: AgentFSMError | None, message: str = "internal error", entry: str | None = None) -> list[str]:
        """End the stream with the protocol's error event (never a clean end); ``entry``
        as :meth:`Wire.error_for` takes it."""
        kind = self.wire.server_error
        if exc is not None:
            _, body = self.wire.error_for(exc, entry)
            error = body["error"]
            assert isinstance(error, dict)
            message = str(error["message"])
            kind = str(error["type"])
        return self._encoder.error(message, kind)

    def keep_alive(self) -> str:
        """A keep-alive, which clients ignore (:meth:`Wire.keep_alive`)."""
        return self.wire.keep_alive()

    @staticmethod
    def comment(text: str) -> str:
        """An SSE comment line: clients ignore it; used for the trailing attempt count."""
        return f": {text}\n\n"
