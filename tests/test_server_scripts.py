"""Names and values in any script cross the proxy intact, streamed and not.

A tool named in CJK, a parameter named in Cyrillic, and an argument mixing Cyrillic, CJK
and an emoji (outside the Basic Multilingual Plane: a surrogate pair in JSON escapes)
reach the official SDKs as the upstream model wrote them. Upstream: a FakeUpstream on
127.0.0.1.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
import pytest

from agentfsm.testing import FakeUpstream
from tests._proxy import base, fake  # noqa: F401 (fixtures)

VALUE = "Москва 東京 😀"
_SCHEMA = {"type": "object", "properties": {"город": {"type": "string"}}, "required": ["город"]}
ASK: list[Any] = [{"role": "user", "content": "Какая погода в Москве? 東京も"}]


def _action(ascii_only: bool) -> str:
    return "```json action\n" + json.dumps({"tool": "天気", "parameters": {"город": VALUE}}, ensure_ascii=ascii_only) + "\n```"


@pytest.mark.parametrize("ascii_only", [False, True], ids=["utf8", "escaped"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_openai_client_gets_the_call_in_any_script(fake: FakeUpstream, base: str, stream: bool, ascii_only: bool) -> None:  # noqa: F811
    fake.enqueue(_action(ascii_only))
    tools: Any = [{"type": "function", "function": {"name": "天気", "description": "Погода.", "parameters": _SCHEMA}}]
    client = openai.OpenAI(base_url=base + "/v1", api_key="sk-test", max_retries=0)
    if stream:
        name, arguments = "", ""
        for chunk in client.chat.completions.create(model="m", messages=ASK, tools=tools, stream=True):
            for delta in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
                name += delta.function.name or "" if delta.function else ""
                arguments += delta.function.arguments or "" if delta.function else ""
    else:
        message = client.chat.completions.create(model="m", messages=ASK, tools=tools).choices[0].message
        assert message.tool_calls is not None
        made: Any = message.tool_calls[0]
        name, arguments = made.function.name, made.function.arguments
    assert (name, json.loads(arguments)) == ("天気", {"город": VALUE})


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_anthropic_client_gets_the_call_in_any_script(fake: FakeUpstream, base: str, stream: bool) -> None:  # noqa: F811
    fake.enqueue(_action(False))
    tools: Any = [{"name": "天気", "description": "Погода.", "input_schema": _SCHEMA}]
    client = anthropic.Anthropic(base_url=base, api_key="sk-test", max_retries=0)
    message: Any
    if stream:
        with client.messages.stream(model="m", max_tokens=100, messages=ASK, tools=tools) as events:
            message = events.get_final_message()
    else:
        message = client.messages.create(model="m", max_tokens=100, messages=ASK, tools=tools)
    uses = [(b.name, b.input) for b in message.content if b.type == "tool_use"]
    assert uses == [("天気", {"город": VALUE})]
