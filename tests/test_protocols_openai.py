"""OpenAI chat completions: normalization, response and stream encoding, error bodies.

Encoded payloads are validated with the official ``openai`` SDK's own models, and
streams are fed through the SDK's accumulation logic over an httpx mock transport.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai
import pytest
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types import ErrorObject
from openai.types.chat import ChatCompletion, ChatCompletionChunk

try:  # recent openai SDKs are built on httpx2
    import httpx2
except ImportError:  # older SDKs take httpx, whose mock transport httpx2 mirrors
    import httpx as httpx2  # type: ignore[no-redef]

import agentfsm.protocols as protocols
from agentfsm.core.backend import Usage
from agentfsm.core.errors import (
    BackendConnectionError,
    BackendHTTPError,
    BackendProtocolError,
    BackendTimeout,
    RequestError,
    RetryBudgetExceeded,
    UnsupportedContent,
    UsageError,
)
from agentfsm.core.messages import AssistantMessage, SystemMessage, ToolCall, ToolMessage, UserMessage
from agentfsm.protocols import (
    OpenAIStreamEncoder,
    encode_openai_response,
    mint_call_id,
    mint_response_id,
    normalize_openai,
    openai_error,
    openai_error_for,
    remint_ids,
)

WIRE = Path(__file__).parent.parent / "fixtures" / "wire" / "openai"
REQUESTS = sorted((WIRE / "requests").glob("*.json"))
INVALID = json.loads((WIRE / "invalid.json").read_text())

CALLS = (
    ToolCall(id="call_AAAAAAAAAAAAAAAAAAAAAAAA", name="get_weather", arguments={"city": "Paris"}),
    ToolCall(
        id="call_BBBBBBBBBBBBBBBBBBBBBBBB", name="get_time", arguments={"city": "Paris", "tz": "€"}
    ),
)
USAGE = Usage(prompt_tokens=42, completion_tokens=17)


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((WIRE / "requests" / f"{name}.json").read_text())
    return data


# --- normalization ---------------------------------------------------------------------


@pytest.mark.parametrize("path", REQUESTS, ids=lambda p: p.stem)
def test_normalized_request_matches_snapshot(path: Path, snapshot: Any) -> None:
    request = normalize_openai(json.loads(path.read_text()))
    assert request.protocol == "openai"
    assert request.model_dump(mode="json") == snapshot


def test_single_turn_tool_call() -> None:
    request = normalize_openai(load("single_turn_tool_call"))
    assert request.tool_mode and not request.tools_recovered
    assert [t.name for t in request.tools] == ["get_weather", "get_time"]
    assert request.tools[0].parameters["required"] == ["city"]
    assert str(request.tool_choice) == "auto"
    assert request.parallel is True
    assert request.messages == (
        SystemMessage(content="You are a helpful assistant."),
        UserMessage(content="What is the weather and the time in Paris?"),
    )


def test_multi_turn_tool_results_carry_names_and_parsed_arguments() -> None:
    request = normalize_openai(load("multi_turn_tool_result"))
    assistant = request.messages[2]
    assert isinstance(assistant, AssistantMessage)
    assert assistant.content is None
    assert assistant.tool_calls == (
        ToolCall(id="call_abc123", name="get_weather", arguments={"city": "Paris", "unit": "c"}),
        ToolCall(id="call_def456", name="get_time", arguments={"city": "Paris"}),
    )
    results = [m.result for m in request.messages[3:] if isinstance(m, ToolMessage)]
    assert [(r.call_id, r.name, r.status) for r in results] == [
        ("call_abc123", "get_weather", "ok"),
        ("call_def456", "get_time", "ok"),
    ]


def test_later_turn_without_tools_recovers_them_from_history() -> None:
    request = normalize_openai(load("later_turn_without_tools"))
    assert request.tool_mode and request.tools_recovered
    assert [(t.name, t.description, t.parameters) for t in request.tools] == [
        ("get_weather", "", {"type": "object"}),
        ("get_time", "", {"type": "object"}),
    ]
    # history does not make another call mandatory: only tool_choice does
    assert str(request.tool_choice) == "auto"


@pytest.mark.parametrize(
    ("name", "choice", "parallel"),
    [
        ("forced_tool", "get_time", True),
        ("tool_choice_required", "required", True),
        ("tool_choice_none", "none", True),
        ("parallel_tool_calls_false", "auto", False),
    ],
)
def test_tool_choice_and_parallel(name: str, choice: str, parallel: bool) -> None:
    request = normalize_openai(load(name))
    assert (str(request.tool_choice), request.parallel, request.tool_mode) == (choice, parallel, True)


def test_allowed_tools_narrows_the_tools() -> None:
    request = normalize_openai(load("allowed_tools"))
    assert [t.name for t in request.tools] == ["get_weather"]
    assert str(request.tool_choice) == "required"


def test_empty_allowed_tools_means_none() -> None:
    body = load("allowed_tools")
    body["tool_choice"]["allowed_tools"]["tools"] = []
    request = normalize_openai(body)
    assert (str(request.tool_choice), len(request.tools), request.tool_mode) == ("none", 2, True)


def test_plain_request_is_not_in_tool_mode_and_keeps_extras() -> None:
    request = normalize_openai(load("plain_no_tools"))
    assert not request.tool_mode and request.tools == ()
    assert str(request.tool_choice) == "none"
    assert (request.top_p, request.seed, request.user, request.ignored) == (0.9, 7, "u-1", ())
    assert (request.max_tokens, request.temperature, request.stop) == (64, 0.2, ("\n\n",))


def test_content_parts_developer_refusal_and_empty_result() -> None:
    request = normalize_openai(load("content_parts_and_developer"))
    assert request.max_tokens == 128  # max_completion_tokens wins over max_tokens
    assert request.stop == ("END", "STOP")
    system, user, assistant, tool, refusal = request.messages
    assert system == SystemMessage(content="Be brief.\nUse tools.")
    assert user == UserMessage(content="Weather in Oslo?")
    assert assistant == AssistantMessage(
        content="Checking.", tool_calls=(ToolCall(id="call_x1", name="get_weather", arguments={}),)
    )
    assert isinstance(tool, ToolMessage) and tool.result.status == "empty"
    assert refusal == AssistantMessage(content="I cannot help with that.")


def test_stream_options_include_usage() -> None:
    request = normalize_openai(load("stream_include_usage"))
    assert request.stream and request.stream_include_usage
    assert "stream_options" not in request.ignored


@pytest.mark.parametrize("case", INVALID, ids=lambda c: c["name"])
def test_invalid_request_is_a_400_naming_the_problem(case: dict[str, Any]) -> None:
    expected = UnsupportedContent if case["error"] == "UnsupportedContent" else RequestError
    with pytest.raises(expected) as info:
        normalize_openai(case["body"])
    assert info.value.status_code == 400
    assert info.value.param == case["param"]
    if case["kind"] is not None:
        assert isinstance(info.value, UnsupportedContent) and info.value.kind == case["kind"]
        assert repr(case["kind"]) in str(info.value)
    else:
        assert not isinstance(info.value, UnsupportedContent)
        assert case["message_contains"] in str(info.value)


# --- ids and pass-through ------------------------------------------------------------------


def test_minted_ids_have_the_openai_shape() -> None:
    rng = random.Random(7)
    call_id = mint_call_id("openai", rng)
    assert call_id.startswith("call_") and len(call_id) == 29 and call_id[5:].isalnum()
    assert mint_call_id("openai", random.Random(7)) == call_id
    assert mint_call_id("openai", "0123456789abcdef0123456789") == "call_0123456789abcdef01234567"
    hashed = mint_call_id("openai", "short-token")
    assert hashed != mint_call_id("openai", "other-token") and hashed[5:].isalnum()
    assert mint_response_id("openai", rng).startswith("chatcmpl-")


def test_remint_ids_replaces_parser_ids() -> None:
    tokens = iter(["a" * 24, "b" * 24])
    parsed = (ToolCall(id="call_0", name="f"), ToolCall(id="call_1", name="g", arguments={"x": 1}))
    reminted = remint_ids(parsed, "openai", lambda: next(tokens))
    assert [c.id for c in reminted] == ["call_" + "a" * 24, "call_" + "b" * 24]
    assert [(c.name, c.arguments) for c in reminted] == [("f", {}), ("g", {"x": 1})]


# --- whole responses -----------------------------------------------------------------------


def test_response_with_tool_calls(snapshot: Any) -> None:
    body = encode_openai_response(
        model="smollm2",
        content="Checking both.",
        tool_calls=CALLS,
        usage=USAGE,
        created=1700000000,
        response_id="chatcmpl-test",
    )
    completion = ChatCompletion.model_validate(body)
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Checking both."
    calls = choice.message.tool_calls or []
    assert [json.loads(c.function.arguments) for c in calls if c.type == "function"] == [
        {"city": "Paris"},
        {"city": "Paris", "tz": "€"},
    ]
    assert completion.usage is not None and completion.usage.total_tokens == 59
    assert body == snapshot


@pytest.mark.parametrize("reason", ["stop", "length"])
def test_response_without_calls(reason: str) -> None:
    body = encode_openai_response(
        model="m",
        content="Hello.",
        tool_calls=(),
        usage=USAGE,
        created=1,
        response_id="chatcmpl-x",
        finish_reason=reason,
    )
    completion = ChatCompletion.model_validate(body)
    assert completion.choices[0].finish_reason == reason
    assert completion.choices[0].message.tool_calls is None
    assert "tool_calls" not in body["choices"][0]["message"]


def test_encoded_calls_come_back_unchanged_in_the_next_request() -> None:
    body = encode_openai_response(
        model="m", content=None, tool_calls=CALLS, usage=USAGE, created=1, response_id="chatcmpl-x"
    )
    history = [{"role": "user", "content": "hi"}, body["choices"][0]["message"]]
    history += [{"role": "tool", "tool_call_id": c.id, "content": "ok"} for c in CALLS]
    request = normalize_openai({"messages": history})
    assert request.messages[1] == AssistantMessage(content=None, tool_calls=CALLS)
    assert request.tools_recovered


# --- streaming -----------------------------------------------------------------------------


def stream_reply(encoder: OpenAIStreamEncoder) -> list[str]:
    events = encoder.start()
    for piece in ["Let me ", "check ", "both."]:
        events += encoder.text(piece)
    for index, call in enumerate(CALLS):
        events += encoder.tool_call(index, call)
    events += encoder.finish("stop", USAGE)
    return events


def chunks_of(events: list[str]) -> list[ChatCompletionChunk]:
    out = []
    for event in events:
        assert event.startswith("data: ") and event.endswith("\n\n")
        payload = event[len("data: ") : -2]
        if payload != "[DONE]":
            out.append(ChatCompletionChunk.model_validate_json(payload))
    return out


def sdk_client(body: str, status: int = 200) -> openai.OpenAI:
    def handler(request: httpx2.Request) -> httpx2.Response:
        kind = "text/event-stream" if status == 200 else "application/json"
        return httpx2.Response(status, content=body.encode(), headers={"content-type": kind})

    return openai.OpenAI(
        api_key="test",
        base_url="http://proxy.test/v1",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
    )


def test_stream_event_sequence(snapshot: Any) -> None:
    events = stream_reply(OpenAIStreamEncoder("smollm2", "chatcmpl-test", 1700000000))
    assert events[-1] == "data: [DONE]\n\n"
    chunks = chunks_of(events)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks][-1] == "tool_calls"
    starts = [tc for c in chunks for tc in c.choices[0].delta.tool_calls or [] if tc.id]
    assert [(s.index, s.id, s.function and s.function.name) for s in starts] == [
        (0, CALLS[0].id, "get_weather"),
        (1, CALLS[1].id, "get_time"),
    ]
    payloads = [e[len("data: ") : -2] for e in events]
    assert [p if p == "[DONE]" else json.loads(p) for p in payloads] == snapshot


def test_stream_accumulates_in_the_sdk_state() -> None:
    state: ChatCompletionStreamState[None] = ChatCompletionStreamState()
    for chunk in chunks_of(stream_reply(OpenAIStreamEncoder("m", "chatcmpl-x", 1))):
        state.handle_chunk(chunk)
    final = state.get_final_completion()
    message = final.choices[0].message
    assert message.content == "Let me check both."
    assert final.choices[0].finish_reason == "tool_calls"
    assert [
        (c.id, c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls or []
    ] == [(c.id, c.name, c.arguments) for c in CALLS]


def test_stream_through_the_sdk_client_with_usage() -> None:
    encoder = OpenAIStreamEncoder("smollm2", "chatcmpl-x", 1, include_usage=True)
    client = sdk_client("".join(stream_reply(encoder)))
    with client.chat.completions.stream(
        model="smollm2", messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        final = stream.get_final_completion()
    assert final.choices[0].message.content == "Let me check both."
    assert [
        json.loads(c.function.arguments) for c in final.choices[0].message.tool_calls or []
    ] == [
        {"city": "Paris"},
        {"city": "Paris", "tz": "€"},
    ]
    assert final.usage is not None and final.usage.prompt_tokens == 42


def test_stream_text_only_finishes_with_stop_or_length() -> None:
    encoder = OpenAIStreamEncoder("m", "chatcmpl-x", 1)
    events = encoder.text("Hi") + encoder.text("") + encoder.finish("length")
    chunks = chunks_of(events)
    assert [c.choices[0].delta.content for c in chunks] == [None, "Hi", None]
    assert chunks[-1].choices[0].finish_reason == "length"
    # the role chunk carries no content at all: "" would be an empty text part to some clients
    assert "content" not in json.loads(events[0].removeprefix("data: "))["choices"][0]["delta"]


def test_stream_error_mid_stream_is_raised_by_the_sdk() -> None:
    encoder = OpenAIStreamEncoder("m", "chatcmpl-x", 1)
    events = encoder.text("partial ") + encoder.error(
        "upstream reset the connection", code="upstream_reset"
    )
    assert "[DONE]" not in "".join(events)
    assert json.loads(events[-1][len("data: ") :])["error"]["code"] == "upstream_reset"
    client = sdk_client("".join(events))
    with pytest.raises(openai.APIError, match="upstream reset the connection"):
        with client.chat.completions.stream(
            model="m", messages=[{"role": "user", "content": "hi"}]
        ) as stream:
            stream.get_final_completion()


@pytest.mark.parametrize(
    "misuse",
    [
        lambda e: e.text("late"),
        lambda e: e.finish(),
        lambda e: e.error("again"),
        lambda e: e.tool_call(5, CALLS[0]),
    ],
)
def test_stream_is_closed_after_finish(misuse: Callable[[OpenAIStreamEncoder], Any]) -> None:
    encoder = OpenAIStreamEncoder("m", "chatcmpl-x", 1)
    encoder.finish()
    assert encoder.closed
    with pytest.raises(UsageError):
        misuse(encoder)


def test_stream_rejects_reused_or_unknown_call_index() -> None:
    encoder = OpenAIStreamEncoder("m", "chatcmpl-x", 1)
    encoder.tool_call(0, CALLS[0])
    with pytest.raises(UsageError, match="already started"):
        encoder.tool_call(0, CALLS[1])
    with pytest.raises(UsageError, match="not been started"):
        encoder.tool_call_arguments(3, "{}")


# --- errors --------------------------------------------------------------------------------

STATUSES = {
    400: openai.BadRequestError,
    401: openai.AuthenticationError,
    404: openai.NotFoundError,
    413: openai.APIStatusError,
    422: openai.UnprocessableEntityError,
    429: openai.RateLimitError,
    502: openai.InternalServerError,
    504: openai.InternalServerError,
}


@pytest.mark.parametrize("status", sorted(STATUSES))
def test_error_body_is_read_by_the_sdk(status: int, snapshot: Any) -> None:
    body = openai_error(status, f"problem {status}", param="messages" if status == 400 else None)
    ErrorObject.model_validate(body["error"])
    assert body == snapshot
    client = sdk_client(json.dumps(body), status=status)
    with pytest.raises(STATUSES[status]) as info:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert info.value.status_code == status
    assert f"problem {status}" in info.value.message


@pytest.mark.parametrize(
    ("exc", "status", "param"),
    [
        (UnsupportedContent("image_url", "messages[0].content[1]"), 400, "messages[0].content[1]"),
        (RequestError("bad", param="tools"), 400, "tools"),
        (BackendTimeout("slow"), 504, None),
        (BackendConnectionError("down"), 502, None),
        (BackendProtocolError("garbage"), 502, None),
        (BackendHTTPError(429, '{"error": {"message": "slow down", "type": "requests"}}'), 429, None),
        (BackendHTTPError(500, "boom"), 502, None),
        (RetryBudgetExceeded(3, "no", "no action"), 500, None),
    ],
)
def test_errors_map_to_status_and_body(exc: Any, status: int, param: str | None) -> None:
    got_status, body = openai_error_for(exc)
    assert got_status == status
    assert body["error"]["param"] == param
    # of an upstream's body, the client reads its JSON error message alone
    said = {429: "upstream answered HTTP 429: slow down (the proxy's log says more)",
            500: "upstream answered HTTP 500 (the proxy's log says more)"}
    assert body["error"]["message"] == (said[exc.status_code] if isinstance(exc, BackendHTTPError) else str(exc))


def test_public_names_are_sorted_and_exported() -> None:
    assert protocols.__all__ == sorted(protocols.__all__)
    assert all(hasattr(protocols, name) for name in protocols.__all__)


def test_a_stream_of_a_finished_reply_decodes_like_the_whole_response() -> None:
    encoder = OpenAIStreamEncoder("m", "chatcmpl-x", 1)
    events = encoder.text("Checking.")
    for index, call in enumerate(CALLS):
        events += encoder.tool_call(index, call)
    events += encoder.finish("stop", USAGE)
    state: ChatCompletionStreamState[None] = ChatCompletionStreamState()
    for chunk in chunks_of(events):
        state.handle_chunk(chunk)
    streamed = state.get_final_completion().choices[0]
    whole = ChatCompletion.model_validate(
        encode_openai_response(
            model="m",
            content="Checking.",
            tool_calls=CALLS,
            usage=USAGE,
            created=1,
            response_id="chatcmpl-x",
        )
    ).choices[0]
    assert streamed.finish_reason == whole.finish_reason == "tool_calls"
    assert streamed.message.content == whole.message.content
    assert [
        (c.id, c.type, c.function.name, c.function.arguments)
        for c in streamed.message.tool_calls or []
    ] == [
        (c.id, c.type, c.function.name, c.function.arguments)
        for c in whole.message.tool_calls or []
        if c.type == "function"
    ]
