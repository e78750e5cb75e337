"""Audit findings on the proxy's edge, each through the real proxy and the official SDKs.

- ``x-agentfsm-ignored`` names what the client sent that was not honoured: a name of any
  script, or with a newline or NUL, is percent-encoded (it was a 500 or a dropped
  connection), and hundreds of names are cut to 1,000 characters ending ``+N more`` (it
  was a header of over 1 MB), whole and streamed;
- a tool schema whose ``required`` is not a list of names, and an integer outside the
  64-bit range anywhere in a body, are the client's 400 (they were 500s);
- a setting outside its provider's documented range is a 400 naming it, and an upstream's
  own 4xx is the proxy's 502 with ``x-should-retry: false`` (the SDKs repeated it);
- ``functions: null`` / ``function_call: null`` ask for nothing (they were a 400).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

import anthropic
import httpx
import openai
import pytest

from agentfsm.protocols.sampling import IGNORED_HEADER_CHARS, ignored_header
from agentfsm.testing import FakeUpstream, status
from tests._proxy import TOOLS_ANTHROPIC, TOOLS_OPENAI, action, proxy, upstream_backend
from tests._proxy import base, fake  # fixtures

USER = [{"role": "user", "content": "What is the weather in Paris?"}]
ODD = {"温度": 1, "a\nb": 1, "x\x00y": 1, "p%q,r s": 1}
ODD_HEADER = "%E6%B8%A9%E5%BA%A6,a%0Ab,x%00y,p%25q%2Cr%20s"


def _names(value: str) -> list[str]:
    """The ignored names a header value carries (its ``+N more`` left out), decoded."""
    return [unquote(name) for name in value.split(",") if not name.startswith("+")]


# --- the x-agentfsm-ignored header ------------------------------------------------------


def test_ignored_names_are_escaped_and_the_list_bounded() -> None:
    assert ignored_header(ODD) == ODD_HEADER
    assert _names(ignored_header(ODD)) == list(ODD)
    assert ignored_header(["logit_bias", "logit_bias", "thinking"]) == "logit_bias,thinking"
    many = ignored_header(f"field_{i:04d}" for i in range(500))
    assert len(many) <= IGNORED_HEADER_CHARS and many.endswith(" more") and many.isascii()
    kept = _names(many)
    assert kept == [f"field_{i:04d}" for i in range(len(kept))]
    assert many.rsplit(",", 1)[1] == f"+{500 - len(kept)} more"
    long = ignored_header(["温" * 400])  # cut at 100 characters, never inside an escape
    assert len(long) <= 100 and long.endswith("...") and unquote(long[:-3]) == "温" * 10


@pytest.mark.parametrize("stream", [False, True])
def test_odd_names_reach_the_openai_sdk(fake: FakeUpstream, base: str, stream: bool) -> None:
    fake.enqueue("Sunny.")
    with openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0) as client:
        raw = client.chat.completions.with_raw_response.create(
            model="m", messages=USER, stream=stream, extra_body=ODD
        )
        assert raw.headers["x-agentfsm-ignored"] == ODD_HEADER
        parsed = raw.parse()
        if stream:
            text = "".join(c.choices[0].delta.content or "" for c in parsed if c.choices)
            assert text == "Sunny."
        else:
            assert parsed.choices[0].message.content == "Sunny."


@pytest.mark.parametrize("stream", [False, True])
def test_odd_names_reach_the_anthropic_sdk(fake: FakeUpstream, base: str, stream: bool) -> None:
    fake.enqueue("Sunny.")
    with anthropic.Anthropic(base_url=base, api_key="x", max_retries=0) as client:
        raw = client.messages.with_raw_response.create(
            model="m", max_tokens=100, messages=USER, stream=stream, extra_body=ODD
        )
        assert raw.headers["x-agentfsm-ignored"] == ODD_HEADER
        parsed = raw.parse()
        if stream:
            assert [e.type for e in parsed][-1] == "message_stop"
        else:
            assert parsed.content[0].text == "Sunny."


@pytest.mark.parametrize("stream", [False, True])
def test_an_unknown_responses_item_or_tool_type_of_any_script(fake: FakeUpstream, base: str, stream: bool) -> None:
    fake.enqueue(action("get_weather", city="Paris"))
    tools: list[Any] = [{"type": "function", **TOOLS_OPENAI[0]["function"]}, {"type": "搜索"}]
    with openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0) as client:
        raw = client.responses.with_raw_response.create(
            model="m", input=[*USER, {"type": "搜索\n"}], tools=tools, stream=stream,
        )
        assert _names(raw.headers["x-agentfsm-ignored"]) == ["tools.搜索", "input.搜索\n"]
        parsed = raw.parse()
        if stream:
            parsed = [e for e in parsed if e.type == "response.completed"][0].response
        assert [item.type for item in parsed.output] == ["function_call"]


@pytest.mark.parametrize("stream", [False, True])
def test_hundreds_of_unknown_fields_make_a_bounded_header(fake: FakeUpstream, base: str, stream: bool) -> None:
    fake.enqueue("Sunny.")
    fields = {f"unknown_{i:03d}_" + "x" * 40: 1 for i in range(600)}
    body = {"model": "m", "messages": USER, "stream": stream, **fields, "y" * 5000: 1}
    response = httpx.post(f"{base}/v1/chat/completions", json=body, timeout=30)
    assert response.status_code == 200, response.text
    value = response.headers["x-agentfsm-ignored"]
    assert len(value) <= IGNORED_HEADER_CHARS and value.endswith(" more")
    shown = _names(value)
    assert shown == list(fields)[: len(shown)] and int(value.rsplit("+", 1)[1].split()[0]) == 601 - len(shown)
    assert ("data: [DONE]" in response.text) if stream else response.json()["choices"][0]["message"]["content"]


def test_a_served_model_name_of_any_script_is_escaped_too(fake: FakeUpstream) -> None:
    fake.enqueue("Sunny.", "Sunny.")
    with proxy(upstream_backend(fake), model_name="模型 α") as url:
        whole = httpx.post(f"{url}/v1/chat/completions", json={"model": "m", "messages": USER})
        streamed = httpx.post(
            f"{url}/v1/messages", json={"model": "m", "max_tokens": 9, "messages": USER, "stream": True}
        )
        listed = httpx.get(f"{url}/v1/models/模型 α").json()
    for response in (whole, streamed):
        assert response.status_code == 200 and response.headers["x-agentfsm-model"] == "%E6%A8%A1%E5%9E%8B %CE%B1"
    assert listed["id"] == "模型 α"


# --- malformed tool schemas and integers past 64 bits ------------------------------------


@pytest.mark.parametrize("required", [[{}], [["a"]], "a", [1]])
def test_required_must_be_a_list_of_names(fake: FakeUpstream, base: str, required: Any) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": required}
    with openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0) as client:
        with pytest.raises(openai.BadRequestError) as chat:
            client.chat.completions.create(
                model="m", messages=USER, tools=[{"type": "function", "function": {"name": "f", "parameters": schema}}]
            )
        function: list[Any] = [{"type": "function", "name": "f", "parameters": schema}]
        with pytest.raises(openai.BadRequestError) as responses:
            client.responses.create(model="m", input="hi", tools=function)
    with anthropic.Anthropic(base_url=base, api_key="x", max_retries=0) as ac:
        with pytest.raises(anthropic.BadRequestError) as messages:
            ac.messages.create(model="m", max_tokens=10, messages=USER, tools=[{"name": "f", "input_schema": schema}])
    for error in (chat.value, responses.value):
        assert error.body["param"] == "tools[0]" and "required" in error.body["message"]
    assert messages.value.body["error"]["type"] == "invalid_request_error"
    assert "must be an array of property names" in messages.value.body["error"]["message"]
    assert fake.requests == []


def test_an_integer_past_64_bits_in_a_schema_is_a_400_naming_where(fake: FakeUpstream, base: str) -> None:
    def tool(bound: int) -> list[Any]:
        props = {"offset": {"type": "integer", "minimum": 0, "maximum": bound}}
        return [{"type": "function", "function": {"name": "read", "parameters": {"type": "object", "properties": props}}}]

    fake.enqueue(action("read", offset=5))
    fine = httpx.post(f"{base}/v1/chat/completions", json={"model": "m", "messages": USER, "tools": tool(2**64 - 1)})
    assert fine.status_code == 200 and fine.json()["choices"][0]["finish_reason"] == "tool_calls"
    where = "tools[0].function.parameters.properties.offset.maximum"
    too_big = httpx.post(f"{base}/v1/chat/completions", json={"model": "m", "messages": USER, "tools": tool(2**64)})
    assert too_big.status_code == 400 and too_big.json()["error"]["param"] == where
    assert "outside the 64-bit range" in too_big.json()["error"]["message"]
    schema = {"type": "object", "maxProperties": 10**20}
    fmt = {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}
    with openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0) as client:
        with pytest.raises(openai.BadRequestError) as info:
            client.chat.completions.create(model="m", messages=USER, response_format=fmt)
    assert info.value.body["param"] == "response_format.json_schema.schema.maxProperties"
    config = {"format": {"type": "json_schema", "schema": schema}}
    body = {"model": "m", "max_tokens": 10, "messages": USER, "output_config": config}
    anth = httpx.post(f"{base}/v1/messages", json=body)
    assert anth.status_code == 400 and anth.json()["error"]["type"] == "invalid_request_error"
    assert "output_config.format.schema.maxProperties" in anth.json()["error"]["message"]
    assert len(fake.chat_requests) == 1


# --- settings outside their range; an upstream's own 4xx --------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [("temperature", 5), ("temperature", -0.1), ("top_p", 1.5), ("presence_penalty", 2.5), ("frequency_penalty", -3)],
)
def test_an_openai_setting_out_of_range_is_a_400_naming_it(
    fake: FakeUpstream, base: str, field: str, value: float
) -> None:
    with openai.OpenAI(base_url=f"{base}/v1", api_key="x") as client:  # the SDK's own retries stay on
        with pytest.raises(openai.BadRequestError) as info:
            client.chat.completions.create(model="m", messages=USER, **{field: value})
        assert info.value.body["param"] == field and "between" in info.value.body["message"]
        if field in ("temperature", "top_p"):
            with pytest.raises(openai.BadRequestError) as responses:
                client.responses.create(model="m", input="hi", **{field: value})
            assert responses.value.body["param"] == field
    assert fake.requests == []


@pytest.mark.parametrize(
    ("field", "value", "fine"),
    [("temperature", 1.5, 1.0), ("top_p", 1.01, 0.0), ("top_k", -1, 0), ("max_tokens", 0, 1)],
)
def test_an_anthropic_setting_out_of_range_is_a_400(
    fake: FakeUpstream, base: str, field: str, value: float, fine: float
) -> None:
    def settings(number: float) -> dict[str, Any]:  # this SDK sends the sampling fields as extra_body
        return {"max_tokens": number} if field == "max_tokens" else {"max_tokens": 10, "extra_body": {field: number}}

    with anthropic.Anthropic(base_url=base, api_key="x") as client:
        with pytest.raises(anthropic.BadRequestError) as info:
            client.messages.create(model="m", messages=USER, **settings(value))
        assert field in info.value.body["error"]["message"]
        assert fake.requests == []
        fake.enqueue("Sunny.")
        answer = client.messages.create(model="m", messages=USER, **settings(fine))
    assert answer.content[0].text == "Sunny."
    assert fake.chat_requests[0].body[field] == fine


@pytest.mark.parametrize("stream", [False, True])
def test_an_upstream_4xx_is_a_502_the_sdks_do_not_repeat(fake: FakeUpstream, base: str, stream: bool) -> None:
    refusal = '{"error": {"message": "seed: unsupported value", "type": "invalid_request_error", "param": "seed"}}'
    fake.enqueue(status(400, body=refusal), status(400, body=refusal))
    with openai.OpenAI(base_url=f"{base}/v1", api_key="x") as client:  # max_retries=2 by default
        with pytest.raises(openai.APIStatusError) as info:
            client.chat.completions.create(model="m", messages=USER, tools=TOOLS_OPENAI, stream=stream)
    assert info.value.status_code == 502 and info.value.response.headers["x-should-retry"] == "false"
    with anthropic.Anthropic(base_url=base, api_key="x") as ac, pytest.raises(anthropic.APIStatusError) as ainfo:
        ac.messages.create(model="m", max_tokens=10, messages=USER, tools=TOOLS_ANTHROPIC, stream=stream)
    assert ainfo.value.status_code == 502 and ainfo.value.response.headers["x-should-retry"] == "false"
    assert len(fake.chat_requests) == 2  # one each: neither SDK asked again
    fake.enqueue(status(503), "Sunny.")  # an upstream that may well answer next time: retried as before
    with openai.OpenAI(base_url=f"{base}/v1", api_key="x") as client:
        assert client.chat.completions.create(model="m", messages=USER).choices[0].message.content == "Sunny."


# --- the deprecated function-calling fields, sent as null --------------------------------


@pytest.mark.parametrize("field", ["functions", "function_call"])
def test_null_legacy_fields_ask_for_nothing(fake: FakeUpstream, base: str, field: str) -> None:
    fake.enqueue("Sunny.")
    response = httpx.post(f"{base}/v1/chat/completions", json={"model": "m", "messages": USER, field: None})
    assert response.status_code == 200 and response.json()["choices"][0]["message"]["content"] == "Sunny."
    assert "x-agentfsm-ignored" not in response.headers
    refused = httpx.post(f"{base}/v1/chat/completions", json={"model": "m", "messages": USER, field: []})
    assert refused.status_code == 400 and refused.json()["error"]["param"] == field
