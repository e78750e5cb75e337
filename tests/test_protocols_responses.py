"""The Responses API encoders, pure: whole responses and the stream's event sequence."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentfsm.core.backend import Usage
from agentfsm.core.errors import UsageError
from agentfsm.core.messages import ToolCall
from agentfsm.protocols import ResponsesStreamEncoder, encode_responses_response

CALL = ToolCall(id="call_" + "a" * 24, name="get_weather", arguments={"city": "Paris"})
USAGE = Usage(prompt_tokens=30, completion_tokens=7)


def _events(lines: list[str]) -> list[dict[str, Any]]:
    out = []
    for event in lines:
        head, data = event.strip().split("\n")
        body = json.loads(data.removeprefix("data: "))
        assert head == f"event: {body['type']}"
        out.append(body)
    return out


def test_whole_response_items_and_usage() -> None:
    body = encode_responses_response(
        model="m", content="Checking.", tool_calls=[CALL], usage=USAGE, created=1, response_id="resp_" + "b" * 24
    )
    message, call = body["output"]
    assert message == {
        "id": "msg_" + "b" * 24, "type": "message", "role": "assistant", "status": "completed",
        "content": [{"type": "output_text", "text": "Checking.", "annotations": [], "logprobs": []}],
    }
    assert call == {
        "id": "fc_" + "a" * 24, "type": "function_call", "status": "completed",
        "call_id": CALL.id, "name": "get_weather", "arguments": '{"city":"Paris"}',
    }
    assert body["status"] == "completed" and body["incomplete_details"] is None
    assert body["usage"]["input_tokens"] == 30 and body["usage"]["total_tokens"] == 37


def test_cut_off_prose_is_incomplete() -> None:
    body = encode_responses_response(
        model="m", content="Partial", tool_calls=[], usage=USAGE, created=1, response_id="resp_x",
        finish_reason="length",
    )
    assert body["status"] == "incomplete"
    assert body["incomplete_details"] == {"reason": "max_output_tokens"}


def test_stream_prose_then_call() -> None:
    encoder = ResponsesStreamEncoder("m", "resp_" + "c" * 24, 1)
    lines = encoder.text("") + encoder.text("Let ") + encoder.text("me see.")
    lines += encoder.tool_call(CALL) + encoder.finish("tool_calls", USAGE)
    events = _events(lines)
    assert [e["type"] for e in events] == [
        "response.created", "response.in_progress",
        "response.output_item.added", "response.content_part.added",
        "response.output_text.delta", "response.output_text.delta",
        "response.output_text.done", "response.content_part.done", "response.output_item.done",
        "response.output_item.added", "response.function_call_arguments.delta",
        "response.function_call_arguments.done", "response.output_item.done",
        "response.completed",
    ]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert events[6]["text"] == "Let me see."
    assert [e.get("output_index") for e in events[2:13]] == [0] * 7 + [1] * 4
    final = events[-1]["response"]
    assert [i["type"] for i in final["output"]] == ["message", "function_call"]
    assert final["usage"]["output_tokens"] == 7 and encoder.closed
    with pytest.raises(UsageError):
        encoder.text("more")


def test_stream_prose_after_a_call_is_a_usage_error() -> None:
    encoder = ResponsesStreamEncoder("m", "resp_x", 1)
    encoder.tool_call(CALL)
    with pytest.raises(UsageError, match="cannot follow a function call"):
        encoder.text("late prose")


def test_stream_failure_ends_with_error_then_response_failed() -> None:
    encoder = ResponsesStreamEncoder("m", "resp_x", 1)
    events = _events(encoder.text("Some") + encoder.error("upstream went away"))
    assert [e["type"] for e in events][-2:] == ["error", "response.failed"]
    failed = events[-1]["response"]
    assert failed["status"] == "failed" and failed["error"]["message"] == "upstream went away"
    assert "response.completed" not in [e["type"] for e in events] and encoder.closed


def test_stream_length_cut_is_response_incomplete() -> None:
    encoder = ResponsesStreamEncoder("m", "resp_x", 1)
    events = _events(encoder.text("Partial") + encoder.finish("length", USAGE))
    assert events[-1]["type"] == "response.incomplete"
    assert events[-1]["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
