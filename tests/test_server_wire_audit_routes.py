"""Audit findings on what the proxy answers, through the real proxy and the official SDKs.

- ``GET /v1/models/{id}``: a listed model in the caller's shape, another name the
  provider's 404 (it was a 404 for every name);
- a Responses object repeats the request's settings (it said ``instructions: null``,
  ``tools: []`` ... whatever was sent), and an ``incomplete`` one's message item is
  ``incomplete``, whole and streamed;
- Responses ``allowed_tools`` naming an unknown tool is a 400, as in chat completions
  (it was a silent ``none``);
- Anthropic's own tool types beside custom tools are left out and named in
  ``x-agentfsm-ignored`` (they were a 400), on ``/v1/messages`` and ``count_tokens``;
- a context under 256 tokens, learned from an upstream's error, leaves a maximum prompt
  that is never negative (every later request failed: ``2 tokens > -156 maximum``);
- a Claude Code request carrying a ~3 MB screenshot fits the default body limit (32 MiB).
"""

from __future__ import annotations

import base64
from typing import Any

import anthropic
import httpx
import openai
import pytest

from agentfsm.core.errors import PromptTooLong
from agentfsm.prompt.compaction import fit_prompt
from agentfsm.server.models import ModelTable, ServedModel
from agentfsm.server.settings import DEFAULT_MAX_BODY_BYTES
from agentfsm.testing import FakeUpstream, reply
from tests._proxy import TOOLS_ANTHROPIC, TOOLS_OPENAI, action, proxy, upstream_backend
from tests._proxy import base, fake  # fixtures

USER = [{"role": "user", "content": "What is the weather in Paris?"}]
TOOLS_RESPONSES: list[Any] = [{"type": "function", **t["function"]} for t in TOOLS_OPENAI]


# --- GET /v1/models/{id} ----------------------------------------------------------------


def test_a_listed_model_is_retrieved_in_the_callers_shape(fake: FakeUpstream) -> None:
    backend = upstream_backend(fake)
    table = ModelTable([ServedModel("org/model-a", backend), ServedModel("b", backend)], fallback="b")
    with proxy(table) as url:
        with openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0) as client:
            for name in ("org/model-a", "b"):
                found = client.models.retrieve(name)
                assert (found.id, found.object, found.owned_by) == (name, "model", "agentfsm")
            with pytest.raises(openai.NotFoundError) as info:
                client.models.retrieve("gpt-unknown")  # not listed, though the fallback answers it
            assert info.value.body["code"] == "model_not_found" and info.value.body["param"] == "model"
            assert "gpt-unknown" in info.value.body["message"]
        with anthropic.Anthropic(base_url=url, api_key="x", max_retries=0) as ac:
            model = ac.models.retrieve("b")
            assert (model.id, model.type, model.display_name) == ("b", "model", "b")
            with pytest.raises(anthropic.NotFoundError) as ainfo:
                ac.models.retrieve("claude-unknown")
            assert ainfo.value.body["type"] == "error"
            assert ainfo.value.body["error"]["type"] == "not_found_error"
        listed = httpx.get(f"{url}/v1/models").json()["data"]
        assert httpx.get(f"{url}/v1/models/b").json() == listed[1]


def test_retrieving_a_model_needs_the_key(fake: FakeUpstream) -> None:
    with proxy(upstream_backend(fake), api_key="sk-proxy") as url:
        assert httpx.get(f"{url}/v1/models/openai:fake-model").status_code == 401
        with openai.OpenAI(base_url=f"{url}/v1", api_key="sk-proxy", max_retries=0) as client:
            assert client.models.retrieve("openai:fake-model").id == "openai:fake-model"


# --- the Responses object repeats the request ---------------------------------------------


SENT: dict[str, Any] = {
    "instructions": "Be brief.",
    "tools": TOOLS_RESPONSES,
    "tool_choice": {"type": "function", "name": "get_weather"},
    "parallel_tool_calls": False,
    "temperature": 0.3,
    "top_p": 0.9,
    "max_output_tokens": 99,
    "metadata": {"ticket": "T-1"},
    "store": True,
    "user": "u-1",
}


