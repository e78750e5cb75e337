"""The proxy attacked as a hostile client and as a hostile upstream (the attack audit).

Each finding was reproduced through a real proxy on 127.0.0.1 in front of a scripted
upstream (:class:`~agentfsm.testing.FakeUpstream`) before it was fixed; the tests here
send the same requests.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agentfsm.guards.schema import MAX_KEYWORD_STEPS, validate_arguments
from agentfsm.testing import FakeUpstream
from tests._proxy import action, proxy, upstream_backend

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


@pytest.fixture
def watched() -> Iterator[tuple[FakeUpstream, str, list[float]]]:
    """A proxy in front of an empty script, and the seconds each of its /health answers took
    while the test ran (polled from another thread)."""
    seconds: list[float] = []
    stop = threading.Event()
    with FakeUpstream([]) as fake, proxy(upstream_backend(fake, total=120, read=120)) as url:

        def poll() -> None:
            while not stop.is_set():
                started = time.monotonic()
                httpx.get(f"{url}/health", timeout=120)
                seconds.append(time.monotonic() - started)
                stop.wait(0.05)

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        try:
            yield fake, url, seconds
        finally:
            stop.set()
            poller.join(timeout=130)


@pytest.mark.parametrize("protocol", sorted(PATHS))
def test_a_call_against_a_fanned_out_schema_leaves_the_proxy_serving(
    watched: tuple[FakeUpstream, str, list[float]], protocol: str
) -> None:
    # defect: the check ran on the event loop, so every other client (and /health) waited
    fake, url, seconds = watched
    fake.enqueue(action("fan", x="a"))
    tools = [_tool(protocol, "fan", _fanned_out(20, "allOf", {"type": "string"}))]
    answer = httpx.post(url + PATHS[protocol], json=_body(protocol, tools), timeout=120)
    assert answer.status_code == 200, answer.text
    assert '"fan"' in answer.text
    assert seconds and max(seconds) < 10
