"""Anthropic messages: normalization, response and stream encoding, error bodies.

Encoded payloads are validated with the official ``anthropic`` SDK's own models, and
streams are fed through the SDK's ``MessageStream`` over an httpx mock transport.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import pytest
from anthropic.types import Message as SDKMessage
from anthropic.types import RawMessageStreamEvent
from anthropic.types.shared import ErrorResponse
from pydantic import TypeAdapter

try:  # the anthropic SDK 2.x is built on httpx2 and refuses httpx clients
    import httpx2
except ImportError:  # older SDKs take httpx, whose mock transport httpx2 mirrors
    import httpx as httpx2  # type: ignore[no-redef]

from agentfsm.core.backend import Usage
from agentfsm.core.errors import (
    BackendHTTPError,
    BackendTimeout,
    RequestError,
    UnsupportedContent,
    UsageError,
)
from agentfsm.core.messages import AssistantMessage, SystemMessage, ToolCall, ToolMessage, UserMessage
from agentfsm.protocols import (
    AnthropicStreamEncoder,
    anthropic_error,
    anthropic_error_for,
    encode_anthropic_response,
    mint_call_id,
    mint_response_id,
    normalize_anthropic,
    remint_ids,
)

WIRE = Path(__file__).parent.parent / "fixtures" / "wire" / "anthropic"
REQUESTS = sorted((WIRE / "requests").glob("*.json"))
INVALID = json.loads((WIRE / "invalid.json").read_text())
#: Anthropic's own tool beside none of the client's: left out and reported, not refused
SERVER_TOOL = {"body": {"messages": [{"role": "user", "content": "What is the weather and the time in Paris?"}],
                        "tools": [{"type": "web_search_20250305", "name": "web_search"}]}}

CALLS = (
    ToolCall(id="toolu_AAAAAAAAAAAAAAAAAAAAAAAA", name="get_weather", arguments={"city": "Paris"}),
    ToolCall(id="toolu_BBBBBBBBBBBBBBBBBBBBBBBB", name="get_time", arguments={}),
)
USAGE = Usage(prompt_tokens=42, completion_tokens=17)
EVENTS: TypeAdapter[RawMessageStreamEvent] = TypeAdapter(RawMessageStreamEvent)


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((WIRE / "requests" / f"{name}.json").read_text())
    return data


# --- normalization ---------------------------------------------------------------------


@pytest.mark.parametrize("path", REQUESTS, ids=lambda p: p.stem)
def test_normalized_request_matches_snapshot(path: Path, snapshot: Any) -> None:
    request = normalize_anthropic(json.loads(path.read_text()))
    assert request.protocol == "anthropic"
    assert request.model_dump(mode="json") == snapshot


def test_single_turn_tool_use() -> None:
    request = normalize_anthropic(load("single_turn_tool_use"))
    assert request.tool_mode and not request.tools_recovered
    assert [t.name for t in request.tools] == ["get_weather", "get_time"]
    assert request.tools[1].parameters["required"] == ["city"]
    assert (str(request.tool_choice), request.parallel, request.max_tokens) == ("auto", True, 256)
    assert request.messages == (
        SystemMessage(content="You are a helpful assistant."),
        UserMessage(content="What is the weather and the time in Paris?"),
    )


def test_multi_turn_tool_result_continuation() -> None:
    request = normalize_anthropic(load("multi_turn_tool_result"))
    _, assistant, first, second = request.messages
    assert assistant == AssistantMessage(
        content="Let me check both.",
        tool_calls=(
            ToolCall(id="toolu_01A", name="get_weather", arguments={"city": "Paris"}),
            ToolCall(id="toolu_01B", name="get_time", arguments={"city": "Paris"}),
        ),
    )
    assert isinstance(first, ToolMessage) and isinstance(second, ToolMessage)
    assert (first.result.name, first.result.content, first.result.status) == (
        "get_weather",
        '{"temp": 18}',
        "ok",
    )
    assert (second.result.name, second.result.content) == ("get_time", "14:05\nCEST")


def test_later_turn_without_tools_recovers_them_from_history() -> None:
    request = normalize_anthropic(load("later_turn_without_tools"))
    assert request.tool_mode and request.tools_recovered
    assert [(t.name, t.parameters) for t in request.tools] == [
        ("get_weather", {"type": "object"}),
        ("get_time", {"type": "object"}),
    ]
    assert str(request.tool_choice) == "auto"
    assert request.messages[-1] == UserMessage(content="And in Rome?")


@pytest.mark.parametrize(
    ("name", "choice", "parallel"),
    [
        ("tool_choice_any", "required", True),
        ("tool_choice_none", "none", True),
        ("tool_choice_tool", "get_time", True),
        ("disable_parallel_tool_use", "auto", False),
        ("streaming_tool_use", "auto", True),
    ],
)
def test_tool_choice_and_parallel(name: str, choice: str, parallel: bool) -> None:
    request = normalize_anthropic(load(name))
    assert (str(request.tool_choice), request.parallel, request.tool_mode) == (choice, parallel, True)
    assert request.stream is (name == "streaming_tool_use")


def test_system_blocks_thinking_dropped_error_result_before_text() -> None:
    request = normalize_anthropic(load("system_blocks_and_thinking"))
    system, user, assistant, result, follow_up = request.messages
    assert system == SystemMessage(content="Be brief.\nUse tools.")
    assert user == UserMessage(content="Weather in Oslo?")
    assert assistant == AssistantMessage(
        content=None,
        tool_calls=(ToolCall(id="toolu_02", name="get_weather", arguments={"city": "Oslo"}),),
    )
    assert isinstance(result, ToolMessage)
    assert (result.result.status, result.result.content) == ("error", "city service down")
    assert follow_up == UserMessage(content="Try again please.")


def test_tool_result_without_content_is_empty() -> None:
    request = normalize_anthropic(load("empty_tool_result"))
    result = request.messages[-1]
    assert isinstance(result, ToolMessage)
    assert (result.result.content, result.result.status) == ("", "empty")
    assert len(request.messages) == 3  # no empty user turn after the result


def test_plain_request_reads_sampling_settings() -> None:
    request = normalize_anthropic(load("plain_no_tools"))
    assert not request.tool_mode and str(request.tool_choice) == "none"
    assert request.stop == ("\n\nHuman:",)
    assert (request.top_p, request.top_k, request.user) == (0.9, 40, "u-1")
    assert (request.max_tokens, request.temperature, request.ignored) == (256, 0.5, ())


@pytest.mark.parametrize("case", INVALID, ids=lambda c: c["name"])
def test_invalid_request_is_a_400_naming_the_problem(case: dict[str, Any]) -> None:
    expected = UnsupportedContent if case["error"] == "UnsupportedContent" else RequestError
    with pytest.raises(expected) as info:
        normalize_anthropic(case["body"])
    assert info.value.status_code == 400
    assert info.value.param == case["param"]
    if case["kind"] is not None:
        assert isinstance(info.value, UnsupportedContent) and info.value.kind == case["kind"]
        assert repr(case["kind"]) in str(info.value)
    else:
        assert not isinstance(info.value, UnsupportedContent)
        assert case["message_contains"] in str(info.value)


def test_anthropic_own_tools_are_left_out_and_reported() -> None:
    """web_search_20250305 beside a custom tool:
    the custom tool is offered, the built-in one left out and named as ``tools.TYPE``."""
    body = {
        **SERVER_TOOL["body"],
        "tools": [
            *SERVER_TOOL["body"]["tools"],
            {"type": "bash_20250124", "name": "bash"},
            {"name": "get_weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}},
        ],
    }
    request = normalize_anthropic(body)
    assert [t.name for t in request.tools] == ["get_weather"]
    assert request.ignored == ("tools.web_search_20250305", "tools.bash_20250124")
    only = normalize_anthropic(SERVER_TOOL["body"])
    assert only.tools == () and not only.tool_mode and only.ignored == ("tools.web_search_20250305",)
    with pytest.raises(RequestError, match="must be a string") as info:
        normalize_anthropic({**body, "tools": [{"type": 7, "name": "x"}]})
    assert info.value.param == "tools[0].type"


def test_minted_ids_have_the_anthropic_shape() -> None:
    call_id = mint_call_id("anthropic", random.Random(1))
    assert call_id.startswith("toolu_") and len(call_id) == 30 and call_id[6:].isalnum()
    assert mint_response_id("anthropic", "f" * 30) == "msg_" + "f" * 24
    reminted = remint_ids([ToolCall(id="call_0", name="f")], "anthropic", lambda: "0" * 24)
    assert reminted[0].id == "toolu_" + "0" * 24


# --- whole responses -----------------------------------------------------------------------


def test_response_with_text_and_tool_use(snapshot: Any) -> None:
    body = encode_anthropic_response(
        model="smollm2", content="Checking.", tool_calls=CALLS, usage=USAGE, message_id="msg_test"
    )
    message = SDKMessage.model_validate(body)
    assert message.stop_reason == "tool_use"
    assert [b.type for b in message.content] == ["text", "tool_use", "tool_use"]
    assert [b.input for b in message.content if b.type == "tool_use"] == [{"city": "Paris"}, {}]
    assert (message.usage.input_tokens, message.usage.output_tokens) == (42, 17)
    assert body == snapshot


@pytest.mark.parametrize(
    ("reason", "stop_reason", "sequence"),
    [
        ("stop", "end_turn", None),
        ("length", "max_tokens", None),
        ("stop_sequence", "stop_sequence", "END"),
    ],
)
def test_response_without_calls(reason: str, stop_reason: str, sequence: str | None) -> None:
    body = encode_anthropic_response(
        model="m",
        content="Hello.",
        tool_calls=(),
        usage=USAGE,
        message_id="msg_x",
        finish_reason=reason,
        stop_sequence="END",
    )
    message = SDKMessage.model_validate(body)
    assert (message.stop_reason, message.stop_sequence) == (stop_reason, sequence)
    assert [b.type for b in message.content] == ["text"]


def test_encoded_tool_use_comes_back_unchanged_in_the_next_request() -> None:
    body = encode_anthropic_response(
        model="m", content=None, tool_calls=CALLS, usage=USAGE, message_id="msg_x"
    )
    assert [b["type"] for b in body["content"]] == ["tool_use", "tool_use"]
    results = [{"type": "tool_result", "tool_use_id": c.id, "content": "ok"} for c in CALLS]
    request = normalize_anthropic(
        {
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": body["content"]},
                {"role": "user", "content": results},
            ]
        }
    )
    assert request.messages[1] == AssistantMessage(content=None, tool_calls=CALLS)
    assert request.tools_recovered


# --- streaming -----------------------------------------------------------------------------


def stream_reply(encoder: AnthropicStreamEncoder) -> list[str]:
    events = encoder.start()
    for piece in ["Let me ", "check."]:
        events += encoder.text(piece)
    for call in CALLS:
        events += encoder.tool_call(call)
    events += encoder.finish("stop", USAGE)
    return events


def decode(event: str) -> tuple[str, dict[str, Any]]:
    head, data, blank = event.split("\n", 2)
    assert head.startswith("event: ") and data.startswith("data: ") and blank == "\n"
    payload: dict[str, Any] = json.loads(data[len("data: ") :])
    return head[len("event: ") :], payload


def sdk_client(body: str, status: int = 200) -> anthropic.Anthropic:
    def handler(request: httpx2.Request) -> httpx2.Response:
        kind = "text/event-stream" if status == 200 else "application/json"
        return httpx2.Response(status, content=body.encode(), headers={"content-type": kind})

    return anthropic.Anthropic(
        api_key="test",
        base_url="http://proxy.test",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
    )


def test_stream_event_sequence(snapshot: Any) -> None:
    decoded = [
        decode(e)
        for e in stream_reply(AnthropicStreamEncoder("smollm2", "msg_test", input_tokens=42))
    ]
    for name, payload in decoded:
        assert name == payload["type"]
        if name != "error":
            EVENTS.validate_python(payload)
    assert [name for name, _ in decoded] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert decoded == snapshot


def test_stream_through_the_sdk_message_stream() -> None:
    client = sdk_client(
        "".join(stream_reply(AnthropicStreamEncoder("smollm2", "msg_x", input_tokens=42)))
    )
    with client.messages.stream(
        model="smollm2", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        texts = list(stream.text_stream)
        final = stream.get_final_message()
    assert "".join(texts) == "Let me check."
    assert final.stop_reason == "tool_use"
    assert [(b.id, b.name, b.input) for b in final.content if b.type == "tool_use"] == [
        (c.id, c.name, c.arguments) for c in CALLS
    ]
    assert (final.usage.input_tokens, final.usage.output_tokens) == (42, 17)


def test_stream_text_after_a_tool_call_opens_a_new_block() -> None:
    encoder = AnthropicStreamEncoder("m", "msg_x")
    events = (
        encoder.tool_call(CALLS[0])
        + encoder.text("")
        + encoder.text("done")
        + encoder.finish("length")
    )
    decoded = [decode(e) for e in events]
    starts = [p["index"] for n, p in decoded if n == "content_block_start"]
    assert starts == [0, 1]
    assert decoded[-2][1]["delta"]["stop_reason"] == "tool_use"


def test_stream_text_only_ends_the_turn() -> None:
    encoder = AnthropicStreamEncoder("m", "msg_x")
    final = dict(decode(e) for e in encoder.text("Hi") + encoder.finish("stop", USAGE))
    assert final["message_delta"]["delta"]["stop_reason"] == "end_turn"
    assert final["message_delta"]["usage"] == {"input_tokens": 42, "output_tokens": 17}


def test_stream_error_mid_stream_is_raised_by_the_sdk() -> None:
    encoder = AnthropicStreamEncoder("m", "msg_x")
    events = encoder.text("partial ") + encoder.error("upstream timed out", type="timeout_error")
    name, payload = decode(events[-1])
    assert name == "error"
    ErrorResponse.model_validate(payload)
    assert "message_stop" not in "".join(events)
    client = sdk_client("".join(events))
    with pytest.raises(anthropic.APIStatusError, match="upstream timed out"):
        with client.messages.stream(
            model="m", max_tokens=8, messages=[{"role": "user", "content": "hi"}]
        ) as stream:
            stream.get_final_message()


@pytest.mark.parametrize(
    "misuse",
    [
        lambda e: e.text("late"),
        lambda e: e.tool_call(CALLS[0]),
        lambda e: e.finish(),
        lambda e: e.error("again"),
    ],
)
def test_stream_is_closed_after_finish(misuse: Callable[[AnthropicStreamEncoder], Any]) -> None:
    encoder = AnthropicStreamEncoder("m", "msg_x")
    encoder.finish()
    assert encoder.closed
    with pytest.raises(UsageError):
        misuse(encoder)


def test_stream_arguments_need_an_open_tool_use_block() -> None:
    encoder = AnthropicStreamEncoder("m", "msg_x")
    encoder.text("hi")
    with pytest.raises(UsageError, match="no tool_use block"):
        encoder.tool_call_arguments("{}")


# --- errors --------------------------------------------------------------------------------

STATUSES: dict[int, type[anthropic.APIStatusError]] = {
    400: anthropic.BadRequestError,
    401: anthropic.AuthenticationError,
    404: anthropic.NotFoundError,
    413: anthropic.APIStatusError,
    422: anthropic.UnprocessableEntityError,
    429: anthropic.RateLimitError,
    502: anthropic.InternalServerError,
    504: anthropic.InternalServerError,
}


@pytest.mark.parametrize("status", sorted(STATUSES))
def test_error_body_is_read_by_the_sdk(status: int, snapshot: Any) -> None:
    body = anthropic_error(status, f"problem {status}")
    assert body == snapshot
    if status != 413:  # request_too_large is documented but not in the SDK's error union
        ErrorResponse.model_validate(body)
    client = sdk_client(json.dumps(body), status=status)
    with pytest.raises(STATUSES[status]) as info:
        client.messages.create(
            model="m", max_tokens=8, messages=[{"role": "user", "content": "hi"}]
        )
    assert info.value.status_code == status
    assert f"problem {status}" in info.value.message


@pytest.mark.parametrize(
    ("exc", "status", "kind"),
    [
        (UnsupportedContent("image", "messages[0].content[1]"), 400, "invalid_request_error"),
        (BackendTimeout("slow"), 504, "timeout_error"),
        # an upstream 401 refuses the proxy's key, not the client's: tests/test_upstream_faults.py
        # of an upstream's body, the client reads its JSON error message alone
        (BackendHTTPError(429, '{"error": {"message": "slow down"}}'), 429, "rate_limit_error"),
        (BackendHTTPError(500, '{"error": "broken"}'), 502, "api_error"),
        (BackendHTTPError(503, "<html>busy</html>"), 503, "overloaded_error"),
    ],
)
def test_errors_map_to_status_and_body(exc: Any, status: int, kind: str) -> None:
    got_status, body = anthropic_error_for(exc)
    upstream = {429: "upstream answered HTTP 429: slow down (the proxy's log says more)",
                500: "upstream answered HTTP 500: broken (the proxy's log says more)",
                503: "upstream answered HTTP 503 (the proxy's log says more)"}
    said = upstream[exc.status_code] if isinstance(exc, BackendHTTPError) else str(exc)
    assert (got_status, body["error"]["type"], body["error"]["message"]) == (status, kind, said)


def test_a_stream_of_a_finished_reply_decodes_like_the_whole_response() -> None:
    encoder = AnthropicStreamEncoder("m", "msg_x", input_tokens=42)
    events = encoder.text("Checking.")
    for call in CALLS:
        events += encoder.tool_call(call)
    events += encoder.finish("stop", USAGE)
    client = sdk_client("".join(events))
    with client.messages.stream(
        model="m", max_tokens=8, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        streamed = stream.get_final_message()
    whole = SDKMessage.model_validate(
        encode_anthropic_response(
            model="m", content="Checking.", tool_calls=CALLS, usage=USAGE, message_id="msg_x"
        )
    )
    assert streamed.model_dump(exclude_none=True) == whole.model_dump(exclude_none=True)


def test_an_image_in_a_tool_result_is_a_placeholder_named_as_ignored() -> None:
    """Claude Code's Read of a picture: a text-only model gets a placeholder naming the
    image; the conversation goes on (it was a 400 for the whole request)."""
    call = {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "/w/red.png"}}
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}
    body = {"model": "m", "max_tokens": 64, "messages": [
        {"role": "user", "content": "What is in red.png?"},
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [image]}]},
    ], "tools": [{"name": "Read", "input_schema": {"type": "object"}}]}
    request = normalize_anthropic(body)
    result = request.messages[-1]
    assert isinstance(result, ToolMessage)
    assert result.result.content == "[image (image/png) omitted: this model reads text only]"
    assert request.ignored == ("tool_result.image",)


def test_server_tool_blocks_in_history_are_dropped_and_reported() -> None:
    """A turn in which Anthropic ran its own web search (an earlier turn served by
    Anthropic): the search blocks are dropped (their results are encrypted), the text the
    assistant wrote from them stays, and the request goes on, naming what it passed over."""
    body = {
        "model": "m",
        "max_tokens": 64,
        "messages": [
            {"role": "user", "content": "Who won the match yesterday?"},
            {"role": "assistant", "content": [
                {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "match"}},
                {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [
                    {"type": "web_search_result", "url": "https://example.org", "title": "Result",
                     "encrypted_content": "EqgfCioIARgBIiQ3YTAwMjY1Mi1mZjM5", "page_age": None}]},
                {"type": "text", "text": "The home side won 2-1."},
            ]},
            {"role": "user", "content": "And the weather there?"},
        ],
    }
    request = normalize_anthropic(body)
    assert request.messages[1] == AssistantMessage(content="The home side won 2-1.")
    assert request.messages[2] == UserMessage(content="And the weather there?")
    assert request.ignored == ("messages.server_tool_use", "messages.web_search_tool_result")
