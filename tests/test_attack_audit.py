"""The proxy attacked as a hostile client and as a hostile upstream (the attack audit).

Each finding was reproduced through a real proxy on 127.0.0.1 in front of a scripted
upstream (:class:`~agentfsm.testing.FakeUpstream`) before it was fixed; the tests here
send the same requests.
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest

from agentfsm.guards.schema import MAX_KEYWORD_STEPS, validate_arguments
from agentfsm.testing import FakeReply, FakeUpstream, raw_body
from tests._proxy import action, base, fake

__all__ = ["base", "fake"]  # the fixtures, used by name

PATHS = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages", "responses": "/v1/responses"}


def _tool(protocol: str, name: str, parameters: Any) -> dict[str, Any]:
    if protocol == "openai":
        return {"type": "function", "function": {"name": name, "description": "d", "parameters": parameters}}
    if protocol == "anthropic":
        return {"name": name, "description": "d", "input_schema": parameters}
    return {"type": "function", "name": name, "description": "d", "parameters": parameters}


def _body(protocol: str, tools: list[Any], stream: bool = False, **extra: Any) -> dict[str, Any]:
    turn = [{"role": "user", "content": "go"}]
    body: dict[str, Any] = {"model": "m", "stream": stream, "tools": tools, **extra}
    body["input" if protocol == "responses" else "messages"] = turn
    if protocol == "anthropic":
        body.setdefault("max_tokens", 256)
    return body


def _fanned_out(levels: int, combinator: str, leaf: Any) -> dict[str, Any]:
    """A small schema whose every level names the next one twice: 2**levels evaluations."""
    defs: dict[str, Any] = {
        f"d{i}": {combinator: [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]} for i in range(levels)
    }
    defs[f"d{levels}"] = leaf
    return {"type": "object", "$defs": defs, "properties": {"x": {"$ref": "#/$defs/d0"}}, "required": ["x"]}


# --- a schema that fans out: bounded validation ---------------------------------------


@pytest.mark.parametrize(
    ("combinator", "leaf"),
    [("allOf", {"type": "string"}), ("anyOf", {"type": "integer"}), ("oneOf", {"type": "integer"})],
)
def test_a_fanned_out_schema_is_validated_within_a_bound(combinator: str, leaf: Any) -> None:
    # defect: 19 levels (1.4 KB) took 22 s, 20 took 35 s; each level doubles it
    started = time.monotonic()
    outcome = validate_arguments({"x": "a"}, _fanned_out(20, combinator, leaf))
    assert time.monotonic() - started < 10
    assert outcome.mismatch is None
    assert f"more than {MAX_KEYWORD_STEPS} schema keyword evaluations" in outcome.note


def test_a_schema_within_the_bound_is_still_checked() -> None:
    schema = _fanned_out(6, "allOf", {"type": "string"})
    assert validate_arguments({"x": "a"}, schema).note == ""
    mismatch = validate_arguments({"x": 1}, schema).mismatch
    assert mismatch is not None and mismatch.path == "arguments.x"


@pytest.mark.parametrize("protocol", sorted(PATHS))
def test_a_call_against_a_fanned_out_schema_leaves_the_proxy_serving(
    watched: tuple[FakeUpstream, str, list[float]], protocol: str
) -> None:
    # defect: the check ran on the event loop, so every other client (and /health) waited
    fake, url, seconds = watched
    fake.enqueue(action("fan", x="a"))
    tools = [_tool(protocol, "fan", _fanned_out(20, "allOf", {"type": "string"}))]
    _polled_after(seconds, 0)
    answer = httpx.post(url + PATHS[protocol], json=_body(protocol, tools), timeout=120)
    assert answer.status_code == 200, answer.text
    assert '"fan"' in answer.text
    _polled_after(seconds, len(seconds))  # a /health answer that overlapped the request
    assert max(seconds) < 10


def _polled_after(seconds: list[float], count: int) -> None:
    """Wait (at most 60 s) until the poller has timed more than ``count`` answers."""
    deadline = time.monotonic() + 60
    while len(seconds) <= count and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(seconds) > count


# --- numbers a model writes that JSON cannot carry to the client ----------------------

_HUGE = "123456789012345678901234567890"
#: a model's call whose number is out of range, in each way a reply may write a call
_OUT_OF_RANGE = {
    "json-action-overflow": '```json action\n{"tool": "get_weather", "parameters": {"city": 1e999}}\n```',
    "json-action-integer": '```json action\n{"tool": "get_weather", "parameters": {"city": ' + _HUGE + "}}\n```",
    "command-overflow": '@tool get_weather {"city": -1e999}',
    "pythonic-integer": f"[get_weather(city={_HUGE})]",
    "json-protocol-integer": '{"thought": "t", "action": {"tool": "get_weather", "args": {"city": [' + _HUGE + "]}}}",
}


def _strict(text: str) -> Any:
    """``text`` read as JSON the way a strict reader (JavaScript's JSON.parse) reads it."""

    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def _arguments(protocol: str, stream: bool, text: str) -> list[Any]:
    """The arguments of every call an answer carries, each read strictly."""
    if not stream:
        data = _strict(text)
        if protocol == "openai":
            return [_strict(c["function"]["arguments"]) for c in data["choices"][0]["message"].get("tool_calls") or []]
        if protocol == "anthropic":
            return [block["input"] for block in data["content"] if block["type"] == "tool_use"]
        return [_strict(item["arguments"]) for item in data["output"] if item["type"] == "function_call"]
    events = [_strict(line[5:]) for line in text.splitlines() if line.startswith("data:") and line != "data: [DONE]"]
    if protocol == "openai":
        pieces: dict[int, str] = {}
        for event in events:
            for choice in event.get("choices", []):
                for call in (choice.get("delta") or {}).get("tool_calls") or []:
                    pieces[call["index"]] = pieces.get(call["index"], "") + call["function"].get("arguments", "")
        return [_strict(pieces[i]) for i in sorted(pieces)]
    if protocol == "anthropic":
        parts: dict[int, str] = {}
        for event in events:
            if event["type"] == "content_block_delta" and event["delta"]["type"] == "input_json_delta":
                parts[event["index"]] = parts.get(event["index"], "") + event["delta"]["partial_json"]
        return [_strict(parts[i]) for i in sorted(parts)]
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    return [_strict(item["arguments"]) for item in done if item["type"] == "function_call"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("protocol", sorted(PATHS))
@pytest.mark.parametrize("reply", list(_OUT_OF_RANGE))
def test_a_call_with_a_number_json_cannot_carry_is_corrected(
    fake: FakeUpstream, base: str, reply: str, protocol: str, stream: bool
) -> None:
    # defect: 1e999 reached OpenAI clients as arguments '{"city":Infinity}' (no JSON reader
    # takes it) and Anthropic clients as {"city": null} (a value the model never wrote); a
    # 30-digit integer made the proxy answer 500 (orjson refuses it)
    answer, correction = _corrected(fake, base, protocol, stream, _OUT_OF_RANGE[reply])
    assert "out of range" in correction


def _corrected(fake: FakeUpstream, base: str, protocol: str, stream: bool, first: str) -> tuple[str, str]:
    """The answer to a request whose model writes ``first``, then a right call, and the
    correction the model was sent between them; the answer must carry the right call only."""
    fake.enqueue(first, action("get_weather", city="Paris"))
    tools = [_tool(protocol, "get_weather", {"type": "object", "properties": {"city": {}}})]
    answer = httpx.post(base + PATHS[protocol], json=_body(protocol, tools, stream=stream), timeout=30)
    assert answer.status_code == 200, answer.text
    assert _arguments(protocol, stream, answer.text) == [{"city": "Paris"}]
    return answer.text, fake.chat_requests[-1].messages[-1]["content"]


#: bare actions a model wrote with a constant JSON has no word for: before, each was read
#: as prose, so the action's raw text reached the client as the answer
_CONSTANT_ACTIONS = {
    "json-action-nan": '{"action": {"tool": "get_weather", "args": {"city": NaN}}}',
    "json-protocol-infinity": '{"thought": "t", "action": {"tool": "get_weather", "args": {"city": -Infinity}}}',
    "llama-nan": '{"name": "get_weather", "parameters": {"city": NaN}}',
    "final-nan": '{"final": {"content": NaN}}',
}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("protocol", sorted(PATHS))
@pytest.mark.parametrize("reply", list(_CONSTANT_ACTIONS))
def test_a_bare_action_with_nan_is_corrected_not_answered(
    fake: FakeUpstream, base: str, reply: str, protocol: str, stream: bool
) -> None:
    answer, correction = _corrected(fake, base, protocol, stream, _CONSTANT_ACTIONS[reply])
    assert "NaN" not in answer and "Infinity" not in answer
    assert "is not allowed in JSON" in correction


def test_json_shaped_prose_with_nan_stays_prose() -> None:
    from agentfsm.core.messages import ToolSpec
    from agentfsm.dialects.parse import parse_reply

    spec = ToolSpec(name="f", parameters={"type": "object"})
    for text in ('{"name": "Ada", "age": NaN}', 'Like this: {"name": "other_tool", "parameters": {"x": NaN}}'):
        reply = parse_reply(text, [spec])
        assert reply.content == text and reply.tool_calls == () and reply.problems == ()


def test_numbers_within_range_are_kept_as_written() -> None:
    from agentfsm.core.messages import ToolSpec
    from agentfsm.dialects.parse import parse_reply

    spec = ToolSpec(name="f", parameters={"type": "object"})
    edge = {"a": -(2**63), "b": 2**64 - 1, "c": 1.7976931348623157e308, "d": 1e-320}
    reply = parse_reply('```json action\n{"tool": "f", "parameters": ' + json.dumps(edge) + "}\n```", [spec])
    assert [c.arguments for c in reply.tool_calls] == [edge] and reply.problems == ()


# --- an upstream body's values that JSON allows and a client cannot be sent -------------


#: an upstream's usage the proxy reads as it is
_USAGE = '{"prompt_tokens": 7, "completion_tokens": 3}'


def _completion(content: str = '"fine"', usage: str = _USAGE) -> str:
    return (
        '{"id": "x", "object": "chat.completion", "model": "fake", "choices": [{"index": 0, "message": '
        f'{{"role": "assistant", "content": {content}}}, "finish_reason": "stop"}}], "usage": {usage}}}'
    )


def _events(content: str, usage: str) -> str:
    chunks = [
        '{"choices": [{"index": 0, "delta": {"content": %s}, "finish_reason": null}]}' % content,
        '{"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}',
        '{"choices": [], "usage": %s}' % usage,
        "[DONE]",
    ]
    return "".join(f"data: {chunk}\r\n\r\n" for chunk in chunks)


def _upstream_body(shape: str, content: str = '"fine"', usage: str = _USAGE, opening: bytes = b"") -> FakeReply:
    """The upstream's answer of ``content`` and ``usage`` in ``shape``: one chat completion
    (``whole``) or server-sent events (``events``), ``opening`` bytes first."""
    if shape == "whole":
        return raw_body(opening + _completion(content, usage).encode())
    return raw_body(opening + _events(content, usage).encode(), "text/event-stream")


_UPSTREAM_USAGE = {
    "nan": '{"prompt_tokens": NaN, "completion_tokens": 3}',
    "string": '{"prompt_tokens": "7", "completion_tokens": 3}',
    "list": '{"prompt_tokens": [7], "completion_tokens": 3}',
    "overflow": '{"prompt_tokens": 1e999, "completion_tokens": 3}',
    "past-64-bits": '{"prompt_tokens": 123456789012345678901234567890, "completion_tokens": 3}',
    "negative": '{"prompt_tokens": -7, "completion_tokens": -3}',
}


def _usage_numbers(text: str) -> list[Any]:
    """Every token count in the ``usage`` objects of an answer (whole or streamed)."""
    found: list[Any] = []
    stack: list[Any] = [_strict(text)] if text.lstrip().startswith("{") else [
        _strict(line[5:]) for line in text.splitlines() if line.startswith("data:") and line != "data: [DONE]"
    ]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            usage = item.get("usage")
            if isinstance(usage, dict):
                found += [v for k, v in usage.items() if k.endswith("tokens")]
            stack += list(item.values())
        elif isinstance(item, list):
            stack += item
    return found


#: (the client streams, the upstream's body): a streamed request is answered either way
_SHAPES = pytest.mark.parametrize(
    ("stream", "shape"), [(False, "whole"), (True, "whole"), (True, "events")], ids=["whole", "stream-json", "stream-sse"]
)


@_SHAPES
@pytest.mark.parametrize("protocol", sorted(PATHS))
@pytest.mark.parametrize("usage", list(_UPSTREAM_USAGE))
def test_an_upstream_usage_that_is_no_count_is_estimated(
    fake: FakeUpstream, base: str, usage: str, protocol: str, stream: bool, shape: str
) -> None:
    # defect: NaN, "7", [7] or 1e999 made a 500; 30 digits a 500 too; -7 reached the client
    fake.enqueue(_upstream_body(shape, usage=_UPSTREAM_USAGE[usage]))
    extra = {"stream_options": {"include_usage": True}} if protocol == "openai" and stream else {}
    answer = httpx.post(base + PATHS[protocol], json=_body(protocol, [], stream=stream, **extra), timeout=30)
    assert answer.status_code == 200, answer.text
    counts = _usage_numbers(answer.text)
    assert counts and all(isinstance(n, int) and 0 <= n < 2**53 for n in counts), counts
    assert "fine" in answer.text


@_SHAPES
@pytest.mark.parametrize("protocol", sorted(PATHS))
def test_a_lone_surrogate_from_the_upstream_reaches_the_client_as_a_replacement(
    fake: FakeUpstream, base: str, shape: str, protocol: str, stream: bool
) -> None:
    # defect: a whole answer was a 500, a streamed one broke off mid-body (no error event)
    fake.enqueue(_upstream_body(shape, '"caf\\ud800e"'))
    answer = httpx.post(base + PATHS[protocol], json=_body(protocol, [], stream=stream), timeout=30)
    assert answer.status_code == 200, answer.text
    answer.read().decode("utf-8")  # strict UTF-8 throughout
    assert "caf\ufffde" in (answer.text if stream else json.dumps(answer.json(), ensure_ascii=False))


@_SHAPES
@pytest.mark.parametrize("protocol", sorted(PATHS))
def test_an_upstream_body_that_opens_with_a_byte_order_mark_is_read(
    fake: FakeUpstream, base: str, shape: str, protocol: str, stream: bool
) -> None:
    # defect: the BOM made the first SSE line's field "\ufeffdata", so the first event was
    # dropped; a whole body with one was "not JSON"
    fake.enqueue(_upstream_body(shape, opening=b"\xef\xbb\xbf"))
    answer = httpx.post(base + PATHS[protocol], json=_body(protocol, [], stream=stream), timeout=30)
    assert answer.status_code == 200, answer.text
    assert "fine" in answer.text and "\ufeff" not in answer.text
    assert len(fake.chat_requests) == 1  # read the first time, not asked again
