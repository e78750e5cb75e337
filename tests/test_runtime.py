"""The agent loop, driven by the scripted backend: the seed's testing checklist (§6) and
whole-transcript snapshots of the main scenarios."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from syrupy.assertion import SnapshotAssertion

from agentfsm.prompt.enforcement import NO_SLOT
from agentfsm import Agent
from agentfsm.core.backend import Capabilities
from agentfsm.backends.scripted import ScriptedBackend
from agentfsm.engine.consensus import TEMPERATURE
from agentfsm.core.errors import LoopDetected, MaxStepsExceeded, RetryBudgetExceeded, UsageError
from agentfsm.testing.example_tools import calculate, convert_units
from agentfsm.core.messages import AssistantMessage, ToolMessage
from agentfsm.runtime.transcript import read_transcript

TOOLS = [calculate, convert_units]


def act(tool: str, **args: Any) -> str:
    return "```json action\n" + json.dumps({"tool": tool, "args": args}) + "\n```"


def fail_tool(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(reason)


def normalise(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Drop what changes between runs (time, run id) and the bulky prompt text."""
    out = []
    for e in events:
        e = {k: v for k, v in e.items() if k not in ("t", "run")}
        if e["type"] == "contract":
            e.pop("text")
        if e["type"] == "model_request":
            e["messages"] = len(e["messages"])
        out.append(e)
    return out


SCENARIOS: dict[str, tuple[list[str], dict[str, Any]]] = {
    "single_call": ([act("calculate", expression="2 + 2"), "The answer is 4."], {}),
    "invalid_json_resend": (
        ["```json action\n{\"tool\": \"calculate\", \"args\": {\"expression\": \"2+2\"\n```", act("calculate", expression="2+2"), "It is 4."],
        {},
    ),
    "unknown_tool_rejected": ([act("weather", city="Paris"), act("calculate", expression="1+1"), "2."], {}),
    "schema_mismatch_corrected": (
        [act("convert_units", value="ten", from_unit="km", to_unit="mi"), act("convert_units", value=10, from_unit="km", to_unit="mi"), "About 6.2 miles."],
        {},
    ),
    "multi_step": (
        [act("calculate", expression="12.5 * 4"), act("convert_units", value=50, from_unit="km", to_unit="mi"), "50 km is about 31.07 miles."],
        {},
    ),
    "refusal_retry_call": (
        ["I'm sorry, but I don't have access to any tools.", act("calculate", expression="3*3"), "9."],
        {"tool_choice": "required"},
    ),
    "prose_answer_not_retried": (["Paris is the capital of France."], {}),
    "parallel_calls": (
        [act("calculate", expression="1+1") + "\nand\n" + act("calculate", expression="2+2"), "2 and 4."],
        {},
    ),
    "tool_error_result": ([act("fail_tool", reason="disk full"), "The tool failed: disk full."], {"extra_tools": [fail_tool]}),
    "tool_choice_none_corrects_calls": (
        ["Sure. " + act("calculate", expression="1+1"), "1 + 1 is 2."], {"tool_choice": "none"}
    ),
}


def run_scenario(name: str, tmp_path: Path) -> tuple[Any, Path, ScriptedBackend]:
    replies, opts = SCENARIOS[name]
    opts = dict(opts)
    tools = TOOLS + opts.pop("extra_tools", [])
    backend = ScriptedBackend(replies)
    path = tmp_path / f"{name}.jsonl"
    agent = Agent(backend, tools, transcript=path, **opts)
    return agent.run("question"), path, backend


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_transcript_snapshots(name: str, tmp_path: Path, snapshot: SnapshotAssertion) -> None:
    _, path, backend = run_scenario(name, tmp_path)
    assert backend.remaining == 0, "every scripted reply was consumed"
    assert normalise(read_transcript(path)) == snapshot


def test_invalid_json_is_answered_with_resend_and_position(tmp_path: Path) -> None:
    result, path, _ = run_scenario("invalid_json_resend", tmp_path)
    retry = [e for e in read_transcript(path) if e["type"] == "retry"]
    assert retry[0]["reason"] == "invalid_json"
    assert "JSON" in retry[0]["message"]
    assert result.corrections == 1 and result.content == "It is 4."


