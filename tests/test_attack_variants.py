"""Variants of earlier attack audits, through the real proxy and the official SDKs.

- an Anthropic ``document`` of plain text or text content, and a ``search_result``
  block, are text the model reads (a text document in a tool result was a placeholder
  saying "omitted: this model reads text only", its text lost; in a user's turn, and a
  ``search_result`` anywhere, it was a 400); a PDF stays media, as before;
- a chat request with both ``max_completion_tokens`` and a different ``max_tokens`` ran
  with the first and dropped the second without naming it: it is named in
  ``x-agentfsm-ignored`` now (OpenAI itself refuses the pair);
- a Responses ``allowed_tools`` choice that requires a call of hosted tools only was
  answered without a call and nothing said so: ``tool_choice`` is named as ignored; and
  forcing one of the request's hosted tools (``{"type": "web_search_preview"}``), which
  was a 400 though the tool itself is only ignored, is answered the same way;
- a model that copied the runtime's correction into the prose before a good call had
  those words sent to the client as its own text: the prose is dropped, the call stands;
- an earlier call whose ``arguments`` string is not one JSON object (cut off at a token
  limit) made every later request of the session a 400: the call is kept with no
  arguments and named in ``x-agentfsm-ignored`` (JSON past the limits is still a 400);
- a chat message's ``name`` (the speaker, in a group conversation) was dropped without a
  word: it is named as ``messages.name``, as is any other message field not read.
"""

from __future__ import annotations

import re
from typing import Any

import anthropic
import openai
import pytest

from agentfsm.testing import FakeUpstream, ReceivedRequest
from tests._proxy import TOOLS_ANTHROPIC, TOOLS_OPENAI, action, proxy, upstream_backend
from tests._proxy import base, fake  # fixtures

