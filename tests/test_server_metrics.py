"""``agentfsm serve --metrics``: Prometheus counters scraped from ``GET /metrics`` after scripted requests.

Upstream: a FakeUpstream on 127.0.0.1; clients: the official OpenAI and Anthropic SDKs.
"""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from agentfsm.testing import FakeUpstream, status
from tests._proxy import TOOLS_ANTHROPIC, TOOLS_OPENAI, action, base, fake, proxy, upstream_backend  # base, fake: fixtures

ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
CALL = action("get_weather", city="Paris")
#: four rejected replies (an unknown tool), the last with prose: the budget of three corrections is spent
SPENT = [action("nope"), action("nope"), action("nope"), "I could not find it.\n" + action("nope")]


def scrape(base: str, **headers: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of ``GET /metrics``, by name and labels."""
    response = httpx.get(f"{base}/metrics", headers=headers, timeout=10)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


@pytest.fixture
def metered(fake: FakeUpstream) -> Iterator[str]:
    with proxy(upstream_backend(fake), metrics=True) as url:
        yield url


def test_accepted_corrected_and_budget_spent_requests_are_counted(fake: FakeUpstream, metered: str) -> None:
    with openai.OpenAI(base_url=f"{metered}/v1", api_key="unused", max_retries=0) as client:
        fake.enqueue(CALL)  # accepted at once
        fake.enqueue(action("nope"), CALL)  # one correction (unknown tool), then the call
        fake.enqueue(*SPENT)  # the budget runs out under auto: the model's prose, exhausted
        usages = []
        for _ in range(3):
            raw = client.chat.completions.with_raw_response.create(model="m1", messages=ASK, tools=TOOLS_OPENAI)  # type: ignore[arg-type]
            usages.append(raw.parse().usage)
        samples = scrape(metered)
        assert value(samples, "agentfsm_requests_total", protocol="openai", model="m1", outcome="tool_calls") == 2
        assert value(samples, "agentfsm_requests_total", protocol="openai", model="m1", outcome="exhausted") == 1
        assert value(samples, "agentfsm_corrections_total", guard="unknown_tool", reason="unknown_tool") == 1 + 3
        assert value(samples, "agentfsm_budget_spent_total", protocol="openai") == 1
        # model calls per request: 1, 2 and 4
        assert value(samples, "agentfsm_model_calls_per_request_count", protocol="openai") == 3
        assert value(samples, "agentfsm_model_calls_per_request_sum", protocol="openai") == 7
        assert value(samples, "agentfsm_model_calls_per_request_bucket", protocol="openai", le="1.0") == 1
        assert value(samples, "agentfsm_model_calls_per_request_bucket", protocol="openai", le="2.0") == 2
        # tokens: what the responses reported, summed
        assert value(samples, "agentfsm_tokens_total", model="m1", direction="in") == sum(u.prompt_tokens for u in usages if u)
        assert value(samples, "agentfsm_tokens_total", model="m1", direction="out") == sum(u.completion_tokens for u in usages if u)
        assert value(samples, "agentfsm_request_duration_seconds_count", protocol="openai", model="m1") == 3
        assert value(samples, "agentfsm_requests_in_flight") == 0
        assert not any(name == "agentfsm_upstream_errors_total" for name, _ in samples)


def test_streams_anthropic_budget_errors_and_upstream_errors_are_counted(fake: FakeUpstream, metered: str) -> None:
    with anthropic.Anthropic(base_url=metered, api_key="unused", max_retries=0) as client:
        fake.enqueue(action("nope"), CALL)
        with client.messages.stream(model="claude-x", max_tokens=256, messages=ASK, tools=TOOLS_ANTHROPIC) as stream:  # type: ignore[arg-type]
            assert stream.get_final_message().stop_reason == "tool_use"
        fake.enqueue(*SPENT)  # under a required call a spent budget is a server error
        with pytest.raises(anthropic.InternalServerError):
            client.messages.create(model="claude-x", max_tokens=256, messages=ASK, tools=TOOLS_ANTHROPIC,  # type: ignore[arg-type]
                                   tool_choice={"type": "any"})
        fake.enqueue(status(503))
        with pytest.raises(anthropic.APIStatusError):
            client.messages.create(model="claude-x", max_tokens=256, messages=ASK, tools=TOOLS_ANTHROPIC)  # type: ignore[arg-type]
        samples = scrape(metered)
        assert value(samples, "agentfsm_requests_total", protocol="anthropic", model="claude-x", outcome="tool_calls") == 1
        assert value(samples, "agentfsm_requests_total", protocol="anthropic", model="claude-x", outcome="budget_spent") == 1
        assert value(samples, "agentfsm_requests_total", protocol="anthropic", model="claude-x", outcome="upstream_error") == 1
        assert value(samples, "agentfsm_budget_spent_total", protocol="anthropic") == 1
        assert value(samples, "agentfsm_upstream_errors_total", status="503") == 1
        corrections = sum(v for (name, _), v in samples.items() if name == "agentfsm_corrections_total")
        assert corrections == 1 + 3
        assert value(samples, "agentfsm_requests_in_flight") == 0


def test_metrics_sit_behind_the_api_key_and_count_refused_requests(fake: FakeUpstream) -> None:
    with proxy(upstream_backend(fake), metrics=True, api_key="sk-proxy") as base:
        assert httpx.get(f"{base}/metrics").status_code == 401
        assert httpx.get(f"{base}/metrics", headers={"authorization": "Bearer wrong"}).status_code == 401
        refused = httpx.post(f"{base}/v1/chat/completions", json={"model": "m", "messages": ASK})
        assert refused.status_code == 401
        bad = httpx.post(f"{base}/v1/chat/completions", content=b"{not json",
                         headers={"x-api-key": "sk-proxy", "content-type": "application/json"})
        assert bad.status_code == 400
        samples = scrape(base, authorization="Bearer sk-proxy")
        assert value(samples, "agentfsm_requests_total", protocol="openai", model="", outcome="client_error") == 2
        assert "sk-proxy" not in httpx.get(f"{base}/metrics", headers={"x-api-key": "sk-proxy"}).text


def test_without_metrics_there_is_no_endpoint(base: str) -> None:
    assert httpx.get(f"{base}/metrics").status_code == 404


def test_model_labels_are_bounded() -> None:
    from agentfsm.server.metrics import MODEL_LABELS, ProxyMetrics

    metrics = ProxyMetrics()
    labels = {metrics.model_label(f"m{i}") for i in range(MODEL_LABELS + 10)}
    assert len(labels) == MODEL_LABELS + 1 and "other" in labels
    assert metrics.model_label("m0") == "m0"