def test_unknown_tool_correction_lists_offered_names(tmp_path: Path) -> None:
    _, path, _ = run_scenario("unknown_tool_rejected", tmp_path)
    retry = next(e for e in read_transcript(path) if e["type"] == "retry")
    assert retry["reason"] == "unknown_tool"
    assert "calculate" in retry["message"] and "convert_units" in retry["message"]


def test_schema_mismatch_quotes_path_and_schema(tmp_path: Path) -> None:
    result, path, _ = run_scenario("schema_mismatch_corrected", tmp_path)
    retry = next(e for e in read_transcript(path) if e["type"] == "retry")
    assert retry["reason"] == "schema_mismatch"
    assert "value" in retry["message"] and "number" in retry["message"]
    assert result.tool_calls[0]["result"]["content"] == "6.2137"


def test_multi_step_consumes_each_result_next_turn(tmp_path: Path) -> None:
    result, _, backend = run_scenario("multi_step", tmp_path)
    # the second model request carries the first result, framed as a continuation
    second_prompt = backend.requests[1].messages[-1].content
    assert "50.0" in second_prompt
    assert result.path == [
        "first-decision", "tool-emitted", "awaiting-result", "result-received",
        "tool-emitted", "awaiting-result", "result-received", "final",
    ]
    tools = [m for m in result.messages if isinstance(m, ToolMessage)]
    assert [t.result.content for t in tools] == ["50.0", "31.0686"]


def test_refusal_is_retried_into_a_call(tmp_path: Path) -> None:
    result, path, _ = run_scenario("refusal_retry_call", tmp_path)
    retry = next(e for e in read_transcript(path) if e["type"] == "retry")
    assert retry["reason"] == "refusal"
    assert result.content == "9."


def test_prose_answer_under_auto_is_not_retried(tmp_path: Path) -> None:
    result, _, backend = run_scenario("prose_answer_not_retried", tmp_path)
    assert result.corrections == 0 and len(backend.requests) == 1
    assert result.path == ["first-decision", "final"]


def test_parallel_false_keeps_first_call() -> None:
    backend = ScriptedBackend([act("calculate", expression="1+1") + act("calculate", expression="2+2"), "done"])
    result = Agent(backend, TOOLS, parallel=False).run("q")
    assert len(result.tool_calls) == 1


def test_budget_exhausted_is_a_typed_error_with_attempts(tmp_path: Path) -> None:
    backend = ScriptedBackend(["I cannot use tools."] * 4)
    path = tmp_path / "t.jsonl"
    with pytest.raises(RetryBudgetExceeded) as info:
        Agent(backend, TOOLS, tool_choice="required", max_corrections=3, transcript=path).run("q")
    assert info.value.attempts == 4
    assert info.value.last_reply == "I cannot use tools."
    events = read_transcript(path)
    assert events[-1]["type"] == "run_end" and events[-1]["status"] == "error"
    assert [e["attempt"] for e in events if e["type"] == "retry"] == [1, 2, 3]
    # each retry is stricter than the one before
    msgs = [e["message"] for e in events if e["type"] == "retry"]
    assert len(set(msgs)) == 3


def test_loop_is_stopped_with_a_clear_final_state(tmp_path: Path) -> None:
    backend = ScriptedBackend([act("calculate", expression="1+1")] * 10)
    path = tmp_path / "t.jsonl"
    with pytest.raises(LoopDetected):
        Agent(backend, TOOLS, transcript=path, loop_threshold=3).run("q")
    transitions = [e for e in read_transcript(path) if e["type"] == "transition"]
    assert transitions[-1]["event"] == "abort" and transitions[-1]["to"] == "final"


def test_loop_detected_names_the_call_that_loops() -> None:
    """The looping call need not be the first of its reply: the error names the one that loops."""
    replies = [act("calculate", expression=f"{i}+1") + "\n" + act("convert_units", value=1, from_unit="km", to_unit="m")
               for i in range(10)]
    with pytest.raises(LoopDetected) as info:
        Agent(ScriptedBackend(replies), TOOLS, loop_threshold=3).run("q")
    assert info.value.tool == "convert_units" and info.value.repeats == 3


def test_max_steps() -> None:
    replies = [act("calculate", expression=f"{i}+1") for i in range(5)]
    with pytest.raises(MaxStepsExceeded, match="max_steps=3"):
        Agent(ScriptedBackend(replies), TOOLS, max_steps=3).run("q")
    # the limit also binds inside a turn of corrections
    with pytest.raises(MaxStepsExceeded, match="max_steps=2"):
        Agent(ScriptedBackend(["no tools here"] * 5), TOOLS, tool_choice="required", max_steps=2).run("q")


