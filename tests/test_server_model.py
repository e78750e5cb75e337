"""The proxy in front of the embedded model (SmolLM2-135M, in-process), driven by both SDKs.

A 135M model decides badly, so these tests assert protocol-valid outcomes (shapes,
stop reasons, offered tool names, JSON arguments, a clean end or a typed error), not
particular content. Temperature 0 (the proxy's default) and small token limits keep them deterministic and short.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from agentfsm.backends import create_backend
from tests._proxy import TOOLS_ANTHROPIC, TOOLS_OPENAI, proxy

pytestmark = pytest.mark.model

USER = [{"role": "user", "content": "What is the weather in Paris? Use the tool."}]
NAMES = {"get_weather", "get_time"}


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with proxy(create_backend("local"), max_corrections=1, request_timeout=120) as url:
        yield url


@pytest.fixture(scope="module")
def oai(base: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0, timeout=180) as c:
        yield c


@pytest.fixture(scope="module")
def ant(base: str) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=base, api_key="x", max_retries=0, timeout=180) as c:
        yield c


def _check_openai_message(message: Any, finish_reason: str) -> None:
    if message.tool_calls:
        assert finish_reason == "tool_calls"
        for call in message.tool_calls:
            assert call.function.name in NAMES and call.id.startswith("call_")
            assert isinstance(json.loads(call.function.arguments), dict)
    else:
        assert finish_reason in ("stop", "length") and isinstance(message.content, str)


def test_openai_required_call(oai: openai.OpenAI) -> None:
    try:
        completion = oai.chat.completions.create(
            model="smollm2", messages=USER, tools=TOOLS_OPENAI, tool_choice="required",
            temperature=0, max_tokens=64,
        )
    except openai.InternalServerError as exc:  # budget spent: the provider's server-error shape
        assert exc.response.json()["error"]["type"] == "server_error"
        return
    choice = completion.choices[0]
    assert choice.message.tool_calls  # a required call is a call, or the 500 above
    _check_openai_message(choice.message, choice.finish_reason)


def test_openai_auto_stream(oai: openai.OpenAI) -> None:
    stream = oai.chat.completions.create(
        model="smollm2", messages=USER, tools=TOOLS_OPENAI, temperature=0, max_tokens=48, stream=True
    )
    chunks = [chunk for chunk in stream]
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices[0].finish_reason in ("stop", "length", "tool_calls")
    for chunk in chunks:
        for call in chunk.choices[0].delta.tool_calls or []:
            assert call.function.name is None or call.function.name in NAMES


def test_openai_plain_chat(oai: openai.OpenAI) -> None:
    completion = oai.chat.completions.create(
        model="smollm2", messages=[{"role": "user", "content": "Say hello."}], temperature=0, max_tokens=16
    )
    _check_openai_message(completion.choices[0].message, completion.choices[0].finish_reason)


def test_anthropic_messages(ant: anthropic.Anthropic) -> None:
    try:
        message = ant.messages.create(
            model="smollm2", max_tokens=64, messages=USER, tools=TOOLS_ANTHROPIC,
            tool_choice={"type": "any"},
        )
    except anthropic.UnprocessableEntityError as exc:
        assert exc.body["type"] == "error"  # type: ignore[index]
        return
    uses = [b for b in message.content if b.type == "tool_use"]
    assert uses and message.stop_reason == "tool_use"
    assert all(u.name in NAMES and isinstance(u.input, dict) for u in uses)


def test_anthropic_stream(ant: anthropic.Anthropic) -> None:
    with ant.messages.stream(
        model="smollm2", max_tokens=48, messages=USER, tools=TOOLS_ANTHROPIC
    ) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert final.stop_reason in ("end_turn", "max_tokens", "tool_use")
    assert all(b.name in NAMES for b in final.content if b.type == "tool_use")
