"""The hostile inputs of the chaos run: malformed client bodies and upstream faults."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx

from agentfsm.testing import FakeReply, drip, garbage, reset, stall, status, stream_no_terminator

__all__ = ["BAD_INPUTS", "FAULTS", "shape_ok"]

_USER = [{"role": "user", "content": "hi"}]


def _body(protocol: str, **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"model": "m", "messages": _USER}
    if protocol == "anthropic":
        base["max_tokens"] = 50
    return {**base, **fields}


def _raw(protocol: str, field: str, raw: str) -> bytes:
    """A body whose ``field`` is raw JSON text (what json.dumps would refuse to write)."""
    text = json.dumps(_body(protocol))
    return (text[:-1] + f', "{field}": {raw}}}').encode()


def _deep_schema(protocol: str, depth: int) -> bytes:
    """A tool whose schema nests ``depth`` objects (written as text: too deep for json.dumps)."""
    schema = '{"type": "object", "properties": {"a": ' * depth + '{"type": "string"}' + "}}" * depth
    if protocol == "openai":
        tool = '{"type": "function", "function": {"name": "f", "parameters": ' + schema + "}}"
    else:
        tool = '{"name": "f", "input_schema": ' + schema + "}"
    return _raw(protocol, "tools", "[" + tool + "]")


def _call_arguments(protocol: str, arguments: str) -> bytes:
    if protocol == "openai":
        call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": arguments}}
        messages = [*_USER, {"role": "assistant", "content": None, "tool_calls": [call]},
                    {"role": "tool", "tool_call_id": "c1", "content": "ok"}]
        return json.dumps(_body(protocol, messages=messages)).encode()
    # Anthropic's tool_use input is an object, not a string: the same depth, as JSON
    use = '{"type": "tool_use", "id": "t1", "name": "f", "input": {"a": ' + arguments + "]" * arguments.count("[") + "}}"
    text = '[{"role": "user", "content": "hi"}, {"role": "assistant", "content": [' + use + "]}]"
    return ('{"model": "m", "max_tokens": 50, "messages": ' + text + "}").encode()


#: name -> the raw body for a protocol; every one is the client's mistake (4xx expected). A
#: lone surrogate is not among them: the proxy reads it as U+FFFD and answers (docs/proxy.md)
BAD_INPUTS: dict[str, Callable[[str], bytes]] = {
    "not json": lambda p: b"{this is not json",
    "empty body": lambda p: b"",
    "a json array": lambda p: b"[1, 2, 3]",
    "no messages": lambda p: json.dumps({"model": "m", "max_tokens": 5}).encode(),
    "messages not a list": lambda p: json.dumps(_body(p, messages="hi")).encode(),
    "unknown role": lambda p: json.dumps(_body(p, messages=[{"role": "wizard", "content": "hi"}])).encode(),
    "content a number": lambda p: json.dumps(_body(p, messages=[{"role": "user", "content": 5}])).encode(),
    "tool_choice names no tool": lambda p: json.dumps(_body(p, tool_choice={"type": "function", "function": {"name": "nope"}} if p == "openai" else {"type": "tool", "name": "nope"})).encode(),
    "max_tokens a string": lambda p: json.dumps(_body(p, max_tokens="many")).encode(),
    "nesting 5000 deep": lambda p: _raw(p, "metadata", "[" * 5000 + "]" * 5000),
    "integer of 5000 digits": lambda p: _raw(p, "max_tokens", "7" * 5000),
    "NaN": lambda p: _raw(p, "temperature", "NaN"),
    "Infinity": lambda p: _raw(p, "temperature", "Infinity"),
    "arguments 100k deep": lambda p: _call_arguments(p, "[" * 100_000),
    "tool schema 500 deep": lambda p: _deep_schema(p, 500),
}

#: fault name -> the FakeUpstream step (the proxy runs with a 2 s request timeout)
FAULTS: dict[str, Callable[[], FakeReply]] = {
    "stall": lambda: stall(30),
    "reset": reset,
    "garbage": garbage,
    "500": lambda: status(500),
    "429": lambda: status(429, retry_after=60),
    "drip": lambda: drip(0.2, text="x" * 200),
    "no_terminator": lambda: stream_no_terminator("partial answer"),
    "never_ends": lambda: drip(0.05, forever=True),
}


def shape_ok(protocol: str, response: httpx.Response) -> bool:
    """A 4xx whose body is an error in the protocol's own shape."""
    if not 400 <= response.status_code < 500:
        return False
    try:
        body = response.json()
    except ValueError:
        return False
    if not isinstance(body, dict) or not isinstance(body.get("error"), dict):
        return False
    error = body["error"]
    if not isinstance(error.get("message"), str) or not isinstance(error.get("type"), str):
        return False
    return protocol == "openai" or body.get("type") == "error"
