"""The proxy's view of the wire protocols: one adapter each for bodies, errors and streams.

The handlers speak to a :class:`Wire` and a :class:`StreamSink` and never branch on the
protocol themselves; the encoders underneath are the pure ones in
:mod:`agentfsm.protocols`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

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
from agentfsm.protocols.common import NormalizedRequest

__all__ = ["StreamSink", "Wire", "wire_for_path"]


@dataclass(frozen=True)
class Wire:
    """Everything protocol-specific about one endpoint."""

    protocol: WireProtocol

    def normalize(self, body: object) -> NormalizedRequest:
        """The client's body as a :class:`NormalizedRequest` (RequestError when malformed)."""
        if self.protocol == "openai":
            return normalize_openai(body)  # type: ignore[arg-type]  # checked inside
        if self.protocol == "responses":
            return normalize_responses(body)  # type: ignore[arg-type]
        return normalize_anthropic(body)  # type: ignore[arg-type]

    def error(self, status: int, message: str) -> JSONObject:
        """An error body in this protocol's shape (the Responses API uses OpenAI's)."""
        if self.protocol != "anthropic":
            return openai_error(status, message)
        return anthropic_error(status, message)

    def error_for(self, exc: AgentFSMError) -> tuple[int, JSONObject]:
        """The status and error body for one of our errors."""
        if self.protocol != "anthropic":
            return openai_error_for(exc)
        return anthropic_error_for(exc)

    def response_id(self, token: str) -> str:
        """A fresh ``chatcmpl-...``, ``resp_...`` or ``msg_...`` id."""
        return mint_response_id(self.protocol, token)

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
    ) -> JSONObject:
        """A whole (non-streamed) response body (``custom_tools``: the Responses API's
        freeform tools, whose calls are ``custom_tool_call`` items)."""
        if self.protocol != "anthropic":  # the two OpenAI encoders take the same fields
            common: dict[str, Any] = {
                "model": model, "content": content, "tool_calls": calls, "usage": usage,
                "created": created, "response_id": response_id, "finish_reason": finish_reason,
            }
            if self.protocol == "responses":
                return encode_responses_response(**common, custom_tools=custom_tools)
            return encode_openai_response(**common)
        return encode_anthropic_response(
            model=model,
            content=content,
            tool_calls=calls,
            usage=usage,
            message_id=response_id,
            finish_reason=finish_reason,
        )

    def sink(
        self,
        *,
        model: str,
        response_id: str,
        created: int,
        include_usage: bool,
        input_tokens: int,
        custom_tools: Sequence[str] = (),
    ) -> StreamSink:
        """A stream encoder for one response."""
        return StreamSink(self, model, response_id, created, include_usage, input_tokens, custom_tools)


class StreamSink:
    """One streamed response: prose deltas, finished tool calls, the end or an error."""

    def __init__(
        self,
        wire: Wire,
        model: str,
        response_id: str,
        created: int,
        include_usage: bool,
        input_tokens: int,
        custom_tools: Sequence[str] = (),
    ) -> None:
        self.wire = wire
        self._openai: OpenAIStreamEncoder | None = None
        self._anthropic: AnthropicStreamEncoder | None = None
        self._responses: ResponsesStreamEncoder | None = None
        if wire.protocol == "openai":
            self._openai = OpenAIStreamEncoder(
                model, response_id, created, include_usage=include_usage
            )
        elif wire.protocol == "responses":
            self._responses = ResponsesStreamEncoder(model, response_id, created, custom_tools)
        else:
            self._anthropic = AnthropicStreamEncoder(model, response_id, input_tokens=input_tokens)
        self._calls = 0

    @property
    def closed(self) -> bool:
        """Whether the stream has ended (cleanly or with an error)."""
        encoder = self._openai or self._anthropic or self._responses
        return encoder is not None and encoder.closed

    def text(self, delta: str) -> list[str]:
        """A prose delta (the stream's opening events first, when not sent yet)."""
        if self._openai is not None:
            return self._openai.text(delta)
        if self._responses is not None:
            return self._responses.text(delta)
        assert self._anthropic is not None
        return self._anthropic.text(delta)

    def calls(self, calls: Sequence[ToolCall]) -> list[str]:
        """Accepted tool calls, each with its id and name first, then its arguments."""
        out: list[str] = []
        for call in calls:
            if self._openai is not None:
                out += self._openai.tool_call(self._calls, call)
            elif self._responses is not None:
                out += self._responses.tool_call(call)
            else:
                assert self._anthropic is not None
                out += self._anthropic.tool_call(call)
            self._calls += 1
        return out

    def finish(self, reason: str, usage: Usage) -> list[str]:
        """The clean end: finish reason, usage and the protocol's terminator."""
        if self._openai is not None:
            return self._openai.finish(reason, usage)
        if self._responses is not None:
            return self._responses.finish(reason, usage)
        assert self._anthropic is not None
        return self._anthropic.finish(reason, usage)

    def fail(self, exc: AgentFSMError | None, message: str = "internal error") -> list[str]:
        """End the stream with the protocol's error event (never a clean end)."""
        if exc is not None:
            _, body = self.wire.error_for(exc)
            error = body["error"]
            assert isinstance(error, dict)
            message = str(error["message"])
            kind = str(error["type"])
        else:
            kind = "api_error" if self.wire.protocol == "anthropic" else "server_error"
        if self._openai is not None:
            return self._openai.error(message, type=kind)
        if self._responses is not None:
            return self._responses.error(message, type=kind)
        assert self._anthropic is not None
        return self._anthropic.error(message, type=kind)

    @staticmethod
    def comment(text: str) -> str:
        """An SSE comment line: clients ignore it; used for the trailing attempt count."""
        return f": {text}\n\n"


def wire_for_path(path: str) -> Wire:
    """The protocol whose error shape fits a request path (``/v1/messages`` is Anthropic's)."""
    if path.startswith("/v1/messages"):
        return Wire("anthropic")
    return Wire("responses" if path.startswith("/v1/responses") else "openai")