def test_tool_exception_becomes_error_result(tmp_path: Path) -> None:
    result, _, _ = run_scenario("tool_error_result", tmp_path)
    assert result.tool_calls[0]["result"]["status"] == "error"
    assert "disk full" in result.tool_calls[0]["result"]["content"]


def test_async_run_and_history_input() -> None:
    backend = ScriptedBackend([act("calculate", expression="6*7"), "42"])
    agent = Agent(backend, TOOLS)
    result = asyncio.run(agent.arun("q"))
    assert result.content == "42"
    # a later turn continues from the returned history
    backend.enqueue("Still 42.")
    from agentfsm.core.messages import UserMessage

    again = agent.run([*result.messages, UserMessage(content="and now?")])
    assert again.content == "Still 42."
    assert isinstance(again.messages[-1], AssistantMessage)


@pytest.mark.parametrize(
    ("caps", "choice", "level"),
    [
        (Capabilities(json_schema=True, prefill=True), "auto", "constrained"),
        (Capabilities(prefill=True), "required", "prefill"),
        (Capabilities(), "auto", "prompt"),
    ],
)
def test_enforcement_level_reaches_the_backend(caps: Capabilities, choice: str, level: str, tmp_path: Path) -> None:
    reply = '{"action": {"tool": "calculate", "args": {"expression": "1+1"}}}' if level == "constrained" else act("calculate", expression="1+1")
    backend = ScriptedBackend([reply, '{"final": {"content": "2"}}' if level == "constrained" else "2"], capabilities=caps)
    path = tmp_path / "t.jsonl"
    result = Agent(backend, TOOLS, tool_choice=choice, transcript=path).run("q")
    assert result.content == "2"
    first = backend.requests[0].options
    assert (first.json_schema is not None) == (level == "constrained")
    assert (first.prefill is not None) == (level == "prefill")
    assert [e["enforcement"] for e in read_transcript(path) if e["type"] == "model_request"][0] == level


def test_bad_configuration_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        Agent(ScriptedBackend([]), TOOLS, dialect="yaml")
    with pytest.raises(UsageError):
        Agent(ScriptedBackend([]), TOOLS, max_steps=0)


def test_repeated_call_is_corrected_once_and_the_retry_grammar_drops_called_tools(tmp_path: Path) -> None:
    call = '{"action": {"tool": "calculate", "args": {"expression": "1+1"}}}'
    backend = ScriptedBackend(
        [call, call, '{"final": {"content": "2"}}'], capabilities=Capabilities(json_schema=True)
    )
    path = tmp_path / "t.jsonl"
    result = Agent(backend, TOOLS, transcript=path).run("q")
    assert result.content == "2"
    retry = next(e for e in read_transcript(path) if e["type"] == "retry")
    assert retry["reason"] == "repeated_call" and "2.0" in retry["message"]
    # the retry's schema offers no tool already called this turn: only convert_units and final
    schema = backend.requests[2].options.json_schema
    assert schema is not None
    assert "calculate" not in json.dumps(schema) and "convert_units" in json.dumps(schema)
    assert "calculate" in json.dumps(backend.requests[1].options.json_schema)


def test_a_reply_refused_twice_word_for_word_is_retried_at_a_temperature(tmp_path: Path) -> None:
    """Greedy decoding writes a refused reply again after its correction; once it has,
    the next attempt is drawn at the consensus temperature (seeded: a run repeats)."""
    unknown = '{"action": {"tool": "weather", "args": {"city": "Oslo"}}}'
    backend = ScriptedBackend([unknown, unknown, '{"final": {"content": "hello"}}'],
                              capabilities=Capabilities(json_schema=True))
    result = Agent(backend, TOOLS, grounding="on", consensus="off").run("Say hello.")
    assert result.content == "hello"
    temperatures = [r.options.temperature for r in backend.requests]
    assert temperatures == [0.0, 0.0, TEMPERATURE]
    assert backend.requests[2].options.seed != backend.requests[0].options.seed