@pytest.mark.parametrize("stream", [False, True])
def test_the_response_repeats_the_requests_settings(fake: FakeUpstream, base: str, stream: bool) -> None:
    fake.enqueue(action("get_weather", city="Paris"))
    body = {"model": "m", "input": "Weather in Paris?", "text": {"verbosity": "low"}, "stream": stream, **SENT}
    with openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0) as client:
        if stream:
            events = list(client.responses.create(**body))
            snapshots = [e.response for e in events if e.type in ("response.created", "response.completed")]
        else:
            snapshots = [client.responses.create(**body)]
    for response in snapshots:
        seen = response.model_dump(mode="json", exclude_unset=True)  # what the proxy sent, as sent
        assert {key: seen[key] for key in SENT} == SENT
        assert seen["text"] == {"format": {"type": "text"}, "verbosity": "low"}
    assert [item.type for item in snapshots[-1].output] == ["function_call"]


@pytest.mark.parametrize("stream", [False, True])
def test_an_incomplete_response_has_an_incomplete_message(fake: FakeUpstream, base: str, stream: bool) -> None:
    fake.enqueue(reply("Hello wor", finish_reason="length"))
    with openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0) as client:
        if stream:
            events = list(client.responses.create(model="m", input="hi", max_output_tokens=5, stream=True))
            done = [e.item for e in events if e.type == "response.output_item.done"]
            response = [e.response for e in events if e.type == "response.incomplete"][0]
            assert [item.status for item in done] == ["incomplete"]
        else:
            response = client.responses.create(model="m", input="hi", max_output_tokens=5)
    assert response.status == "incomplete" and response.incomplete_details.reason == "max_output_tokens"
    assert [(item.type, item.status) for item in response.output] == [("message", "incomplete")]
    assert response.max_output_tokens == 5


def test_a_response_without_settings_says_the_defaults(fake: FakeUpstream, base: str) -> None:
    fake.enqueue("Hello.")
    seen = httpx.post(f"{base}/v1/responses", json={"model": "m", "input": "hi"}).json()
    assert {k: seen[k] for k in ("instructions", "tools", "tool_choice", "parallel_tool_calls", "temperature")} == {
        "instructions": None, "tools": [], "tool_choice": "auto", "parallel_tool_calls": True, "temperature": None,
    }
    assert (seen["store"], seen["text"], seen["metadata"]) == (False, {"format": {"type": "text"}}, {})


# --- Responses allowed_tools ----------------------------------------------------------------


def test_allowed_tools_naming_an_unknown_tool_is_a_400_as_in_chat(fake: FakeUpstream, base: str) -> None:
    unknown = {"type": "allowed_tools", "mode": "required", "tools": [{"type": "function", "name": "nope"}]}
    with openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0) as client:
        with pytest.raises(openai.BadRequestError) as responses:
            client.responses.create(model="m", input="w", tools=TOOLS_RESPONSES, tool_choice=unknown)
        nope = [{"type": "function", "function": {"name": "nope"}}]
        chat_choice = {"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": nope}}
        with pytest.raises(openai.BadRequestError) as chat:
            client.chat.completions.create(model="m", messages=USER, tools=TOOLS_OPENAI, tool_choice=chat_choice)
        assert responses.value.body["param"] == chat.value.body["param"] == "tool_choice"
        message = responses.value.body["message"]
        assert "'nope'" in message and "not among the tools" in message
        fake.enqueue(action("get_time", tz="CET"))
        hosted = {"type": "web_search"}  # allowed beside a function: passed over, as the tool itself is
        only = [hosted, {"type": "function", "name": "get_time"}]
        allowed = {"type": "allowed_tools", "mode": "required", "tools": only}
        answer = client.responses.create(model="m", input="w", tools=[*TOOLS_RESPONSES, hosted], tool_choice=allowed)
    assert [(item.type, item.name) for item in answer.output] == [("function_call", "get_time")]


# --- Anthropic's own tools ---------------------------------------------------------------------