USER = [{"role": "user", "content": "What is the weather in Paris?"}]
TEXT_DOC: dict[str, Any] = {
    "type": "document",
    "title": "Forecast notes",
    "source": {"type": "text", "media_type": "text/plain", "data": "Paris: 21 C, clear skies."},
    "citations": {"enabled": True},
    "cache_control": {"type": "ephemeral"},
}
CONTENT_DOC: dict[str, Any] = {
    "type": "document",
    "source": {"type": "content", "content": [{"type": "text", "text": "Humidity 40%."}, {"type": "text", "text": "Wind 5 km/h."}]},
}
SEARCH_RESULT: dict[str, Any] = {
    "type": "search_result",
    "source": "https://example.org/paris",
    "title": "Paris weather",
    "content": [{"type": "text", "text": "Sunny all week in Paris."}],
}
PDF: dict[str, Any] = {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjQK"}}


def _conversation(result: list[Any]) -> list[Any]:
    """The user asks with a search result and a document beside the question; the
    assistant called get_weather; its result is ``result``."""
    return [
        {"role": "user", "content": [SEARCH_RESULT, TEXT_DOC, {"type": "text", "text": "What is the weather in Paris?"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": result}]},
    ]


def _prompt(fake: FakeUpstream) -> str:
    return "\n".join(str(m.get("content")) for m in fake.chat_requests[-1].body["messages"])


@pytest.mark.parametrize("stream", [False, True])
def test_text_documents_and_search_results_are_read_as_text(fake: FakeUpstream, base: str, stream: bool) -> None:
    fake.enqueue("It is clear and 21 C.")
    with anthropic.Anthropic(base_url=base, api_key="x", max_retries=0) as client:
        raw = client.messages.with_raw_response.create(
            model="m", max_tokens=100, tools=TOOLS_ANTHROPIC, stream=stream,
            messages=_conversation([CONTENT_DOC, SEARCH_RESULT, TEXT_DOC]),
        )
        assert "x-agentfsm-ignored" not in raw.headers  # nothing was left out
        parsed = raw.parse()
        if stream:
            text = "".join(e.delta.text for e in parsed if e.type == "content_block_delta" and e.delta.type == "text_delta")
        else:
            text = parsed.content[0].text
        assert text == "It is clear and 21 C."
    prompt = _prompt(fake)
    for seen in ("Forecast notes\nParis: 21 C, clear skies.", "Humidity 40%.\nWind 5 km/h.",
                 "Paris weather https://example.org/paris\nSunny all week in Paris."):
        assert seen in prompt
    assert "omitted" not in prompt


def test_a_pdf_stays_media(fake: FakeUpstream, base: str) -> None:
    fake.enqueue("It is clear.")
    with anthropic.Anthropic(base_url=base, api_key="x", max_retries=0) as client:
        raw = client.messages.with_raw_response.create(
            model="m", max_tokens=100, tools=TOOLS_ANTHROPIC, messages=_conversation([PDF])
        )
        assert raw.headers["x-agentfsm-ignored"] == "tool_result.document"
        assert "[document (application/pdf) omitted" in _prompt(fake)
        with pytest.raises(anthropic.BadRequestError) as info:
            client.messages.create(model="m", max_tokens=100, messages=[{"role": "user", "content": [PDF]}])
        assert info.value.body["error"]["type"] == "invalid_request_error"
        assert "'document' in messages[0].content[0]" in info.value.body["error"]["message"]
        with pytest.raises(anthropic.BadRequestError) as info:  # a search result holds text blocks only
            bad = {**SEARCH_RESULT, "content": [{"type": "image", "source": {"type": "url", "url": "https://x/y.png"}}]}
            client.messages.create(model="m", max_tokens=100, messages=[{"role": "user", "content": [bad]}])
        assert "'image' in messages[0].content[0].content[0]" in info.value.body["error"]["message"]


@pytest.mark.parametrize("stream", [False, True])
def test_a_max_tokens_that_max_completion_tokens_overrides_is_named(
    fake: FakeUpstream, base: str, stream: bool
) -> None:
    fake.enqueue("Sunny.", "Sunny.")
    with openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0) as client:
        raw = client.chat.completions.with_raw_response.create(
            model="m", messages=USER, stream=stream, max_tokens=5, max_completion_tokens=70  # type: ignore[arg-type]
        )
        assert raw.headers["x-agentfsm-ignored"] == "max_tokens"
        raw.parse()
        sent = fake.chat_requests[-1].body
        assert 70 in (sent.get("max_tokens"), sent.get("max_completion_tokens"))
        same = client.chat.completions.with_raw_response.create(
            model="m", messages=USER, stream=stream, max_tokens=70, max_completion_tokens=70  # type: ignore[arg-type]
        )
        assert "x-agentfsm-ignored" not in same.headers  # nothing passed over
        same.parse()


@pytest.mark.parametrize("stream", [False, True])
def test_requiring_a_hosted_tool_only_is_named_as_ignored(fake: FakeUpstream, base: str, stream: bool) -> None:
    tools: list[Any] = [{"type": "function", **TOOLS_OPENAI[0]["function"]}, {"type": "web_search"}]
    only_hosted = {"type": "allowed_tools", "mode": "required", "tools": [{"type": "web_search"}]}
    fake.enqueue("Sunny.", "Sunny.")
    with openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0) as client:
        raw = client.responses.with_raw_response.create(
            model="m", input="Weather in Paris?", tools=tools, tool_choice=only_hosted, stream=stream  # type: ignore[arg-type]
        )
        assert raw.headers["x-agentfsm-ignored"] == "tools.web_search,tool_choice"
        parsed = raw.parse()
        if stream:
            assert [e.type for e in parsed][-1] == "response.completed"
        else:
            assert parsed.output_text == "Sunny."
        auto = client.responses.with_raw_response.create(  # nothing required: nothing more passed over
            model="m", input="Weather in Paris?", tools=tools, tool_choice={**only_hosted, "mode": "auto"}
        )
        assert auto.headers["x-agentfsm-ignored"] == "tools.web_search"


def _echoes_the_correction(request: ReceivedRequest) -> str:
    """A weak model: prose first; once corrected, it repeats the correction's first words
    (whatever they are) before a good call."""
    messages = request.body["messages"]
    if messages[-1]["role"] == "user" and len(messages) <= 2:
        return "I am not sure."
    return " ".join(re.findall(r"\w+", messages[-1]["content"])[:14]) + "\n" + action("get_weather", city="Paris")


@pytest.mark.parametrize("stream", [False, True])
def test_a_correction_copied_beside_a_call_never_reaches_the_client(stream: bool) -> None:
    with FakeUpstream(_echoes_the_correction) as upstream, proxy(upstream_backend(upstream)) as url:
        with anthropic.Anthropic(base_url=url, api_key="x", max_retries=0) as client:
            raw = client.messages.with_raw_response.create(
                model="m", max_tokens=200, tools=TOOLS_ANTHROPIC, tool_choice={"type": "any"},
                messages=[{"role": "user", "content": "Weather in Paris?"}], stream=stream,
            )
            assert raw.headers["x-agentfsm-corrections"] == "1"  # the prose reply was corrected
            parsed = raw.parse()
            if stream:
                events = list(parsed)
                blocks = [e.content_block.type for e in events if e.type == "content_block_start"]
                texts = [e.delta.text for e in events if e.type == "content_block_delta" and e.delta.type == "text_delta"]
            else:
                blocks = [b.type for b in parsed.content]
                texts = [b.text for b in parsed.content if b.type == "text"]
    assert blocks == ["tool_use"] and texts == []  # the call stands; the copied words are gone


CUT_OFF = '{"city": "Par'  # an earlier call's arguments, cut at a token limit


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("arguments", [CUT_OFF, "[1]", "null"])
def test_an_earlier_call_with_malformed_arguments_does_not_poison_the_session(
    fake: FakeUpstream, base: str, stream: bool, arguments: str
) -> None:
    fake.enqueue("I could not get the weather.", "I could not get the weather.")
    history: list[Any] = [
        *USER,
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "error: the arguments were not valid JSON"},
    ]
    with openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0) as client:
        raw = client.chat.completions.with_raw_response.create(model="m", messages=history, tools=TOOLS_OPENAI, stream=stream)
        assert raw.headers["x-agentfsm-ignored"] == "tool_calls.arguments"
        raw.parse()
        items: list[Any] = [
            {"role": "user", "content": "What is the weather in Paris?"},
            {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": arguments},
            {"type": "function_call_output", "call_id": "call_1", "output": "error: the arguments were not valid JSON"},
        ]
        tools = [{"type": "function", **t["function"]} for t in TOOLS_OPENAI]
        answer = client.responses.with_raw_response.create(model="m", input=items, tools=tools, stream=stream)
        assert answer.headers["x-agentfsm-ignored"] == "function_call.arguments"
        answer.parse()
    prompt = _prompt(fake)
    assert "error: the arguments were not valid JSON" in prompt  # the result stays paired with its call


def test_arguments_past_the_decoding_limits_are_still_a_400(fake: FakeUpstream, base: str) -> None:
    nested = '{"a": ' + "[" * 200 + "]" * 200 + "}"
    history: list[Any] = [
        *USER,
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": nested}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
    ]
    with openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0) as client:
        with pytest.raises(openai.BadRequestError) as info:
            client.chat.completions.create(model="m", messages=history, tools=TOOLS_OPENAI)
    assert info.value.body["param"] == "messages[1].tool_calls[0].function.arguments"
    assert "nests deeper" in info.value.body["message"]


