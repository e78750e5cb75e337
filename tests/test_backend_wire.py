"""Pure pieces of the HTTP backend: SSE decoding, completion parsing, Retry-After, payloads."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime

import httpx
import pytest

from agentfsm.backends import GenerationOptions
from agentfsm.backends._payload import build_payload, rejects_json_schema
from agentfsm.backends._sse import ChatStreamState, SSEDecoder, parse_chat_completion
from agentfsm.backends._transport import CallState, RetryPolicy, is_retryable, parse_retry_after
from agentfsm.core.errors import (
    BackendConnectionError,
    BackendHTTPError,
    BackendProtocolError,
    BackendTimeout,
)
from agentfsm.core.messages import PromptMessage

STREAM = (
    b'data: {"choices":[{"delta":{"role":"assistant","content":""}}]}\n\n'
    b": keep-alive comment\n\n"
    b'data: {"choices":[{"delta":{"content":"h\xc3\xa9llo"}}]}\r\n\r\n'
    b'data: {"choices":[{"delta":{"content":" world"},"finish_reason":null}]}\n\n'
    b'data: {"choices":[{"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}\n\n'
    b"data: [DONE]\n\n"
)


def decode(chunks: list[bytes]) -> tuple[str, ChatStreamState]:
    decoder, state = SSEDecoder(), ChatStreamState()
    text = "".join(state.accept(d) for c in chunks for d in decoder.feed(c))
    text += "".join(state.accept(d) for d in decoder.close())
    return text, state


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64, len(STREAM)])
def test_sse_decoding_does_not_depend_on_chunk_boundaries(size: int) -> None:
    chunks = [STREAM[i : i + size] for i in range(0, len(STREAM), size)]
    text, state = decode(chunks)
    assert text == "héllo world"
    assert (state.done, state.finish_reason, state.usage.completion_tokens) == (True, "stop", 2)
    state.finish()


def test_sse_multiline_data_and_unterminated_last_event() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"event: x\ndata: a\ndata: b\n\ndata: tail") == ["a\nb"]
    assert decoder.close() == ["tail"]


@pytest.mark.parametrize(
    "data",
    ["{not json", "[1, 2]", '{"error": {"message": "overloaded"}}', '{"choices": 3}'],
)
def test_bad_stream_events_are_protocol_errors(data: str) -> None:
    with pytest.raises(BackendProtocolError):
        ChatStreamState().accept(data)


def test_stream_without_terminator_is_a_protocol_error() -> None:
    _, state = decode([b'data: {"choices":[{"delta":{"content":"cut"}}]}\n\n'])
    with pytest.raises(BackendProtocolError, match="truncated"):
        state.finish()


def test_finish_reason_without_done_is_accepted() -> None:
    _, state = decode([b'data: {"choices":[{"delta":{},"finish_reason":"length"}]}\n\n'])
    state.finish()
    assert state.finish_reason == "length"


def completion_body(**overrides: object) -> bytes:
    body: dict[str, object] = {
        "model": "m",
        "choices": [{"message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1},
    }
    body.update(overrides)
    return json.dumps(body).encode()


def test_parse_chat_completion() -> None:
    completion = parse_chat_completion(completion_body())
    assert (completion.text, completion.finish_reason, completion.model) == ("hi", "stop", "m")
    assert completion.usage.total_tokens == 6


def test_null_content_is_empty_text() -> None:
    body = completion_body(choices=[{"message": {"role": "assistant", "content": None}}])
    assert parse_chat_completion(body).text == ""


@pytest.mark.parametrize(
    "body",
    [
        b"<html>",
        b"[]",
        completion_body(choices=[]),
        completion_body(choices=[{"text": "legacy"}]),
        completion_body(choices=[{"message": {"content": ["a", "list"]}}]),
        b'{"error": {"message": "model not loaded"}}',
    ],
)
def test_malformed_completions_are_protocol_errors(body: bytes) -> None:
    with pytest.raises(BackendProtocolError):
        parse_chat_completion(body)


def test_retry_after_forms() -> None:
    later = format_datetime(datetime.now(timezone.utc) + timedelta(seconds=30), usegmt=True)
    assert parse_retry_after(httpx.Headers({"retry-after": "2.5"})) == 2.5
    assert parse_retry_after(httpx.Headers({"retry-after-ms": "250", "retry-after": "9"})) == 0.25
    assert 20 < (parse_retry_after(httpx.Headers({"retry-after": later})) or 0) <= 30
    assert parse_retry_after(httpx.Headers({"retry-after": "soon"})) is None
    assert parse_retry_after(httpx.Headers({"retry-after": "-3"})) == 0.0
    assert parse_retry_after(httpx.Headers()) is None


def test_retry_policy_caps_retry_after_and_backs_off() -> None:
    policy = RetryPolicy(retry_after_cap=1.5, backoff=1.0, backoff_max=3.0)
    call = CallState(total=60)
    call.retry_after = 40
    # a Retry-After over the cap is not shortened: the retry stops and the client gets it
    assert policy.sleep_for(call, 1) == 40
    call.retry_after = None
    assert 1.0 <= policy.sleep_for(call, 2) <= 2.0
    assert policy.sleep_for(call, 2) == policy.sleep_for(call, 2)  # memoized per attempt
    assert 1.5 <= policy.sleep_for(call, 9) <= 3.0


def test_expired_deadline_raises_timeout() -> None:
    with pytest.raises(BackendTimeout):
        CallState(total=0).check()


@pytest.mark.parametrize(
    ("error", "retryable"),
    [
        (BackendHTTPError(429, ""), True),
        (BackendHTTPError(503, ""), True),
        (BackendHTTPError(408, ""), True),
        (BackendHTTPError(409, ""), True),
        (BackendHTTPError(400, ""), False),
        (BackendHTTPError(404, ""), False),
        (BackendConnectionError("reset"), True),
        (BackendTimeout("read"), False),
        (BackendProtocolError("garbage"), False),
    ],
)
def test_what_is_retried(error: Exception, retryable: bool) -> None:
    assert is_retryable(error) is retryable


def test_connect_timeout_is_retried() -> None:
    try:
        raise BackendTimeout("connect") from httpx.ConnectTimeout("slow")
    except BackendTimeout as error:
        assert is_retryable(error)


SCHEMA = {"type": "object"}
MESSAGES = [PromptMessage(role="user", content="hi")]


def test_payload_sends_max_tokens_when_set_and_asks_for_stream_usage() -> None:
    payload = build_payload(
        "m", MESSAGES, GenerationOptions(seed=None), stream=True, schema_form="auto",
        prefill=False, extra_body={},
    )
    assert payload == {
        "model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 512,
        "temperature": 0.0, "stream": True, "stream_options": {"include_usage": True},
    }


def test_payload_without_a_limit_sends_none() -> None:
    """No max_tokens of ours: the upstream's own bound (what its context leaves) applies."""
    payload = build_payload(
        "m", MESSAGES, GenerationOptions(max_tokens=None), stream=False, schema_form="auto",
        prefill=False, extra_body={},
    )
    assert "max_tokens" not in payload and "stream_options" not in payload


