"""Never an empty 200: a turn ends with the model's own words, or a give-up the client can tell.

Each case runs the three protocols (chat completions, Anthropic messages, Responses),
whole and streamed, through the official SDKs against a real proxy in front of a
scripted upstream on 127.0.0.1:

- ``tool_choice: none`` and a model that writes an action anyway: the action is sent
  back for prose (it was dropped, and the client got an empty message after one call);
  only actions until the budget is spent: the give-up;
- a spent budget under ``auto`` with no prose (the model kept calling a tool that is not
  offered): the give-up, the same as under a required call (HTTP 500, OpenAI
  ``server_error`` / Anthropic ``api_error``; it was a 200 with an empty message, and
  Codex exited 0 having done nothing); with prose: that prose, marked
  ``x-agentfsm-exhausted`` (the closing SSE comment in a stream);
- an empty reply: corrected, never passed on.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anthropic
import openai
import pytest

from agentfsm.testing import FakeUpstream
from tests._proxy import TOOLS_ANTHROPIC, TOOLS_OPENAI, action, fake, proxy, upstream_backend  # fake: a fixture

ASK = "What is the weather in Paris?"
TOOLS_RESPONSES: list[Any] = [{"type": "function", **t["function"]} for t in TOOLS_OPENAI]
PROTOCOLS = ["chat", "messages", "responses"]
STREAM = [False, True]


@dataclass
class Answer:
    """What a client got: the text, the calls' names, the headers, the raw SSE (streams)."""

    text: str
    calls: list[str]
    headers: dict[str, str]
    sse: str = ""


@pytest.fixture
def base(fake: FakeUpstream) -> Iterator[str]:
    with proxy(upstream_backend(fake)) as url:
        yield url


def _chat(base: str, stream: bool, choice: Any) -> Answer:
    with openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0, timeout=30) as c:
        raw = c.chat.completions.with_raw_response.create(
            model="m", messages=[{"role": "user", "content": ASK}], tools=TOOLS_OPENAI, tool_choice=choice,
            stream=stream,
        )
        headers = dict(raw.headers)
        if not stream:
            done = raw.parse()
            message = done.choices[0].message
            return Answer(message.content or "", [t.function.name for t in message.tool_calls or []], headers)
        text = raw.http_response.read().decode()
    chunks = _payloads(text)
    content = "".join(ch["choices"][0]["delta"].get("content") or "" for ch in chunks if ch.get("choices"))
    calls = [d["function"]["name"] for ch in chunks if ch.get("choices")
             for d in ch["choices"][0]["delta"].get("tool_calls") or [] if d.get("function", {}).get("name")]
    return Answer(content, calls, headers, text)


def _messages(base: str, stream: bool, choice: Any) -> Answer:
    kind = {"none": {"type": "none"}, "auto": {"type": "auto"}}[choice]
    with anthropic.Anthropic(base_url=base, api_key="x", max_retries=0, timeout=30) as c:
        args: dict[str, Any] = {"model": "m", "max_tokens": 256, "messages": [{"role": "user", "content": ASK}],
                                "tools": TOOLS_ANTHROPIC, "tool_choice": kind}
        raw = c.messages.with_raw_response.create(**args, stream=stream)
        headers = dict(raw.headers)
        if not stream:
            message = raw.parse()
            text = "".join(b.text for b in message.content if b.type == "text")
            return Answer(text, [b.name for b in message.content if b.type == "tool_use"], headers)
        sse = raw.http_response.read().decode()
    events = _payloads(sse)
    text = "".join(e["delta"].get("text", "") for e in events if e.get("type") == "content_block_delta")
    calls = [e["content_block"]["name"] for e in events
             if e.get("type") == "content_block_start" and e["content_block"]["type"] == "tool_use"]
    return Answer(text, calls, headers, sse)


