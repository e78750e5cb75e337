"""An upstream 429 whose Retry-After is longer than we would wait reaches the client at once.

Defect: ``Retry-After: 60`` held the client 30 s (three capped 10 s waits), then
answered 429 without ``Retry-After``. Now the 429 comes back after one attempt, in
the client's protocol shape (``rate_limit_error``), with the upstream's Retry-After.
"""

from __future__ import annotations

import time

import anthropic
import openai
import pytest

from agentfsm.backends import OpenAICompatBackend, Timeouts
from agentfsm.core.backend import GenerationOptions
from agentfsm.core.errors import BackendHTTPError
from agentfsm.core.messages import PromptMessage
from agentfsm.testing import FakeUpstream, status
from tests._proxy import TOOLS_ANTHROPIC, TOOLS_OPENAI, proxy

USER = [{"role": "user", "content": "weather in Paris?"}]


def _backend(fake: FakeUpstream) -> OpenAICompatBackend:
    # retries allowed, and a total budget far above the wait: only the rule stops it
    return OpenAICompatBackend(
        fake.base_url, "m", api_key="sk-up", timeout=Timeouts(2.0, 5.0, 120.0),
        max_retries=3, retry_after_cap=10.0, json_schema_mode="off",
    )


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_a_long_retry_after_is_passed_to_the_client_not_waited_for(protocol: str, stream: bool) -> None:
    with FakeUpstream([status(429, retry_after=60)]) as fake, proxy(_backend(fake)) as url:
        started = time.monotonic()
        if protocol == "openai":
            with openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0) as client:
                with pytest.raises(openai.RateLimitError) as info:
                    result = client.chat.completions.create(
                        model="m", messages=USER, tools=TOOLS_OPENAI, stream=stream  # type: ignore[arg-type]
                    )
                    if stream:
                        list(result)  # type: ignore[arg-type]
                body = info.value.body
                assert isinstance(body, dict) and body["type"] == "rate_limit_error"
        else:
            with anthropic.Anthropic(base_url=url, api_key="x", max_retries=0) as aclient:
                with pytest.raises(anthropic.RateLimitError) as ainfo:
                    result = aclient.messages.create(
                        model="m", max_tokens=50, messages=USER, tools=TOOLS_ANTHROPIC, stream=stream  # type: ignore[arg-type]
                    )
                    if stream:
                        list(result)  # type: ignore[arg-type]
                info = ainfo  # type: ignore[assignment]
                assert ainfo.value.body["error"]["type"] == "rate_limit_error"  # type: ignore[index]
        elapsed = time.monotonic() - started
        assert info.value.status_code == 429
        assert info.value.response.headers["retry-after"] == "60"
        assert elapsed < 5
        assert len(fake.chat_requests) == 1


def test_a_short_retry_after_is_still_waited_for_and_retried() -> None:
    with FakeUpstream([status(429, retry_after=0.05), "recovered"]) as fake, _backend(fake) as backend:
        completion = backend.complete([PromptMessage(role="user", content="hi")], GenerationOptions())
    assert completion.text == "recovered"
    assert len(fake.chat_requests) == 2


def test_the_error_carries_the_upstreams_retry_after() -> None:
    with FakeUpstream([status(503, retry_after=30)]) as fake, _backend(fake) as backend:
        with pytest.raises(BackendHTTPError) as info:
            backend.complete([PromptMessage(role="user", content="hi")], GenerationOptions())
    assert (info.value.status_code, info.value.retry_after) == (503, 30.0)
    assert len(fake.chat_requests) == 1
