"""A client's output schema beside tools reaches the model and binds the final answer.

openai-agents' ``output_type``, chat ``response_format``, Anthropic
``output_config.format`` and Responses ``text.format`` with tools were only named in
``x-agentfsm-ignored``: a model answering in prose made the client raise. Now the schema
is quoted in the contract, an answer that is not its JSON is corrected, and under
constrained decoding the grammar's final-answer branch is the schema itself.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from agentfsm.backends import OpenAICompatBackend, Timeouts
from agentfsm.testing import FakeUpstream
from tests._proxy import TOOLS_ANTHROPIC, TOOLS_OPENAI, fake, proxy, upstream_backend  # fake: a fixture

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "temperature_c": {"type": "integer"}},
    "required": ["city", "temperature_c"],
    "additionalProperties": False,
}
ANSWER = '{"city": "Paris", "temperature_c": 18}'
USER = [{"role": "user", "content": "What is the weather in Paris?"}]
TOOLS_RESPONSES: list[Any] = [{"type": "function", **t["function"]} for t in TOOLS_OPENAI]


@pytest.fixture
def base(fake: FakeUpstream) -> Iterator[str]:
    with proxy(upstream_backend(fake)) as url:
        yield url


def _chat(base: str, stream: bool) -> tuple[str, dict[str, str]]:
    fmt = {"type": "json_schema", "json_schema": {"name": "weather", "schema": SCHEMA, "strict": True}}
    with openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0, timeout=30) as c:
        raw = c.chat.completions.with_raw_response.create(
            model="m", messages=USER, tools=TOOLS_OPENAI, response_format=fmt, stream=stream,  # type: ignore[arg-type]
        )
        if not stream:
            return raw.parse().choices[0].message.content or "", dict(raw.headers)
        text = "".join(ch.choices[0].delta.content or "" for ch in raw.parse() if ch.choices)
        return text, dict(raw.headers)


def _messages(base: str, stream: bool) -> tuple[str, dict[str, str]]:
    with anthropic.Anthropic(base_url=base, api_key="x", max_retries=0, timeout=30) as c:
        args: dict[str, Any] = {"model": "m", "max_tokens": 256, "messages": USER, "tools": TOOLS_ANTHROPIC,
                                "extra_body": {"output_config": {"format": {"type": "json_schema", "schema": SCHEMA}}}}
        raw = c.messages.with_raw_response.create(**args, stream=stream)
        if not stream:
            message = raw.parse()
            return "".join(b.text for b in message.content if b.type == "text"), dict(raw.headers)
        text = "".join(e.delta.text for e in raw.parse() if e.type == "content_block_delta" and e.delta.type == "text_delta")
        return text, dict(raw.headers)


def _responses(base: str, stream: bool) -> tuple[str, dict[str, str]]:
    fmt = {"format": {"type": "json_schema", "name": "weather", "schema": SCHEMA, "strict": True}}
    with openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0, timeout=30) as c:
        raw = c.responses.with_raw_response.create(
            model="m", input=USER, tools=TOOLS_RESPONSES, text=fmt, stream=stream,  # type: ignore[arg-type]
        )
        if not stream:
            return raw.parse().output_text, dict(raw.headers)
        text = "".join(e.delta for e in raw.parse() if e.type == "response.output_text.delta")
        return text, dict(raw.headers)


SPEAK = {"chat": _chat, "messages": _messages, "responses": _responses}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("protocol", sorted(SPEAK))
def test_a_prose_answer_is_corrected_to_the_clients_schema(
    protocol: str, stream: bool, fake: FakeUpstream, base: str
) -> None:
    fake.enqueue("It is 18 C and sunny in Paris.", ANSWER)
    text, headers = SPEAK[protocol](base, stream)
    assert json.loads(text) == {"city": "Paris", "temperature_c": 18}  # the prose never reached the client
    assert "format" not in headers.get("x-agentfsm-ignored", "")
    first, retry = fake.chat_requests
    assert '"required":["city","temperature_c"]' in first.messages[0]["content"]  # the contract quotes it
    assert "response_format" not in first.body  # the model's replies are actions, not the answer's JSON
    assert "Your answer must be only one JSON value that matches this JSON Schema" in retry.messages[-1]["content"]


def test_under_constrained_decoding_the_final_branch_is_the_clients_schema() -> None:
    with FakeUpstream(['{"final": {"content": ' + ANSWER + "}}"]) as fake:
        backend = OpenAICompatBackend(fake.base_url, "m", api_key="x", json_schema_mode="json_schema",
                                      timeout=Timeouts(connect=2, read=5, total=10), max_retries=0)
        with proxy(backend) as url:
            text, _ = _chat(url, False)
    assert json.loads(text) == {"city": "Paris", "temperature_c": 18}
    grammar = fake.chat_requests[0].body["response_format"]["json_schema"]["schema"]
    [final] = [b for b in grammar["anyOf"] if "final" in b["properties"]]
    content = final["properties"]["final"]["properties"]["content"]
    assert content["required"] == ["city", "temperature_c"] and set(content["properties"]) == {"city", "temperature_c"}