def _responses(base: str, stream: bool, choice: Any) -> Answer:
    with openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0, timeout=30) as c:
        raw = c.responses.with_raw_response.create(
            model="m", input=ASK, tools=TOOLS_RESPONSES, tool_choice=choice, stream=stream,
        )
        headers = dict(raw.headers)
        if not stream:
            done = raw.parse()
            assert done.status == "completed"
            return Answer(done.output_text, [i.name for i in done.output if i.type == "function_call"], headers)
        sse = raw.http_response.read().decode()
    events = _payloads(sse)
    final = events[-1]
    assert final["type"] == "response.completed", final
    text = "".join(e["delta"] for e in events if e.get("type") == "response.output_text.delta")
    calls = [i["name"] for i in final["response"]["output"] if i["type"] == "function_call"]
    return Answer(text, calls, headers, sse)


def _payloads(sse: str) -> list[dict[str, Any]]:
    import json

    return [json.loads(line[6:]) for line in sse.splitlines() if line.startswith("data: {")]


SPEAK = {"chat": _chat, "messages": _messages, "responses": _responses}


def _gives_up(protocol: str, base: str, stream: bool, choice: str) -> str:
    """The give-up each protocol's SDK raises: HTTP 500 in the provider's error shape."""
    with pytest.raises((openai.InternalServerError, anthropic.InternalServerError)) as info:
        SPEAK[protocol](base, stream, choice)
    assert info.value.status_code == 500
    # the proxy re-asked already: the SDKs are told not to retry (they honour x-should-retry)
    assert info.value.response.headers.get("x-should-retry") == "false"
    body = info.value.response.json()
    if protocol == "messages":
        assert body["type"] == "error" and body["error"]["type"] == "api_error"
    else:
        assert body["error"]["type"] == "server_error"
    message = body["error"]["message"]
    assert message.startswith("no acceptable reply after 4 attempts")
    return str(message)


# -- tool_choice none ------------------------------------------------------------------