@pytest.mark.parametrize("grounding", ["on", "off"])
def test_after_a_copied_slot_the_grammar_answer_cannot_begin_with_one(grounding: str) -> None:
    """``<your answer>`` is the format line's slot copied by greedy decoding, which writes
    it again after its correction, at a temperature too (two slots spent a one-call
    task's last corrections): once one is refused, the rest of the round's grammar holds
    the answer's text to one that does not begin with ``<``."""
    template = '{"final": {"content": "<your answer>"}}'
    backend = ScriptedBackend([template, '{"final": {"content": "hello"}}'],
                              capabilities=Capabilities(json_schema=True))
    result = Agent(backend, TOOLS, grounding=grounding, consensus="off").run("Say hello.")
    assert result.content == "hello"
    first, retry = (json.dumps(r.options.json_schema) for r in backend.requests)
    assert "pattern" not in first
    assert json.dumps(NO_SLOT) in retry
    assert [r.options.temperature for r in backend.requests] == [0.0, 0.0]


@pytest.mark.parametrize("caps", [Capabilities(), Capabilities(json_schema=True)])
def test_the_recorded_contract_is_the_one_sent(caps: Capabilities, tmp_path: Path) -> None:
    reply = '{"final": {"content": "hi"}}' if caps.json_schema else "hi"
    path = tmp_path / "t.jsonl"
    Agent(ScriptedBackend([reply], capabilities=caps), TOOLS, transcript=path).run("q")
    events = read_transcript(path)
    contract = next(e for e in events if e["type"] == "contract")["text"]
    system = next(e for e in events if e["type"] == "model_request")["messages"][0]["content"]
    assert system == contract


def test_an_empty_conversation_is_a_usage_error_before_any_model_call() -> None:
    backend = ScriptedBackend(["hi"])
    with pytest.raises(UsageError, match="the conversation is empty"):
        Agent(backend).run([])
    assert backend.requests == []


@pytest.mark.parametrize(
    "broken",
    [
        '{"action": {"tool": "calculate", "args": {"expression": <expression>}}}',  # the template echoed
        '{"tool": "calculate", "parameters": {"expression": 2+2}}',  # an unquoted expression
        '{"action": {"tool": "calculate", "args": {"expression": 2+2}}}',
    ],
)
def test_a_bare_action_that_cannot_be_read_is_asked_again_not_answered(broken: str) -> None:
    """A bare JSON action the parser cannot read (a placeholder where a value goes, an
    expression unquoted) is a broken action: the model is asked again, and its raw text
    never becomes the answer (before, it reached the user as the reply)."""
    backend = ScriptedBackend(
        [broken, '{"action": {"tool": "calculate", "args": {"expression": "2+2"}}}', '{"final": {"content": "It is 4."}}'],
    )
    result = Agent(backend, TOOLS, dialect="json-protocol").run("What is 2+2?")
    assert result.content == "It is 4."
    assert [c["call"]["arguments"] for c in result.tool_calls] == [{"expression": "2+2"}]
    assert result.corrections == 1


def test_calls_sharing_an_id_with_one_result_are_named_not_reported_as_a_missing_result() -> None:
    """A library user's history whose reply gives two calls one id, with one result: the
    result answers one of them, and the error says the id is shared (it said only that c1
    had no result yet, beside c1's result). The proxy refuses such a history up front."""
    from agentfsm.core.errors import NothingToDecide
    from agentfsm.core.messages import ToolCall, ToolResult, UserMessage
    from agentfsm.core.states import shared_ids

    calls = tuple(ToolCall(id="c1", name="calculate", arguments={"expression": e}) for e in ("2+2", "3+3"))
    history = [UserMessage(content="2+2 and 3+3?"), AssistantMessage(content=None, tool_calls=calls),
               ToolMessage(result=ToolResult(call_id="c1", content="4", name="calculate"))]
    backend = ScriptedBackend(['{"final": {"content": "4 and 6"}}'])
    with pytest.raises(NothingToDecide, match=r"no result yet \(c1; 'c1' is the id of 2 calls of one reply\): give each call"):
        Agent(backend, TOOLS, dialect="json-protocol").run(history)
    assert backend.requests == []  # refused before any model call
    # the wire's dict shape reads the same
    wire = [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "calculate", "arguments": "{}"}}] * 3}]
    assert shared_ids(wire, ("c1",)) == {"c1": 3}
    assert shared_ids(history, ("c2",)) == {}
