"""What the client is told it was charged, and what the proxy changed in its request.

- usage is the upstream's own count, streamed or not (streams ask for it with
  ``stream_options.include_usage``; it was the proxy's characters/4 estimate), summed over
  every model call, with each call in ``x-agentfsm-call-usage`` (a stream's closing comment);
- no ``max_tokens`` goes upstream when the client names none (it was 512, so every reply
  was cut there); what the proxy does set (temperature 0, seed 0 where the API has one, a lowered
  ``max_tokens``) is named in ``x-agentfsm-defaults``;
- an upstream's context is learned from its own "does not fit" error: the request is sent
  again with what is left, and the next one is fitted before it is sent.

Official SDKs against a real proxy; the upstream is a FakeUpstream that reports the usage
each reply is scripted with.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from agentfsm.testing import FakeUpstream, reply
from tests._proxy import TOOLS_ANTHROPIC, TOOLS_OPENAI, action, fake, proxy, upstream_backend  # fake: a fixture

USER = [{"role": "user", "content": "What is the weather in Paris?"}]
TOOLS_RESPONSES: list[Any] = [{"type": "function", **t["function"]} for t in TOOLS_OPENAI]
#: a correction, then the call: two model calls, each with the upstream's own figures
TWO_CALLS = [reply(action("get_weather", town="Paris"), usage=(1000, 7)),
             reply(action("get_weather", city="Paris"), usage=(1100, 9))]


@pytest.fixture
def base(fake: FakeUpstream) -> Iterator[str]:
    with proxy(upstream_backend(fake)) as url:
        yield url


def _sse(response: httpx.Response) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: {")]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_openai_usage_is_the_upstreams_summed_with_each_call_stated(stream: bool, fake: FakeUpstream, base: str) -> None:
    fake.enqueue(*TWO_CALLS)
    body: dict[str, Any] = {"model": "m", "messages": USER, "tools": TOOLS_OPENAI, "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True}
    response = httpx.post(f"{base}/v1/chat/completions", json=body, timeout=30)
    usage = _sse(response)[-1]["usage"] if stream else response.json()["usage"]
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (2100, 16)
    if stream:
        assert ": agentfsm attempts=2 corrections=1 call-usage=1000/7,1100/9" in response.text
    else:
        assert response.headers["x-agentfsm-call-usage"] == "1000/7,1100/9"
    assert all(r.body.get("stream_options") == ({"include_usage": True} if stream else None)
               for r in fake.chat_requests)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_anthropic_usage_is_the_upstreams_summed(stream: bool, fake: FakeUpstream, base: str) -> None:
    fake.enqueue(*TWO_CALLS)
    with anthropic.Anthropic(base_url=base, api_key="x", max_retries=0, timeout=30) as client:
        args: dict[str, Any] = {"model": "m", "max_tokens": 256, "messages": USER, "tools": TOOLS_ANTHROPIC}
        if stream:
            with client.messages.stream(**args) as events:
                message = events.get_final_message()
        else:
            message = client.messages.create(**args)
    assert (message.usage.input_tokens, message.usage.output_tokens) == (2100, 16)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_responses_usage_is_the_upstreams_summed(stream: bool, fake: FakeUpstream, base: str) -> None:
    fake.enqueue(*TWO_CALLS)
    with openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0, timeout=30) as client:
        if stream:
            with client.responses.stream(model="m", input="Weather in Paris?", tools=TOOLS_RESPONSES) as events:
                done = events.get_final_response()
        else:
            done = client.responses.create(model="m", input="Weather in Paris?", tools=TOOLS_RESPONSES)
    assert done.usage is not None and (done.usage.input_tokens, done.usage.output_tokens) == (2100, 16)


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", {"messages": USER, "tools": TOOLS_OPENAI}),
        ("/v1/responses", {"input": "Weather in Paris?", "tools": TOOLS_RESPONSES}),
        ("/v1/chat/completions", {"messages": USER}),  # no tools: passed through
    ],
    ids=["chat", "responses", "plain"],
)
def test_no_max_tokens_goes_upstream_when_the_client_names_none(
    path: str, body: dict[str, Any], fake: FakeUpstream, base: str
) -> None:
    fake.enqueue("It is sunny.")
    response = httpx.post(f"{base}{path}", json={"model": "m", **body}, timeout=30)
    assert response.status_code == 200
    sent = fake.chat_requests[0].body
    # a seed only where the client's API has one (the Responses API has none)
    seeded = path == "/v1/chat/completions"
    assert "max_tokens" not in sent and (sent["temperature"], sent.get("seed")) == (0.0, 0 if seeded else None)
    assert response.headers["x-agentfsm-defaults"] == ("temperature=0,seed=0" if seeded else "temperature=0")


def test_what_the_client_sets_is_not_reported_as_a_default(fake: FakeUpstream, base: str) -> None:
    fake.enqueue("It is sunny.")
    body = {"model": "m", "messages": USER, "temperature": 0.7, "seed": 3, "max_tokens": 100}
    response = httpx.post(f"{base}/v1/chat/completions", json=body, timeout=30)
    assert fake.chat_requests[0].body["max_tokens"] == 100
    assert "x-agentfsm-defaults" not in response.headers


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_context_the_upstream_reports_is_learned_and_fitted_to(stream: bool) -> None:
    """Claude Code sends max_tokens 64000; the upstream's context is 4,000 and the proxy
    was not told: the upstream's own error (6758 in the messages ...) names the context,
    the request is sent again with what is left, and later requests are fitted first."""
    with FakeUpstream(["It is sunny."] * 3, context_tokens=4000) as fake, proxy(upstream_backend(fake)) as url:
        with anthropic.Anthropic(base_url=url, api_key="x", max_retries=0, timeout=30) as client:
            args: dict[str, Any] = {"model": "m", "max_tokens": 64000, "messages": USER, "tools": TOOLS_ANTHROPIC}
            for _ in range(2):
                if stream:
                    with client.messages.stream(**args) as events:
                        message = events.get_final_message()
                else:
                    message = client.messages.create(**args)
                assert message.content[0].text == "It is sunny."  # type: ignore[union-attr]
            raw = client.messages.with_raw_response.create(**args)
    first, retried, fitted, again = (r.body["max_tokens"] for r in fake.chat_requests)
    assert first == 64000 and retried < 4000 and fitted < retried and again == fitted
    assert raw.headers["x-agentfsm-defaults"] == f"temperature=0,max_tokens={fitted}"  # Anthropic's has no seed


def test_a_max_tokens_that_still_cannot_fit_names_its_real_cause(fake: FakeUpstream, base: str) -> None:
    """An upstream that refuses max_tokens for the completion's size (and again when told
    what is left) is a 400 naming max_tokens, never "prompt is too long"."""
    too_big = json.dumps({"error": {"message": "This model's maximum context length is 4096 tokens. However, you "
                                    "requested 64100 tokens (100 in the messages, 64000 in the completion).",
                                    "code": "context_length_exceeded"}})
    from agentfsm.testing import status

    fake.enqueue(status(400, body=too_big), status(400, body=too_big))
    with anthropic.Anthropic(base_url=base, api_key="x", max_retries=0, timeout=30) as client:
        with pytest.raises(anthropic.BadRequestError) as caught:
            client.messages.create(model="m", max_tokens=64000, messages=USER, tools=TOOLS_ANTHROPIC)  # type: ignore[arg-type]
    message = caught.value.body["error"]["message"]  # type: ignore[index]
    assert message == ("input length and `max_tokens` exceed context limit: 100 + 64000 > 4096, "
                       "decrease input length or `max_tokens` and try again")