OWN_TOOLS: list[Any] = [
    {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
    {"type": "bash_20250124", "name": "bash"},
    {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"},
]


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_own_tools_are_left_out_and_named(fake: FakeUpstream, base: str, stream: bool) -> None:
    fake.enqueue(action("get_weather", city="Paris"))
    with anthropic.Anthropic(base_url=base, api_key="x", max_retries=0) as client:
        raw = client.messages.with_raw_response.create(
            model="m", max_tokens=200, messages=USER, tools=[*OWN_TOOLS, *TOOLS_ANTHROPIC], stream=stream,
        )
        assert raw.headers["x-agentfsm-ignored"] == (
            "tools.web_search_20250305,tools.bash_20250124,tools.text_editor_20250728"
        )
        parsed = raw.parse()
        if stream:
            starts = [e.content_block for e in parsed if e.type == "content_block_start"]
            calls = [(b.type, b.name) for b in starts if b.type == "tool_use"]
        else:
            calls = [(b.type, b.name) for b in parsed.content if b.type == "tool_use"]
    assert calls == [("tool_use", "get_weather")]
    contract = fake.chat_requests[0].messages[0]["content"]
    assert "get_weather" in contract and "web_search" not in contract and "str_replace_based_edit_tool" not in contract


def test_count_tokens_leaves_anthropic_own_tools_out(base: str) -> None:
    with anthropic.Anthropic(base_url=base, api_key="x", max_retries=0) as client:
        mixed = client.messages.count_tokens(model="m", messages=USER, tools=[*OWN_TOOLS, *TOOLS_ANTHROPIC])
        custom = client.messages.count_tokens(model="m", messages=USER, tools=TOOLS_ANTHROPIC)
    assert mixed.input_tokens == custom.input_tokens > 0


# --- a small context learned from the upstream ------------------------------------------------


def test_the_maximum_prompt_is_never_negative() -> None:
    assert fit_prompt([], lambda _tools: 2, 100, None).prompt_tokens == 2
    with pytest.raises(PromptTooLong) as info:
        fit_prompt([], lambda _tools: 60, 100, None)
    assert (info.value.tokens, info.value.maximum) == (60, 50)
    assert str(info.value) == "prompt is too long: 60 tokens > 50 maximum"
    for context in (1, 2, 10, 255, 256, 300):
        with pytest.raises(PromptTooLong) as tiny:
            fit_prompt([], lambda _tools: 10**6, context, 4)
        assert tiny.value.maximum is not None and 0 <= tiny.value.maximum < context
    assert fit_prompt([], lambda _tools: 100, 1000, None).max_tokens is None  # a roomy context: as before


def test_a_small_context_learned_from_an_upstream_error_still_serves() -> None:
    with FakeUpstream(["Hello.", "Hello again."], context_tokens=120) as fake, proxy(upstream_backend(fake)) as url:
        ask = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 500}
        first = httpx.post(f"{url}/v1/chat/completions", json=ask)  # refused upstream, learned, asked again
        assert first.status_code == 200, first.text
        second = httpx.post(f"{url}/v1/chat/completions", json=ask)  # fitted before it is sent
        assert second.status_code == 200, second.text
        assert second.json()["choices"][0]["message"]["content"] == "Hello again."
        too_long = httpx.post(f"{url}/v1/chat/completions", json={**ask, "tools": TOOLS_OPENAI})
    assert too_long.status_code == 400 and too_long.json()["error"]["code"] == "context_length_exceeded"
    message = too_long.json()["error"]["message"]
    assert message.startswith("prompt is too long") and int(message.split(" > ")[1].split()[0]) >= 0


# --- the default body limit ---------------------------------------------------------------------


def test_a_session_with_a_screenshot_fits_the_default_body_limit(fake: FakeUpstream, base: str) -> None:
    assert DEFAULT_MAX_BODY_BYTES == 32 * 1024 * 1024
    picture = base64.b64encode(bytes(range(256)) * 13_000).decode()  # ~3.3 MB, as Claude Code reads a screenshot
    messages = [
        {"role": "user", "content": "Look at shot.png"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "shot.png"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": picture}}]}]},
        {"role": "user", "content": "And now?"},
    ]
    tools = [{"name": "Read", "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}}}]
    fake.enqueue("A chart.")
    with anthropic.Anthropic(base_url=base, api_key="x", max_retries=0) as client:
        raw = client.messages.with_raw_response.create(model="m", max_tokens=100, messages=messages, tools=tools)
    assert len(raw.http_request.content) > 4 * 1024 * 1024
    assert raw.headers["x-agentfsm-ignored"] == "tool_result.image"
    assert raw.parse().content[0].text == "A chart."


def test_responses_metadata_is_kept_not_reported_ignored_and_must_be_an_object(fake: FakeUpstream, base: str) -> None:
    fake.enqueue("Hello.")
    answer = httpx.post(f"{base}/v1/responses", json={"model": "m", "input": "hi", "metadata": {"ticket": "T-2"}})
    assert answer.status_code == 200 and answer.json()["metadata"] == {"ticket": "T-2"}
    assert "metadata" not in answer.headers.get("x-agentfsm-ignored", "")
    refused = httpx.post(f"{base}/v1/responses", json={"model": "m", "input": "hi", "metadata": "T-2"})
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "metadata"