@pytest.mark.parametrize("stream", [False, True])
def test_a_speakers_name_the_model_is_not_shown_is_named(fake: FakeUpstream, base: str, stream: bool) -> None:
    fake.enqueue("Hello both.", "Hello both.")
    group: list[Any] = [
        {"role": "user", "name": "alice", "content": "Hi, I am new here."},
        {"role": "assistant", "content": "Welcome!"},
        {"role": "user", "name": "bob", "content": "Me too."},
    ]
    with openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0) as client:
        raw = client.chat.completions.with_raw_response.create(model="m", messages=group, stream=stream)
        assert raw.headers["x-agentfsm-ignored"] == "messages.name"
        raw.parse()
        # a tool message's name is its call's, which the model is shown: nothing is passed over
        history: list[Any] = [
            *USER,
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
            {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "21 C"},
        ]
        plain = client.chat.completions.with_raw_response.create(model="m", messages=history, tools=TOOLS_OPENAI, stream=stream)
        assert "x-agentfsm-ignored" not in plain.headers
        plain.parse()


def test_forcing_an_offered_hosted_tool_is_answered_without_it(fake: FakeUpstream, base: str) -> None:
    tools: list[Any] = [{"type": "function", **TOOLS_OPENAI[0]["function"]}, {"type": "web_search_preview"}]
    fake.enqueue("Sunny.")
    with openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0) as client:
        raw = client.responses.with_raw_response.create(
            model="m", input="Weather in Paris?", tools=tools, tool_choice={"type": "web_search_preview"}
        )
        assert raw.headers["x-agentfsm-ignored"] == "tools.web_search_preview,tool_choice"
        assert raw.parse().output_text == "Sunny."
        with pytest.raises(openai.BadRequestError) as info:  # a hosted tool the request does not offer
            client.responses.create(model="m", input="Weather?", tools=tools, tool_choice={"type": "file_search"})
        assert info.value.body["param"] == "tool_choice"
