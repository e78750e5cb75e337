"""OpenTelemetry spans of the proxy (GenAI semantic conventions), seen by the SDK's in-memory exporter.

Upstream: a FakeUpstream on 127.0.0.1; clients: the official OpenAI and Anthropic SDKs;
``agentfsm serve --otel`` itself in a subprocess with the console exporter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from agentfsm.testing import FakeUpstream
from tests._proxy import TOOLS_ANTHROPIC, TOOLS_OPENAI, action, fake, free_port, proxy, upstream_backend, wait_until_serving  # fake: a fixture

ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
CALL = action("get_weather", city="Paris")
SPENT = [action("nope"), action("nope"), action("nope"), "I could not find it.\n" + action("nope")]


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def traced(fake: FakeUpstream, exporter: InMemorySpanExporter) -> Iterator[tuple[str, str]]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    backend = upstream_backend(fake)
    with proxy(backend, tracer_provider=provider, metrics=True) as url:
        yield url, backend.name
    provider.shutdown()


def tree(spans: tuple[ReadableSpan, ...]) -> list[tuple[ReadableSpan, list[ReadableSpan]]]:
    """Each request span with its children, in start order."""
    roots = sorted((s for s in spans if s.parent is None), key=lambda s: s.start_time or 0)
    out = []
    for root in roots:
        assert root.context is not None
        children = [s for s in spans if s.parent is not None and s.parent.span_id == root.context.span_id]
        out.append((root, sorted(children, key=lambda s: s.start_time or 0)))
    return out


def events(span: ReadableSpan) -> list[tuple[str, dict[str, Any]]]:
    return [(e.name, dict(e.attributes or {})) for e in span.events]


def test_a_corrected_request_is_one_span_with_a_child_per_model_call(
    fake: FakeUpstream, traced: tuple[str, str], exporter: InMemorySpanExporter
) -> None:
    base, backend_name = traced
    with openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0) as client:
        fake.enqueue(action("nope"), CALL)
        reply = client.chat.completions.create(model="m1", messages=ASK, tools=TOOLS_OPENAI)  # type: ignore[arg-type]
        [(root, children)] = tree(exporter.get_finished_spans())
        assert root.name == "chat m1" and root.kind is SpanKind.SERVER
        attrs = dict(root.attributes or {})
        assert attrs["gen_ai.operation.name"] == "chat" and attrs["gen_ai.request.model"] == "m1"
        assert attrs["agentfsm.protocol"] == "openai" and attrs["agentfsm.outcome"] == "tool_calls"
        assert (attrs["agentfsm.attempts"], attrs["agentfsm.corrections"], attrs["agentfsm.model_calls"]) == (2, 1, 2)
        assert reply.usage is not None
        assert attrs["gen_ai.usage.input_tokens"] == reply.usage.prompt_tokens
        assert attrs["gen_ai.usage.output_tokens"] == reply.usage.completion_tokens
        assert attrs["gen_ai.response.finish_reasons"] == ("tool_calls",)
        assert root.status.status_code is StatusCode.UNSET
        # a child per model call, each with its usage; the first carries the verdict and the correction
        assert [c.name for c in children] == [f"chat {backend_name}"] * 2
        assert all(c.kind is SpanKind.CLIENT for c in children)
        first, second = (dict(c.attributes or {}) for c in children)
        assert (first["agentfsm.attempt"], second["agentfsm.attempt"]) == (1, 2)
        assert first["gen_ai.request.model"] == backend_name and first["gen_ai.response.finish_reasons"] == ("stop",)
        assert first["gen_ai.usage.input_tokens"] + second["gen_ai.usage.input_tokens"] == reply.usage.prompt_tokens
        verdicts = events(children[0])
        assert ("agentfsm.guard", {"agentfsm.guard.name": "unknown_tool", "agentfsm.guard.verdict": "correct",
                                   "agentfsm.guard.reason": "unknown_tool"}) in verdicts
        assert verdicts[-1] == ("agentfsm.correction", {"agentfsm.correction.reason": "unknown_tool", "agentfsm.correction.attempt": 1})
        assert not any(name == "agentfsm.correction" for name, _ in events(children[1]))
        # every child lies inside its parent
        for child in children:
            assert root.start_time is not None and root.end_time is not None
            assert child.start_time is not None and child.end_time is not None
            assert root.start_time <= child.start_time <= child.end_time <= root.end_time


def test_a_streamed_request_whose_budget_runs_out_is_an_error_span(
    fake: FakeUpstream, traced: tuple[str, str], exporter: InMemorySpanExporter
) -> None:
    base, _ = traced
    with anthropic.Anthropic(base_url=base, api_key="unused", max_retries=0) as client:
        fake.enqueue(*SPENT)
        with pytest.raises(anthropic.APIStatusError):
            with client.messages.stream(model="claude-x", max_tokens=256, messages=ASK, tools=TOOLS_ANTHROPIC,  # type: ignore[arg-type]
                                        tool_choice={"type": "any"}) as stream:
                stream.get_final_message()
        [(root, children)] = tree(exporter.get_finished_spans())
        attrs = dict(root.attributes or {})
        assert attrs["agentfsm.stream"] is True and attrs["agentfsm.outcome"] == "budget_spent"
        assert attrs["error.type"] == "RetryBudgetExceeded" and root.status.status_code is StatusCode.ERROR
        assert len(children) == 4
        stops = [a for c in children for name, a in events(c) if name == "agentfsm.guard" and a["agentfsm.guard.verdict"] == "stop"]
        assert [s["agentfsm.guard.reason"] for s in stops] == ["budget_spent"]
        assert sum(1 for c in children for name, _ in events(c) if name == "agentfsm.correction") == 3


def test_a_request_without_tools_has_its_one_call(
    fake: FakeUpstream, traced: tuple[str, str], exporter: InMemorySpanExporter
) -> None:
    base, _ = traced
    fake.enqueue("Hello.")
    with openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0) as client:
        client.chat.completions.create(model="m1", messages=ASK, max_tokens=40)  # type: ignore[arg-type]
        [(root, [call])] = tree(exporter.get_finished_spans())
        assert dict(root.attributes or {})["agentfsm.outcome"] == "answer"
        assert dict(call.attributes or {})["gen_ai.request.max_tokens"] == 40
        # metrics watched the same request beside the spans
        assert 'outcome="answer"' in httpx.get(f"{base}/metrics").text


def test_serve_otel_exports_spans_with_the_console_exporter(fake: FakeUpstream) -> None:
    port = free_port()
    env = {**os.environ, "OTEL_TRACES_EXPORTER": "console", "OTEL_SERVICE_NAME": "proxy-under-test"}
    process = subprocess.Popen(
        [sys.executable, "-m", "agentfsm", "serve", "--port", str(port), "--backend", "openai",
         "--base-url", fake.base_url, "--model", "fake-model", "--otel", "--metrics"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(url, process)
        fake.enqueue(CALL)
        answer = httpx.post(f"{url}/v1/chat/completions", json={"model": "m1", "messages": ASK, "tools": TOOLS_OPENAI}, timeout=30)
        assert answer.status_code == 200
        assert 'agentfsm_requests_total{model="m1",outcome="tool_calls",protocol="openai"} 1.0' in httpx.get(f"{url}/metrics").text
    finally:
        process.terminate()
        out, err = process.communicate(timeout=30)
    assert b"Traceback" not in err, err.decode()
    spans = [json.loads(chunk) for chunk in _json_objects(out.decode())]
    names = {s["name"]: s for s in spans}
    assert "chat m1" in names and names["chat m1"]["resource"]["attributes"]["service.name"] == "proxy-under-test"
    child = next(s for s in spans if s["parent_id"] == names["chat m1"]["context"]["span_id"])
    assert child["kind"] == "SpanKind.CLIENT"


def _json_objects(text: str) -> list[str]:
    """The console exporter's spans: pretty-printed JSON objects, one after another."""
    decoder = json.JSONDecoder()
    found, i = [], 0
    while (start := text.find("{", i)) >= 0:
        obj, end = decoder.raw_decode(text, start)
        found.append(json.dumps(obj))
        i = end
    return found