@pytest.mark.parametrize("stream", STREAM, ids=["whole", "stream"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_none_with_an_action_is_corrected_toward_prose(protocol: str, stream: bool, fake: FakeUpstream, base: str) -> None:
    fake.enqueue(action("get_weather", city="Paris"), "I cannot look it up now; Paris is often mild.")
    got = SPEAK[protocol](base, stream, "none")
    assert (got.text.strip(), got.calls) == ("I cannot look it up now; Paris is often mild.", [])
    first, retry = fake.chat_requests
    contract = first.messages[0]["content"]
    assert "get_weather" not in contract and "json action" not in contract  # no tool, no format taught
    assert "Do not call any tool now" in retry.messages[-1]["content"]


@pytest.mark.parametrize("stream", STREAM, ids=["whole", "stream"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_none_with_only_actions_gives_up(protocol: str, stream: bool, fake: FakeUpstream, base: str) -> None:
    fake.enqueue(*[action("get_weather", city="Paris")] * 4)
    assert "calls_not_allowed" in _gives_up(protocol, base, stream, "none")
    assert len(fake.chat_requests) == 4


# -- a spent budget under auto -----------------------------------------------------------

#: four replies calling a tool that is not offered: the budget of three corrections is spent
NO_PROSE = [action("search_web", query="Paris weather")] * 4


@pytest.mark.parametrize("stream", STREAM, ids=["whole", "stream"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_spent_budget_without_prose_gives_up(protocol: str, stream: bool, fake: FakeUpstream, base: str) -> None:
    fake.enqueue(*NO_PROSE)
    assert "unknown_tool" in _gives_up(protocol, base, stream, "auto")
    assert len(fake.chat_requests) == 4


@pytest.mark.parametrize("stream", STREAM, ids=["whole", "stream"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_spent_budget_with_prose_answers_it_marked_exhausted(
    protocol: str, stream: bool, fake: FakeUpstream, base: str
) -> None:
    prose = "I could not find a tool for that."
    fake.enqueue(*NO_PROSE[:3], prose + "\n" + action("search_web", query="Paris"))
    got = SPEAK[protocol](base, stream, "auto")
    assert (got.text.strip(), got.calls) == (prose, [])
    if stream:  # headers left before the end was known: the closing comment says it
        [closing] = [line for line in got.sse.splitlines() if line.startswith(": agentfsm ")]
        assert closing.endswith(" exhausted=true")
    else:
        assert got.headers["x-agentfsm-exhausted"] == "true"


# -- an empty reply ------------------------------------------------------------------------


@pytest.mark.parametrize("stream", STREAM, ids=["whole", "stream"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_an_empty_reply_is_corrected_never_passed_on(protocol: str, stream: bool, fake: FakeUpstream, base: str) -> None:
    fake.enqueue("", "   ", "It is sunny in Paris.")
    got = SPEAK[protocol](base, stream, "auto")
    assert got.text.strip() == "It is sunny in Paris."
    assert "Your last reply was empty" in fake.chat_requests[1].messages[-1]["content"]
    assert "x-agentfsm-exhausted" not in got.headers


@pytest.mark.parametrize("protocol", ["chat", "messages"])
def test_an_sdk_with_its_default_retries_does_not_retry_a_give_up(protocol: str, fake: FakeUpstream,
                                                                   base: str) -> None:
    """A give-up after the budget took 4 upstream calls; with the SDKs' default two
    retries it took 12 (an audit found Claude Code retrying such 500s up to 10 times)."""
    fake.enqueue(*[action("get_weather", city="Paris")] * 12)
    with pytest.raises((openai.InternalServerError, anthropic.InternalServerError)):
        if protocol == "chat":
            with openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=2, timeout=30) as c:
                c.chat.completions.create(model="m", messages=[{"role": "user", "content": ASK}],
                                          tools=TOOLS_OPENAI, tool_choice="none")
        else:
            with anthropic.Anthropic(base_url=base, api_key="x", max_retries=2, timeout=30) as a:
                a.messages.create(model="m", max_tokens=256, messages=[{"role": "user", "content": ASK}],
                                  tools=TOOLS_ANTHROPIC, tool_choice={"type": "none"})
    assert len(fake.chat_requests) == 4


# -- replies cut at the client's own max_tokens ---------------------------------------------


@pytest.mark.parametrize("stream", STREAM, ids=["whole", "stream"])
@pytest.mark.parametrize("protocol", ["chat", "messages"])
def test_calls_cut_at_the_clients_max_tokens_end_as_the_provider_ends_a_cut_reply(
    protocol: str, stream: bool, fake: FakeUpstream, base: str
) -> None:
    """Every reply an action cut at the client's max_tokens (the upstream keeps to it, as a
    real one does): after the budget, the provider's answer to a cut reply (200, finish
    length / stop_reason max_tokens, no call), not a give-up the SDK would retry and the
    upstream cut again (found by an audit: a 500 after 4 calls, 12 with the SDK's retries)."""
    fake.honour_max_tokens = True
    long_call = action("get_weather", city="Paris, the capital of France, on the river Seine " * 4)
    fake.enqueue(*[long_call] * 4)
    if protocol == "chat":
        with openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=2, timeout=30) as c:
            kwargs: dict[str, Any] = dict(model="m", messages=[{"role": "user", "content": ASK}], tools=TOOLS_OPENAI,
                                          max_tokens=20)
            if stream:
                # (the SDK's .stream() helper raises LengthFinishReasonError here, as it does
                # against OpenAI itself: the chunks are read as they come)
                chunks = [ch for ch in c.chat.completions.create(**kwargs, stream=True) if ch.choices]
                finish = [ch.choices[0].finish_reason for ch in chunks if ch.choices[0].finish_reason]
                said = [ch.choices[0].delta for ch in chunks]
                assert finish == ["length"]
                assert not any(d.tool_calls or d.content for d in said)
            else:
                choice = c.chat.completions.create(**kwargs).choices[0]
                assert choice.finish_reason == "length"
                assert not choice.message.tool_calls and not choice.message.content
    else:
        with anthropic.Anthropic(base_url=base, api_key="x", max_retries=2, timeout=30) as a:
            args: dict[str, Any] = dict(model="m", max_tokens=20, messages=[{"role": "user", "content": ASK}],
                                        tools=TOOLS_ANTHROPIC)
            if stream:
                with a.messages.stream(**args) as events:
                    message = events.get_final_message()
            else:
                message = a.messages.create(**args)
        assert message.stop_reason == "max_tokens" and message.content == []
    assert len(fake.chat_requests) == 4  # the budget, and no retry by the SDK
    assert all(r.body.get("max_tokens") == 20 for r in fake.chat_requests)