@pytest.mark.parametrize(
    ("status", "body", "rejected"),
    [
        (500, "Input should be 'text' or 'json_object': response_format.type", True),
        (400, "json_schema is not supported", True),
        (500, "out of memory", False),
        (429, "response_format rate limited", False),
    ],
)
def test_rejects_json_schema(status: int, body: str, rejected: bool) -> None:
    payload = build_payload(
        "m", MESSAGES, GenerationOptions(json_schema=SCHEMA), stream=False,
        schema_form="json_schema", prefill=False, extra_body={},
    )
    assert rejects_json_schema(BackendHTTPError(status, body), payload) is rejected


CLIENT_FORMAT = {"type": "json_schema", "json_schema": {"name": "out", "schema": SCHEMA, "strict": True}}
SAMPLING = {"top_p": 0.9, "top_k": 40, "presence_penalty": 0.5, "frequency_penalty": 0.25, "user": "u-1"}


@pytest.mark.parametrize(
    ("form", "sent"),
    [
        ("auto", CLIENT_FORMAT),
        ("json_schema", CLIENT_FORMAT),
        ("off", CLIENT_FORMAT),  # the client's own format: its upstream decides
        ("json_object", {"type": "json_object", "schema": SCHEMA}),  # llama.cpp's form
    ],
)
def test_client_settings_are_sent_unchanged(form: str, sent: dict[str, object]) -> None:
    options = GenerationOptions(seed=7, response_format=CLIENT_FORMAT, **SAMPLING)  # type: ignore[arg-type]
    payload = build_payload(
        "m", MESSAGES, options, stream=False, schema_form=form,  # type: ignore[arg-type]
        prefill=False, extra_body={},
    )
    assert {k: payload[k] for k in SAMPLING} == SAMPLING and payload["seed"] == 7
    assert payload["response_format"] == sent


def test_our_schema_takes_precedence_over_the_clients_format() -> None:
    options = GenerationOptions(json_schema={"type": "array"}, response_format=CLIENT_FORMAT)
    payload = build_payload(
        "m", MESSAGES, options, stream=False, schema_form="json_schema", prefill=False, extra_body={},
    )
    assert payload["response_format"]["json_schema"]["schema"] == {"type": "array"}
