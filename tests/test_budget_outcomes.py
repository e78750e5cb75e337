"""Corrections never strand the model; a spent budget has one documented outcome.

- under ``required``, ``any`` or a named tool, a correction keeps a valid call possible;
- budget spent under ``auto``: the turn ends with the model's best prose (never the
  rejected call), marked ``exhausted`` in the transcript; with no prose, it fails as a
  required call does (the runtime never writes an answer for the model);
- budget spent under a required call: ``RetryBudgetExceeded`` from the agent, and from
  the proxy the provider's server-side error (OpenAI 500 ``server_error``, Anthropic 500
  ``api_error``), streamed or not; after the first streamed event, the protocol's
  error event.

Upstream: a FakeUpstream on 127.0.0.1; clients: the official SDKs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from agentfsm import Agent
from agentfsm.backends import ScriptedBackend
from agentfsm.core.backend import Capabilities
from agentfsm.engine.decide import Correct, EngineConfig, plan, step
from agentfsm.core.errors import RetryBudgetExceeded
from agentfsm.core.messages import AssistantMessage, ToolCall, ToolMessage, ToolResult, UserMessage
from agentfsm.runtime.tools import ToolRegistry
from agentfsm.runtime.transcript import read_transcript
from agentfsm.testing import FakeUpstream
from tests._proxy import TOOLS_ANTHROPIC, TOOLS_OPENAI, action, fake, proxy, upstream_backend  # fake: a fixture

ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
PROSE = "I could not find a tool for that."
#: four rejected replies (unknown tool): the budget of three corrections is spent
SPENT = [action("nope"), action("nope"), action("nope"), PROSE + "\n" + action("nope")]


def get_weather(city: str) -> str:
    """Weather in a city."""
    return f"sunny in {city}"


# --- the agent ---------------------------------------------------------------------


def test_agent_budget_spent_under_auto_answers_with_the_best_prose(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    result = Agent(ScriptedBackend(SPENT), [get_weather], transcript=path).run("Weather in Paris?")
    assert result.exhausted and result.content == PROSE and not result.tool_calls
    events = read_transcript(path)
    final = next(e for e in events if e["type"] == "final")
    assert final["exhausted"] is True and final["content"] == PROSE
    assert [e["reason"] for e in events if e["type"] == "guard" and e["verdict"] == "stop"] == ["budget_spent"]
    assert not any(e["type"] == "error" for e in events)


@pytest.mark.parametrize("choice", ["required", "get_weather"])
def test_agent_budget_spent_under_a_required_call_raises(choice: str) -> None:
    with pytest.raises(RetryBudgetExceeded) as info:
        Agent(ScriptedBackend(SPENT), [get_weather], tool_choice=choice).run("Weather in Paris?")
    assert info.value.attempts == 4 and info.value.reason in ("unknown_tool", "wrong_tool")


@pytest.mark.parametrize("caps", [Capabilities(), Capabilities(json_schema=True)], ids=["prompt", "constrained"])
@pytest.mark.parametrize("choice", ["required", "get_weather"])
def test_a_correction_under_a_required_call_reaches_a_valid_call(caps: Capabilities, choice: str) -> None:
    constrained = caps.json_schema
    call = '{"action": {"tool": "get_weather", "args": {"city": "Paris"}}}' if constrained else action("get_weather", city="Paris")
    bad = '{"action": {"tool": "get_weather", "args": {"town": "Paris"}}}' if constrained else "Sorry, I cannot help."
    final = '{"final": {"content": "Sunny."}}' if constrained else "Sunny."
    backend = ScriptedBackend([bad, call, final], capabilities=caps)
    result = Agent(backend, [get_weather], tool_choice=choice).run("Weather in Paris?")
    assert result.corrections == 1 and result.content == "Sunny."
    assert [c["call"]["name"] for c in result.tool_calls] == ["get_weather"]
    retry = backend.requests[1]
    assert retry.messages[-1].role == "user" and "answer" not in retry.messages[-1].content.lower()
    if constrained:  # the retry's grammar still offers the tool, and no way out but a call
        schema = json.dumps(retry.options.json_schema)
        assert "get_weather" in schema and '"final"' not in schema


def test_a_repeated_call_under_a_required_call_is_not_told_to_answer() -> None:
    """The proxy's rule (the client's tool_choice binds every request): a required call
    that repeats the last round is asked for other arguments, and keeps its tool."""
    spec = ToolRegistry([get_weather]).specs
    config = EngineConfig(tools=spec, tool_choice="required")
    call = ToolCall(id="call_0", name="get_weather", arguments={"city": "Paris"})
    history: list[Any] = [UserMessage(content="Weather in Paris?"), AssistantMessage(tool_calls=(call,)),
                          ToolMessage(result=ToolResult(call_id="call_0", content="sunny"))]
    decision = step(history, action("get_weather", city="Paris"), config)
    assert isinstance(decision, Correct) and decision.reason == "repeated_call"
    assert "different arguments" in decision.message.content and "Answer" not in decision.message.content
    history += [decision.assistant, decision.message]
    assert plan(history, config, Capabilities(json_schema=True)).tools == spec


# --- the proxy ---------------------------------------------------------------------


@pytest.fixture
def base(fake: FakeUpstream, tmp_path: Path) -> Iterator[str]:
    with proxy(upstream_backend(fake), transcripts_dir=tmp_path) as url:
        yield url


def _openai(base: str, stream: bool, **kwargs: Any) -> tuple[str, str, list[Any]]:
    with openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0, timeout=30) as c:
        args = {"model": "m", "messages": ASK, "tools": TOOLS_OPENAI, **kwargs}
        if stream:
            chunks = list(c.chat.completions.create(**args, stream=True))
            content = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
            calls = [d for ch in chunks if ch.choices for d in ch.choices[0].delta.tool_calls or []]
            return content.strip(), str(chunks[-1].choices[0].finish_reason), calls
        done = c.chat.completions.create(**args)
        return done.choices[0].message.content or "", done.choices[0].finish_reason, done.choices[0].message.tool_calls or []


def _anthropic(base: str, stream: bool, **kwargs: Any) -> tuple[str, str, list[Any]]:
    with anthropic.Anthropic(base_url=base, api_key="x", max_retries=0, timeout=30) as c:
        args = {"model": "m", "max_tokens": 256, "messages": ASK, "tools": TOOLS_ANTHROPIC, **kwargs}
        if stream:
            with c.messages.stream(**args) as events:
                message = events.get_final_message()
        else:
            message = c.messages.create(**args)
    text = "".join(b.text for b in message.content if b.type == "text")
    return text.strip(), str(message.stop_reason), [b for b in message.content if b.type == "tool_use"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("speak", [_openai, _anthropic], ids=["openai", "anthropic"])
def test_proxy_budget_spent_under_auto_answers(
    speak: Any, stream: bool, fake: FakeUpstream, base: str, tmp_path: Path
) -> None:
    fake.enqueue(*SPENT)
    content, finish, calls = speak(base, stream)
    assert (content, finish, calls) == (PROSE, "stop" if speak is _openai else "end_turn", [])
    assert len(fake.chat_requests) == 4
    [transcript] = tmp_path.glob("*.jsonl")
    final = next(e for e in read_transcript(transcript) if e["type"] == "final")
    assert final["exhausted"] is True


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_openai_budget_spent_under_required_is_a_server_error(stream: bool, fake: FakeUpstream, base: str) -> None:
    fake.enqueue(*SPENT)
    with pytest.raises(openai.InternalServerError) as info:
        _openai(base, stream, tool_choice="required")
    assert info.value.status_code == 500
    error = info.value.response.json()["error"]
    assert error["type"] == "server_error" and error["message"].startswith("no acceptable reply after 4 attempts")


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("choice", [{"type": "any"}, {"type": "tool", "name": "get_weather"}], ids=["any", "named"])
def test_anthropic_budget_spent_under_required_is_an_api_error(
    stream: bool, choice: dict[str, str], fake: FakeUpstream, base: str
) -> None:
    fake.enqueue(*SPENT)
    with pytest.raises(anthropic.InternalServerError) as info:
        _anthropic(base, stream, tool_choice=choice)
    assert info.value.status_code == 500
    body = info.value.response.json()
    assert body["type"] == "error" and body["error"]["type"] == "api_error"
    assert body["error"]["message"].startswith("no acceptable reply after 4 attempts")


#: a history of three identical rounds: a fourth identical call is a loop (a RunError)
def _looping(protocol: str) -> list[Any]:
    if protocol == "openai":
        rounds: list[Any] = []
        for i in range(3):
            call = {"id": f"c{i}", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
            rounds += [{"role": "assistant", "content": None, "tool_calls": [call]},
                       {"role": "tool", "tool_call_id": f"c{i}", "content": "sunny"}]
        return ASK + rounds
    rounds = []
    for i in range(3):
        rounds += [{"role": "assistant", "content": [{"type": "tool_use", "id": f"t{i}", "name": "get_weather", "input": {"city": "Paris"}}]},
                   {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": "sunny"}]}]
    return ASK + rounds


@pytest.mark.parametrize(("path", "protocol", "kind"), [
    ("/v1/chat/completions", "openai", "server_error"),
    ("/v1/messages", "anthropic", "api_error"),
])
def test_a_failure_after_the_first_streamed_event_is_the_protocols_error_event(
    path: str, protocol: str, kind: str, fake: FakeUpstream, base: str
) -> None:
    fake.enqueue("Checking once more.\n" + action("get_weather", city="Paris"))  # a fourth round: a loop
    tools = TOOLS_OPENAI if protocol == "openai" else TOOLS_ANTHROPIC
    body = {"model": "m", "max_tokens": 64, "messages": _looping(protocol), "tools": tools, "stream": True}
    # prose held until the reply is accepted (the default): nothing sent, the whole answer's 500
    held = httpx.post(f"{base}{path}", json=body, timeout=30)
    assert held.status_code == 500 and held.json()["error"]["type"] == kind
    fake.enqueue("Checking once more.\n" + action("get_weather", city="Paris"))
    with proxy(upstream_backend(fake), stream_prose="live") as live, httpx.stream(
        "POST", f"{live}{path}", json=body, timeout=30
    ) as response:
        assert response.status_code == 200
        text = response.read().decode()
    payloads = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: {")]
    if protocol == "openai":
        prose = "".join(p["choices"][0]["delta"].get("content") or "" for p in payloads if p.get("choices"))
    else:
        prose = "".join(p["delta"].get("text", "") for p in payloads if p.get("type") == "content_block_delta")
    assert prose.strip() == "Checking once more."  # streamed before the failure
    error = payloads[-1]["error"]
    assert error["type"] == kind and "repeated 3 times" in error["message"]
    assert "[DONE]" not in text and "message_stop" not in text


# --- a spent budget never answers with a copied <slot> ------------------------------------

def multiply(a: float, b: float) -> float:
    """Multiply two numbers."""
    return a * b


@pytest.mark.parametrize("last", ["<your answer>", '```json action\n{"tool": "multiply", "args": {"a": 12.5, "b": 4}}\n```'])
def test_a_spent_budget_without_prose_is_a_typed_failure_never_runtime_text(last: str) -> None:
    """The call is right; every answer after its result is the contract's slot (or the
    same call): the model wrote no acceptable prose, and the runtime does not write one
    for it (no "The result of multiply is 50.0."): the turn fails as a required call does."""
    call = '```json action\n{"tool": "multiply", "args": {"a": 12.5, "b": 4}}\n```'
    backend = ScriptedBackend([call, "<your answer>", "<your answer>", "<your answer>", last])
    with pytest.raises(RetryBudgetExceeded) as info:
        Agent(backend, [multiply], max_corrections=3, grounding="on").run("What is 12.5 times 4? Use the multiply tool.")
    assert info.value.attempts == 4


def test_a_spent_budget_keeps_the_models_own_prose_when_it_wrote_some() -> None:
    call = '```json action\n{"tool": "multiply", "args": {"a": 12.5, "b": 4}}\n```'
    backend = ScriptedBackend([call, "It is fifty.", "<your answer>", "<your answer>", "<your answer>"])
    result = Agent(backend, [multiply], max_corrections=3, grounding="on").run("What is 12.5 times 4? Use the multiply tool.")
    assert result.exhausted and result.content == "It is fifty."
