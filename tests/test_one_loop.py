"""One loop: the same scripted replies decide the same way through every runner.

The agent, the proxy (OpenAI and Anthropic, streamed and not, driven by the official
SDKs), batch and eval all run :func:`agentfsm.runtime.turn.stream_turn`; each scenario
below feeds them the same model replies and checks that the first decision (the calls,
or the answer) is the same everywhere, and that a streamed response carries what the
whole response carries (content, calls, finish reason, completion tokens).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from agentfsm import Agent
from agentfsm.backends import ScriptedBackend
from agentfsm.batch.controller import run_batch_sync
from agentfsm.core.backend import Capabilities, GenerationOptions
from agentfsm.dialects import get_dialect
from agentfsm.core.messages import ToolCall
from agentfsm.eval.bfcl_data import BfclCase
from agentfsm.eval.runner import RunSpec, run_runtime_case
from agentfsm.runtime.tools import ToolRegistry
from agentfsm.testing.example_tools import TOOLS
from tests._proxy import proxy

QUESTION = "What is 2 times 3, and how far is 5 km in miles?"
SPECS = ToolRegistry(TOOLS).specs
TOOLS_OPENAI: list[Any] = [
    {"type": "function", "function": {"name": s.name, "description": s.description, "parameters": s.parameters}}
    for s in SPECS
]
TOOLS_ANTHROPIC: list[Any] = [{"name": s.name, "description": s.description, "input_schema": s.parameters} for s in SPECS]
CONSTRAINED = Capabilities(json_schema=True, list_continuation=True)

Decision = tuple[str, Any]


def act(name: str, **args: Any) -> str:
    return get_dialect("json-action").render_call(ToolCall(id="x", name=name, arguments=args))


def listed(name: str, **args: Any) -> str:
    return json.dumps({"action": {"tool": name, "args": args}})


@dataclass(frozen=True)
class Scenario:
    name: str
    replies: tuple[str, ...]
    decision: Decision
    #: the reply that ends an agent run after the first round of calls (it states the
    #: results: an answer that does not is corrected, see policy/grounding.py)
    after: str = "2 times 3 is 6.0, and 5 km is 3.11 miles."
    capabilities: Capabilities = Capabilities()


CALC = ("multiply", {"a": 2, "b": 3})
MILES = ("convert_km_to_miles", {"km": 5})
SCENARIOS = [
    Scenario("one-call", ("Let me compute that.\n" + act("multiply", a=2, b=3),), ("calls", [CALC])),
    Scenario(
        "two-calls-in-one-reply",
        (act("multiply", a=2, b=3) + "\n" + act("convert_km_to_miles", km=5),),
        ("calls", [CALC, MILES]),
    ),
    Scenario("correction-then-call", (act("nope", x=1), act("multiply", a=2, b=3)), ("calls", [CALC])),
    # the refused reply's prose is no part of the answer, streamed or not
    Scenario("refused-prose-then-call", ("Let me look that up.\n" + act("nope", x=1), act("multiply", a=2, b=3)),
             ("calls", [CALC])),
    Scenario("answer", ("Five, and about 3.1 miles.",), ("answer", "Five, and about 3.1 miles.")),
    # the extension step (parallel calls by list continuation) runs streamed or not
    Scenario(
        "constrained-extension",
        (listed("multiply", a=2, b=3), ', {"tool": "multiply", "args": {"a": 5, "b": 2}}]}'),
        ("calls", [CALC, ("multiply", {"a": 5, "b": 2})]),
        after='{"final": {"content": "6.0 and 10.0"}}',
        capabilities=CONSTRAINED,
    ),
    # under auto a spent budget ends with the best prose so far, never the rejected call
    Scenario(
        "budget-spent-auto",
        (act("nope"), act("nope"), act("nope"), "I found no tool for that.\n" + act("nope")),
        ("answer", "I found no tool for that."),
    ),
]


@pytest.fixture(scope="module")
def proxies() -> Iterator[dict[Capabilities, tuple[ScriptedBackend, str]]]:
    plain, constrained = ScriptedBackend([]), ScriptedBackend([], capabilities=CONSTRAINED)
    with proxy(plain) as a, proxy(constrained) as b:
        yield {Capabilities(): (plain, a), CONSTRAINED: (constrained, b)}


def _calls_of(rows: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    return [(r["call"]["name"], r["call"]["arguments"]) for r in rows]


def _agent(s: Scenario, tmp_path: Path) -> Decision:
    backend = ScriptedBackend([*s.replies, s.after], capabilities=s.capabilities)
    result = Agent(backend, TOOLS, transcript=tmp_path / "agent.jsonl").run(QUESTION)
    if result.tool_calls:
        return ("calls", _calls_of(result.tool_calls))
    return ("answer", result.content)


def _batch(s: Scenario, tmp_path: Path) -> Decision:
    out = tmp_path / "batch.jsonl"
    backend = ScriptedBackend([*s.replies, s.after], capabilities=s.capabilities)
    stats = run_batch_sync([{"id": "q", "prompt": QUESTION}], output=out, backend=backend,
                           tools_module="agentfsm.testing.example_tools")
    assert stats.ok == 1
    [row] = [json.loads(line) for line in out.read_text().splitlines()]
    if row["tool_calls"]:
        return ("calls", _calls_of(row["tool_calls"]))
    return ("answer", row["content"])


def _eval(s: Scenario) -> list[tuple[str, Any]]:
    case = BfclCase(id="q", category="irrelevance", messages=({"role": "user", "content": QUESTION},),
                    functions=(), ground_truth=None, tools=SPECS)
    backend = ScriptedBackend(list(s.replies), capabilities=s.capabilities)
    result = asyncio.run(run_runtime_case(backend, case, RunSpec("json-action", "auto"), GenerationOptions()))
    return [next(iter(item.items())) for item in result.decoded or []]


def _openai(base: str, stream: bool) -> tuple[Decision, dict[str, Any]]:
    with openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0, timeout=30) as client:
        args: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": QUESTION}], "tools": TOOLS_OPENAI}
        if not stream:
            done = client.chat.completions.create(**args)
            message, finish = done.choices[0].message, done.choices[0].finish_reason
            assert done.usage is not None
            content, tokens = message.content, done.usage.completion_tokens
            calls = [(c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls or []]
        else:
            chunks = list(client.chat.completions.create(**args, stream=True, stream_options={"include_usage": True}))
            content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) or None
            finish = next(c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason)
            usage = chunks[-1].usage
            assert usage is not None
            tokens = usage.completion_tokens
            by_index: dict[int, list[Any]] = {}
            for c in chunks:
                for d in (c.choices[0].delta.tool_calls or []) if c.choices else []:
                    entry = by_index.setdefault(d.index, ["", ""])
                    entry[0] += (d.function.name or "") if d.function else ""
                    entry[1] += (d.function.arguments or "") if d.function else ""
            calls = [(name, json.loads(arguments)) for name, arguments in by_index.values()]
    decision: Decision = ("calls", calls) if calls else ("answer", (content or "").strip())
    return decision, {"content": (content or "").strip(), "calls": calls, "finish": finish, "tokens": tokens}


def _anthropic(base: str, stream: bool) -> tuple[Decision, dict[str, Any]]:
    with anthropic.Anthropic(base_url=base, api_key="x", max_retries=0, timeout=30) as client:
        args: dict[str, Any] = {"model": "m", "max_tokens": 256, "tools": TOOLS_ANTHROPIC,
                                "messages": [{"role": "user", "content": QUESTION}]}
        if stream:
            with client.messages.stream(**args) as events:
                message = events.get_final_message()
        else:
            message = client.messages.create(**args)
    content = "".join(b.text for b in message.content if b.type == "text")
    calls = [(b.name, b.input) for b in message.content if b.type == "tool_use"]
    decision: Decision = ("calls", calls) if calls else ("answer", (content or "").strip())
    wire = {"content": content.strip(), "calls": calls, "finish": message.stop_reason,
            "tokens": message.usage.output_tokens}
    return decision, wire


@pytest.mark.parametrize("s", SCENARIOS, ids=lambda s: s.name)
def test_every_runner_decides_the_same(
    s: Scenario, tmp_path: Path, proxies: dict[Capabilities, tuple[ScriptedBackend, str]]
) -> None:
    assert _agent(s, tmp_path) == s.decision
    assert _batch(s, tmp_path) == s.decision
    if not s.name.startswith("budget"):  # eval scores a spent budget as no valid reply
        assert _eval(s) == (s.decision[1] if s.decision[0] == "calls" else [])
    backend, base = proxies[s.capabilities]
    for speak in (_openai, _anthropic):
        wires = []
        for stream in (False, True):
            backend.enqueue(*s.replies)
            decision, wire = speak(base, stream)
            assert backend.remaining == 0, (speak.__name__, stream)
            assert decision == s.decision, (speak.__name__, stream)
            wires.append(wire)
        assert wires[0] == wires[1], speak.__name__


_CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TWO_TOOLS: list[Any] = [
    {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city.", "parameters": _CITY}},
    {"type": "function", "function": {"name": "get_time", "description": "The local time in a city.", "parameters": _CITY}},
]


@pytest.mark.model
def test_embedded_model_streamed_and_whole_make_the_same_calls() -> None:
    """Same request, temperature 0: the streamed response carries the calls the whole one does
    (before the one loop, streaming skipped the extension step and made one call, not two)."""
    from agentfsm.backends import create_backend

    ask = [{"role": "user", "content": "What's the weather in Lima and in Cairo?"}]
    with proxy(create_backend("local"), request_timeout=300) as base:
        with openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0, timeout=300) as client:
            args: dict[str, Any] = {"model": "m", "messages": ask, "tools": TWO_TOOLS, "temperature": 0, "max_tokens": 128}
            whole = client.chat.completions.create(**args).choices[0].message
            calls = [(c.function.name, json.loads(c.function.arguments)) for c in whole.tool_calls or []]
            by_index: dict[int, list[str]] = {}
            for chunk in client.chat.completions.create(**args, stream=True):
                for d in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
                    entry = by_index.setdefault(d.index, ["", ""])
                    entry[0] += (d.function.name or "") if d.function else ""
                    entry[1] += (d.function.arguments or "") if d.function else ""
    streamed = [(name, json.loads(arguments)) for name, arguments in by_index.values()]
    assert streamed == calls
    assert calls, "the embedded model made no call for a request that needs one"
