"""agentfsm.testing.empty_answer: the check every proxy in the suite is watched with."""

from __future__ import annotations

import json

import pytest

from agentfsm.core.backend import Usage
from agentfsm.core.messages import ToolCall
from agentfsm.protocols import (
    AnthropicStreamEncoder,
    OpenAIStreamEncoder,
    ResponsesStreamEncoder,
    encode_anthropic_response,
    encode_openai_response,
    encode_responses_response,
)
from agentfsm.testing import empty_answer

CALL = ToolCall(id="call_abc", name="get_weather", arguments={"city": "Paris"})
PATHS = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages", "responses": "/v1/responses"}


def _whole(protocol: str, content: str | None, calls: tuple[ToolCall, ...]) -> str:
    if protocol == "anthropic":
        body = encode_anthropic_response(model="m", content=content, tool_calls=calls, usage=Usage(), message_id="msg_1")
    elif protocol == "openai":
        body = encode_openai_response(model="m", content=content, tool_calls=calls, usage=Usage(), created=0,
                                      response_id="chatcmpl-1")
    else:
        body = encode_responses_response(model="m", content=content, tool_calls=calls, usage=Usage(), created=0,
                                         response_id="resp_1")
    return json.dumps(body)


def _stream(protocol: str, content: str | None, calls: tuple[ToolCall, ...], error: bool = False) -> str:
    encoder: OpenAIStreamEncoder | AnthropicStreamEncoder | ResponsesStreamEncoder
    if protocol == "openai":
        encoder = OpenAIStreamEncoder("m", "chatcmpl-1", 0)
    elif protocol == "anthropic":
        encoder = AnthropicStreamEncoder("m", "msg_1")
    else:
        encoder = ResponsesStreamEncoder("m", "resp_1", 0)
    out = encoder.text(content or "")
    for i, call in enumerate(calls):
        out += encoder.tool_call(i, call) if isinstance(encoder, OpenAIStreamEncoder) else encoder.tool_call(call)
    out += encoder.error("gave up") if error else encoder.finish("stop", Usage())
    return "".join(out)


@pytest.mark.parametrize("protocol", sorted(PATHS))
@pytest.mark.parametrize("form", [_whole, _stream], ids=["whole", "stream"])
def test_an_answer_with_text_or_a_call_is_not_empty(protocol: str, form: object) -> None:
    assert callable(form)
    assert empty_answer(PATHS[protocol], form(protocol, "Sunny.", ())) is None
    assert empty_answer(PATHS[protocol], form(protocol, None, (CALL,))) is None


@pytest.mark.parametrize("protocol", sorted(PATHS))
@pytest.mark.parametrize("form", [_whole, _stream], ids=["whole", "stream"])
def test_an_answer_with_neither_is_empty(protocol: str, form: object) -> None:
    assert callable(form)
    assert empty_answer(PATHS[protocol], form(protocol, None, ())) is not None
    assert empty_answer(PATHS[protocol], form(protocol, "  \n", ())) is not None


@pytest.mark.parametrize("protocol", sorted(PATHS))
def test_a_stream_that_ends_in_an_error_event_is_a_give_up_not_an_empty_answer(protocol: str) -> None:
    assert empty_answer(PATHS[protocol], _stream(protocol, None, (), error=True)) is None


def test_other_endpoints_are_not_answers() -> None:
    assert empty_answer("/v1/messages/count_tokens", '{"input_tokens": 5}') is None
    assert empty_answer("/v1/models", '{"data": []}') is None


def test_an_answer_the_token_limit_cut_is_not_an_empty_one() -> None:
    """A 200 with no text and no call that says the client's max_tokens cut it is the
    provider's own answer to such a reply; the same bodies without that reason are empty."""
    from agentfsm.testing import empty_answer

    chat = {"choices": [{"message": {"role": "assistant", "content": None}, "finish_reason": "length"}]}
    assert empty_answer("/v1/chat/completions", json.dumps(chat)) is None
    chat["choices"][0]["finish_reason"] = "stop"
    assert empty_answer("/v1/chat/completions", json.dumps(chat)) is not None
    message = {"type": "message", "content": [], "stop_reason": "max_tokens"}
    assert empty_answer("/v1/messages", json.dumps(message)) is None
    assert empty_answer("/v1/messages", json.dumps({**message, "stop_reason": "end_turn"})) is not None
    stream = "\n".join(f"data: {json.dumps(e)}" for e in (
        {"type": "message_start", "message": {"content": []}},
        {"type": "message_delta", "delta": {"stop_reason": "max_tokens"}},
        {"type": "message_stop"},
    ))
    assert empty_answer("/v1/messages", stream) is None
    assert empty_answer("/v1/messages", stream.replace("max_tokens", "end_turn")) is not None
