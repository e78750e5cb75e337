"""The proxy fits requests to the backend's context, counts tokens, and reports exact usage.

Real proxy on 127.0.0.1, the official SDKs as clients. The scripted backend reports
the estimate the proxy counts with (it has no tokenizer), so the numbers line up
exactly; the embedded model's own counter and Claude Code's full request are covered in
test_server_fit_model.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from agentfsm.backends import ScriptedBackend
from agentfsm.backends._payload import context_error
from agentfsm.core.backend import Capabilities
from agentfsm.core.messages import PromptMessage
from agentfsm.prompt.compaction import MIN_COMPLETION_TOKENS
from agentfsm.server.fit import EXACT_MARGIN, TEMPLATE_TOKENS_PER_MESSAGE
from agentfsm.testing import FakeUpstream, status
from tests._proxy import TOOLS_ANTHROPIC, TOOLS_OPENAI, action, proxy, upstream_backend

CLIENTS = Path(__file__).resolve().parent.parent / "fixtures" / "clients"
USER = [{"role": "user", "content": "What is the weather in Paris?"}]


def _claude_code_tools() -> list[dict[str, Any]]:
    body = json.loads((CLIENTS / "claude_code_request_full_tools.json").read_text(encoding="utf-8"))["body"]
    return list(body["tools"])


_OPEN: list[openai.OpenAI | anthropic.Anthropic] = []


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    while _OPEN:
        _OPEN.pop().close()


def _openai(url: str) -> openai.OpenAI:
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=30)
    _OPEN.append(client)
    return client


def _anthropic(url: str) -> anthropic.Anthropic:
    client = anthropic.Anthropic(base_url=url, api_key="unused", max_retries=0, timeout=30)
    _OPEN.append(client)
    return client


def _backend(context: int | None, reply: str = "It is sunny.") -> ScriptedBackend:
    return ScriptedBackend(lambda _messages: reply, Capabilities(context_tokens=context))


def _margin(prompt: Sequence[PromptMessage]) -> int:
    """What a clamped max_tokens leaves unused for an estimated prompt (server/fit.py):
    the chat template's tokens per message (the client's one, the contract, the reply's
    opener) and a tenth of the estimate."""
    tokens = sum((len(m.content) + 3) // 4 for m in prompt)
    return EXACT_MARGIN + TEMPLATE_TOKENS_PER_MESSAGE * (len(USER) + 2) + tokens // 10


def _count(url: str, tools: list[dict[str, Any]]) -> int:
    return _anthropic(url).messages.count_tokens(model="m", messages=USER, tools=tools).input_tokens  # type: ignore[arg-type]


# -- compaction and clamping --------------------------------------------------------


def test_a_tool_set_too_large_for_the_context_is_compacted_not_dropped() -> None:
    tools = _claude_code_tools()
    with proxy(_backend(None)) as url:
        as_sent = _count(url, tools)
    context = as_sent + MIN_COMPLETION_TOKENS - 1  # one token short of fitting as sent
    backend = _backend(context)
    with proxy(backend) as url:
        counted = _count(url, tools)
        message = _anthropic(url).messages.create(model="m", max_tokens=64000, messages=USER, tools=tools)  # type: ignore[arg-type]
    assert counted < as_sent
    assert message.usage.input_tokens == counted
    (call,) = backend.requests
    system = call.messages[0].content
    assert all(f"- {t['name']}" in system for t in tools)  # every tool still offered
    assert call.options.max_tokens == context - counted - _margin(call.messages)  # 64000 clamped to what is left


def test_max_tokens_is_clamped_on_openai_too() -> None:
    backend = _backend(2000)
    with proxy(backend) as url:
        result = _openai(url).chat.completions.create(model="m", messages=USER, tools=TOOLS_OPENAI, max_tokens=64000)  # type: ignore[arg-type]
    assert result.usage is not None
    sent = backend.requests[0]
    assert sent.options.max_tokens == 2000 - result.usage.prompt_tokens - _margin(sent.messages)


@pytest.mark.parametrize("stream", [False, True])
def test_a_prompt_that_cannot_fit_is_anthropics_400_before_any_model_call(stream: bool) -> None:
    backend = _backend(600)
    with proxy(backend) as url, pytest.raises(anthropic.BadRequestError) as caught:
        kwargs: dict[str, Any] = {"model": "m", "max_tokens": 64000, "messages": USER, "tools": _claude_code_tools()}
        if stream:
            with _anthropic(url).messages.stream(**kwargs) as events:
                events.get_final_message()
        else:
            _anthropic(url).messages.create(**kwargs)
    error = caught.value.body["error"]  # type: ignore[index]
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith("prompt is too long: ")
    assert error["message"].endswith(f" tokens > {600 - MIN_COMPLETION_TOKENS} maximum")
    assert backend.requests == []


@pytest.mark.parametrize("stream", [False, True])
def test_a_prompt_that_cannot_fit_is_openais_context_length_exceeded(stream: bool) -> None:
    backend = _backend(300)
    long = [{"role": "user", "content": "word " * 4000}]
    with proxy(backend) as url, pytest.raises(openai.BadRequestError) as caught:
        result = _openai(url).chat.completions.create(model="m", messages=long, stream=stream)  # type: ignore[arg-type,call-overload]
        for _ in result if stream else ():
            pass
    assert caught.value.code == "context_length_exceeded"
    assert caught.value.type == "invalid_request_error" and caught.value.param == "messages"
    assert "prompt is too long" in caught.value.message
    assert backend.requests == []


# -- an upstream's own context error ------------------------------------------------

_OPENAI_STYLE = json.dumps(
    {
        "error": {
            "message": "This model's maximum context length is 4096 tokens. However, your messages resulted in 10589 tokens.",
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        }
    }
)
_LLAMA_CPP_STYLE = json.dumps(
    {
        "error": {
            "code": 400,
            "message": "the request exceeds the available context size, try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 10589,
            "n_ctx": 4096,
        }
    }
)


@pytest.mark.parametrize("body", [_OPENAI_STYLE, _LLAMA_CPP_STYLE])
def test_an_upstream_context_error_is_passed_on_as_400_not_502(body: str) -> None:
    with FakeUpstream([status(400, body=body), status(400, body=body)]) as fake, proxy(upstream_backend(fake)) as url:
        with pytest.raises(openai.BadRequestError) as oa:
            _openai(url).chat.completions.create(model="m", messages=USER, tools=TOOLS_OPENAI)  # type: ignore[arg-type]
        with pytest.raises(anthropic.BadRequestError) as an:
            _anthropic(url).messages.create(model="m", max_tokens=64, messages=USER, tools=TOOLS_ANTHROPIC)  # type: ignore[arg-type]
    assert oa.value.code == "context_length_exceeded"
    assert "prompt is too long: 10589 tokens > 4096 maximum" in oa.value.message
    assert an.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]


def test_context_errors_are_recognised_in_each_upstreams_words() -> None:
    llama = "Requested tokens (10589) exceed context window of 4096"
    vllm = "This model's maximum context length is 2048 tokens. However, you requested 3000 tokens (2900 in the messages, 100 in the completion)."
    # the prompt's own count, not prompt + completion: the prompt alone does not fit
    for body, numbers in [(llama, (10589, 4096)), (vllm, (2900, 2048)), (_LLAMA_CPP_STYLE, (10589, 4096))]:
        found = context_error(400, body)
        assert found is not None and (found.tokens, found.maximum) == numbers
    vague = context_error(400, '{"error": {"code": "context_length_exceeded", "message": "too long"}}')
    assert vague is not None and vague.tokens is None and "too long" in str(vague)
    assert context_error(400, "model not found") is None
    assert context_error(500, _OPENAI_STYLE) is None


# -- count_tokens -------------------------------------------------------------------


def test_count_tokens_counts_the_prompt_the_model_sees_contract_included() -> None:
    backend = _backend(None)
    with proxy(backend) as url:
        client = _anthropic(url)
        with_tools = client.messages.count_tokens(model="m", messages=USER, tools=TOOLS_ANTHROPIC, system="Be brief.")  # type: ignore[arg-type]
        without = client.messages.count_tokens(model="m", messages=USER)  # type: ignore[arg-type]
        message = client.messages.create(model="m", max_tokens=64, messages=USER, tools=TOOLS_ANTHROPIC, system="Be brief.")  # type: ignore[arg-type]
    prompt: Sequence[PromptMessage] = backend.requests[0].messages
    assert with_tools.input_tokens == message.usage.input_tokens == sum((len(m.content) + 3) // 4 for m in prompt)
    assert without.input_tokens < with_tools.input_tokens  # the contract is counted


def test_count_tokens_answers_errors_in_anthropics_shape() -> None:
    with proxy(_backend(None), api_key="k") as url:
        response = httpx.post(f"{url}/v1/messages/count_tokens", json={"model": "m"}, headers={"x-api-key": "k"})
        unauthorized = httpx.post(f"{url}/v1/messages/count_tokens", json={"model": "m", "messages": USER})
    assert response.status_code == 400 and response.json()["error"]["type"] == "invalid_request_error"
    assert unauthorized.status_code == 401 and unauthorized.json()["type"] == "error"


# -- usage: streamed and not agree ---------------------------------------------------


def _script(replies: list[str]) -> ScriptedBackend:
    """The same replies for every request: attempt n of a request gets replies[n]."""

    def answer(messages: Sequence[PromptMessage]) -> str:
        corrections = sum(1 for m in messages if m.role == "assistant")  # each rejected reply
        return replies[min(corrections, len(replies) - 1)]

    return ScriptedBackend(answer)


REPLIES = {
    "call": [action("get_weather", city="Paris")],
    "answer": ["It is sunny in Paris."],
    "corrected": [action("get_weather", town="Paris"), action("get_weather", city="Paris")],
}


@pytest.mark.parametrize("case", sorted(REPLIES))
def test_anthropic_usage_is_the_same_streamed_and_not(case: str) -> None:
    with proxy(_script(REPLIES[case])) as url:
        client = _anthropic(url)
        kwargs: dict[str, Any] = {"model": "m", "max_tokens": 256, "messages": USER, "tools": TOOLS_ANTHROPIC}
        whole = client.messages.create(**kwargs)
        with client.messages.stream(**kwargs) as events:
            raw = list(events)
            streamed = events.get_final_message()
        counted = client.messages.count_tokens(model="m", messages=USER, tools=TOOLS_ANTHROPIC)  # type: ignore[arg-type]
    assert (streamed.usage.input_tokens, streamed.usage.output_tokens) == (
        whole.usage.input_tokens,
        whole.usage.output_tokens,
    )
    start = next(e for e in raw if e.type == "message_start")
    delta = next(e for e in raw if e.type == "message_delta")
    assert start.message.usage.input_tokens == counted.input_tokens  # the first call's prompt
    assert delta.usage.input_tokens == whole.usage.input_tokens  # every call's
    if case != "corrected":
        assert whole.usage.input_tokens == counted.input_tokens
    else:
        assert whole.usage.input_tokens > 2 * counted.input_tokens  # two calls, the second longer


@pytest.mark.parametrize("case", sorted(REPLIES))
def test_openai_usage_is_the_same_streamed_and_not(case: str) -> None:
    with proxy(_script(REPLIES[case])) as url:
        client = _openai(url)
        whole = client.chat.completions.create(model="m", messages=USER, tools=TOOLS_OPENAI)  # type: ignore[arg-type]
        chunks = list(
            client.chat.completions.create(
                model="m", messages=USER, tools=TOOLS_OPENAI, stream=True, stream_options={"include_usage": True}  # type: ignore[arg-type]
            )
        )
    assert whole.usage is not None and chunks[-1].usage is not None
    assert chunks[-1].usage.model_dump() == whole.usage.model_dump()
    assert chunks[0].choices[0].delta.content is None  # no empty text part first
