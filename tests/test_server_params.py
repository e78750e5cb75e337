"""A client's sampling settings reach the upstream unchanged; what is not honoured is reported.

Driven by the official SDKs through a real proxy; the FakeUpstream records the bodies
the proxy sends, so each test compares them with what the client asked for.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from agentfsm.core.backend import Capabilities
from agentfsm.core.errors import RequestError
from agentfsm.protocols import normalize_anthropic, normalize_openai, settle
from agentfsm.runtime.transcript import read_transcript
from agentfsm.testing import FakeUpstream
from tests._proxy import TOOLS_ANTHROPIC, TOOLS_OPENAI, action, proxy, upstream_backend

USER = [{"role": "user", "content": "What is the weather in Paris?"}]
SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
OPENAI_FORMAT = {"type": "json_schema", "json_schema": {"name": "out", "schema": SCHEMA, "strict": True}}
OPENAI_SAMPLING = {
    "temperature": 0.3,
    "top_p": 0.9,
    "seed": 7,
    "stop": ["END"],
    "presence_penalty": 0.5,
    "frequency_penalty": 0.25,
    "user": "u-1",
}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[FakeUpstream, str, Path]]:
    with FakeUpstream([]) as fake, proxy(upstream_backend(fake), transcripts_dir=tmp_path) as url:
        yield fake, url, tmp_path


def _sent(fake: FakeUpstream) -> list[dict[str, Any]]:
    return [r.body for r in fake.chat_requests]


def _openai(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=30)


def _anthropic(url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=url, api_key="unused", max_retries=0, timeout=30)


def _drain(result: Any, stream: bool) -> None:
    if stream:
        for _ in result:
            pass


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_openai_plain_request_passes_everything_through(
    served: tuple[FakeUpstream, str, Path], stream: bool
) -> None:
    fake, url, transcripts = served
    fake.enqueue('{"answer": "sunny"}')
    with _openai(url) as client:
        raw = client.chat.completions.with_raw_response.create(
            model="m", messages=USER, stream=stream, max_completion_tokens=77,  # type: ignore[call-overload]
            response_format=OPENAI_FORMAT, logit_bias={"50256": -100}, **OPENAI_SAMPLING,
        )
        _drain(raw.parse(), stream)
    (body,) = _sent(fake)
    assert {k: body.get(k) for k in OPENAI_SAMPLING} == OPENAI_SAMPLING
    assert body["max_tokens"] == 77 and body["response_format"] == OPENAI_FORMAT
    assert "logit_bias" not in body
    assert raw.headers["x-agentfsm-ignored"] == "logit_bias"
    (path,) = transcripts.glob("*.jsonl")
    normalized = read_transcript(path)[1]["normalized"]
    assert normalized["ignored"] == ["logit_bias"] and normalized["seed"] == 7


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_openai_tool_request_keeps_sampling_and_holds_the_answer_to_the_format(
    served: tuple[FakeUpstream, str, Path], stream: bool
) -> None:
    fake, url, _ = served
    fake.enqueue("no action here", action("get_weather", city="Paris"))
    with _openai(url) as client:
        raw = client.chat.completions.with_raw_response.create(
            model="m", messages=USER, tools=TOOLS_OPENAI, tool_choice="required", stream=stream,  # type: ignore[call-overload]
            max_tokens=99, response_format=OPENAI_FORMAT, **OPENAI_SAMPLING,
        )
        _drain(raw.parse(), stream)
    bodies = _sent(fake)
    assert len(bodies) == 2  # the correction carries the client's settings too
    for body in bodies:
        # replies are actions: the stop sequences end the answer (tests/test_server_stop_sequences.py)
        assert {k: body.get(k) for k in OPENAI_SAMPLING} == {**OPENAI_SAMPLING, "stop": None}
        # and the format binds the final answer, described in the contract
        assert body["max_tokens"] == 99 and "response_format" not in body
        assert '"required":["answer"]' in body["messages"][0]["content"]
    assert "x-agentfsm-ignored" not in raw.headers


ANTHROPIC_EXTRA = {
    "thinking": {"type": "adaptive"},
    "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
    "output_config": {"effort": "medium", "format": {"type": "json_schema", "schema": SCHEMA}},
}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("tools", [False, True], ids=["plain", "tools"])
def test_anthropic_settings_pass_through(
    served: tuple[FakeUpstream, str, Path], stream: bool, tools: bool
) -> None:
    fake, url, _ = served
    fake.enqueue(action("get_weather", city="Paris") if tools else '{"answer": "sunny"}')
    kwargs: dict[str, Any] = {"tools": TOOLS_ANTHROPIC} if tools else {}
    with _anthropic(url) as client:
        raw = client.messages.with_raw_response.create(
            model="m", messages=USER, max_tokens=321, stream=stream, stop_sequences=["END"],  # type: ignore[arg-type]
            metadata={"user_id": "u-1"}, **kwargs,
            # this SDK has no parameters for these: they go in as extra body fields
            extra_body={**ANTHROPIC_EXTRA, "temperature": 0.3, "top_p": 0.9, "top_k": 40},
        )
        _drain(raw.parse(), stream)
    (body,) = _sent(fake)
    assert (body["temperature"], body["top_p"], body["top_k"]) == (0.3, 0.9, 40)
    # with tools the stop sequences end the answer, not the actions (tests/test_server_stop_sequences.py)
    assert (body.get("stop"), body["max_tokens"], body["user"]) == (None if tools else ["END"], 321, "u-1")
    ignored = raw.headers["x-agentfsm-ignored"].split(",")
    assert sorted(ignored[:3]) == ["context_management", "output_config.effort", "thinking"]
    if tools:  # the format binds the final answer (the contract quotes it), not the actions
        assert "response_format" not in body and ignored[3:] == []
        assert '"required":["answer"]' in body["messages"][0]["content"]
    else:
        expected = {"type": "json_schema", "json_schema": {"name": "output", "schema": SCHEMA}}
        assert body["response_format"] == expected and ignored[3:] == []


def test_large_max_tokens_is_not_refused_at_parse_time(served: tuple[FakeUpstream, str, Path]) -> None:
    fake, url, _ = served
    fake.enqueue("hello")
    with _anthropic(url) as client:
        message = client.messages.create(model="m", messages=USER, max_tokens=64000)  # type: ignore[arg-type]
    assert message.content[0].text == "hello"  # type: ignore[union-attr]


def test_settings_a_backend_does_not_take_are_reported() -> None:
    request = normalize_anthropic(
        {"model": "m", "max_tokens": 5, "messages": USER, "top_k": 3, "metadata": {"user_id": "u"}}
    )
    settled = settle(request, Capabilities(sampling=frozenset({"top_p"})))
    assert settled.ignored == ("top_k", "metadata.user_id")
    assert settled.top_k is None and settled.user is None


def test_defaults_ask_for_nothing() -> None:
    request = normalize_openai(
        {"messages": USER, "logprobs": False, "logit_bias": {}, "metadata": None, "store": False}
    )
    assert request.ignored == ()


def test_seed_outside_int64_is_the_clients_400() -> None:
    with pytest.raises(RequestError, match="seed must be at most"):
        normalize_openai({"messages": USER, "seed": 2**63})
    assert normalize_openai({"messages": USER, "seed": -(2**63)}).seed == -(2**63)


@pytest.mark.parametrize(
    ("path", "field", "extra"),
    [
        ("/v1/chat/completions", "max_tokens", {}),
        ("/v1/chat/completions", "max_completion_tokens", {}),
        ("/v1/chat/completions", "top_k", {}),
        ("/v1/messages", "max_tokens", {}),
        ("/v1/messages", "top_k", {"max_tokens": 5}),
        ("/v1/responses", "max_output_tokens", {}),
    ],
)
@pytest.mark.parametrize("value", [2**63, 2**64, 10**40])
def test_an_integer_past_64_bits_is_a_typed_400_not_a_500(
    served: tuple[FakeUpstream, str, Path], path: str, field: str, extra: dict[str, Any], value: int
) -> None:
    # defect: orjson refused to write the upstream payload, and the client got a 500
    fake, url, _ = served
    body: dict[str, Any] = {"model": "m", **extra, field: value}
    body["input" if path == "/v1/responses" else "messages"] = USER
    response = httpx.post(url + path, json=body, timeout=30)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert field in error["message"] and "at most" in error["message"]
    assert error["type"] == "invalid_request_error"
    assert fake.chat_requests == []


# --- a max_tokens the upstream's context cannot hold --------------------------------------
#: the fake's context: a client's max_tokens of MANY does not fit beside any prompt
CONTEXT, MANY = 3000, 100_000


def _limits(fake: FakeUpstream) -> list[Any]:
    return [r.body.get("max_tokens") for r in fake.chat_requests]


def _openai_lines(url: str, stream: bool, **kwargs: Any) -> tuple[httpx.Headers, list[str]]:
    """The response headers and, streamed, the raw SSE lines (the closing comment too)."""
    with _openai(url) as client:
        if not stream:
            raw = client.chat.completions.with_raw_response.create(model="m", messages=USER, **kwargs)
            raw.parse()
            return raw.headers, []
        with client.chat.completions.with_streaming_response.create(model="m", messages=USER, stream=True,
                                                                    **kwargs) as response:
            return response.headers, list(response.iter_lines())


def _closing(lines: list[str]) -> str:
    [line] = [ln for ln in lines if ln.startswith(": agentfsm ")]
    return line


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_max_tokens_the_backend_lowers_is_named_in_the_defaults_header(stream: bool) -> None:
    # defect: the backend sent the request again with what the context leaves, and the
    # header did not say so: the client could not tell why its reply stopped short
    with FakeUpstream(["hello there"], context_tokens=CONTEXT) as fake, proxy(upstream_backend(fake)) as url:
        headers, lines = _openai_lines(url, stream, max_tokens=MANY)
        asked, sent = _limits(fake)
    assert asked == MANY and sent < CONTEXT
    assert headers["x-agentfsm-defaults"].split(",") == ["temperature=0", "seed=0", f"max_tokens={sent}"]
    if stream:
        assert _closing(lines).endswith(f" max_tokens={sent}")


def test_anthropic_is_told_the_lowered_max_tokens_too() -> None:
    with FakeUpstream(["hello there"], context_tokens=CONTEXT) as fake, proxy(upstream_backend(fake)) as url:
        with _anthropic(url) as client:
            raw = client.messages.with_raw_response.create(model="m", messages=USER, max_tokens=MANY)  # type: ignore[arg-type]
            raw.parse()
        asked, sent = _limits(fake)
    assert (asked, raw.headers["x-agentfsm-defaults"]) == (MANY, f"temperature=0,max_tokens={sent}")


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_each_call_of_a_turn_is_lowered_and_the_lowest_is_named(stream: bool) -> None:
    # the correction's prompt is longer: what the context leaves it is less
    with FakeUpstream(["no action here", action("get_weather", city="Paris")], context_tokens=CONTEXT) as fake, \
            proxy(upstream_backend(fake)) as url:
        headers, lines = _openai_lines(url, stream, max_tokens=MANY, tools=TOOLS_OPENAI, tool_choice="required")
        limits = _limits(fake)
    assert limits[0::2] == [MANY, MANY] and limits[1] > limits[3]
    assert headers["x-agentfsm-defaults"].endswith(f",max_tokens={limits[3]}")
    if stream:
        assert _closing(lines).endswith(f" max_tokens={limits[3]}")


@pytest.mark.parametrize("stream_prose", ["live", "exact"])
def test_a_stream_whose_headers_left_before_a_later_call_names_it_at_the_close(stream_prose: str) -> None:
    # live: the first reply's prose is streamed (its headers leave with it) before its call
    # is refused; the correction is lowered further, and only the closing comment can say
    # so. exact (the default): nothing leaves before the turn is decided, so the headers
    # name the lowest limit too
    first = 'Let me look.\n```json action\n{"tool": "get_weather", "args": {}}\n```'
    with FakeUpstream([first, "It is sunny."], context_tokens=CONTEXT) as fake, \
            proxy(upstream_backend(fake), stream_prose=stream_prose) as url:
        headers, lines = _openai_lines(url, True, max_tokens=MANY, tools=TOOLS_OPENAI)
        limits = _limits(fake)
    assert limits[0::2] == [MANY, MANY] and limits[1] > limits[3]
    in_headers = limits[1] if stream_prose == "live" else limits[3]
    assert headers["x-agentfsm-defaults"].endswith(f",max_tokens={in_headers}")
    assert _closing(lines).endswith(f" max_tokens={limits[3]}")


# --- seed where the client's API has none ---------------------------------------------------
def test_a_seed_goes_upstream_only_where_the_clients_api_has_one(served: tuple[FakeUpstream, str, Path]) -> None:
    # defect: Anthropic's and the Responses API have no seed; a client's was named in
    # x-agentfsm-ignored, yet the proxy sent its own seed=0, which the client could neither
    # choose nor avoid (a temperature it asked for then drew the same sample every time)
    fake, url, _ = served
    fake.enqueue("hello", "hello", "hello", "hello")
    with _anthropic(url) as client:
        raw = client.messages.with_raw_response.create(
            model="m", messages=USER, max_tokens=50, extra_body={"seed": 42, "temperature": 0.7}  # type: ignore[arg-type]
        )
        raw.parse()
    anthropic_headers = raw.headers
    with _openai(url) as client:
        responses = client.responses.with_raw_response.create(model="m", input="hi", extra_body={"seed": 42})
        responses.parse()
        chat = client.chat.completions.with_raw_response.create(model="m", messages=USER)  # type: ignore[arg-type]
        chat.parse()
        chosen = client.chat.completions.with_raw_response.create(model="m", messages=USER, seed=42)  # type: ignore[arg-type]
        chosen.parse()
    seeds = [r.body.get("seed", "none sent") for r in fake.chat_requests]
    assert seeds == ["none sent", "none sent", 0, 42]
    assert anthropic_headers["x-agentfsm-ignored"] == "seed" and "x-agentfsm-defaults" not in anthropic_headers
    assert (responses.headers["x-agentfsm-ignored"], responses.headers["x-agentfsm-defaults"]) == ("seed", "temperature=0")
    assert chat.headers["x-agentfsm-defaults"] == "temperature=0,seed=0" and "x-agentfsm-ignored" not in chat.headers
    assert chosen.headers["x-agentfsm-defaults"] == "temperature=0"
