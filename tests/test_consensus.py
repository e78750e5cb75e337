"""Consensus after a refused reply: candidates drawn, decided by the engine, the
accepted decision most of them agree on taken; recorded, and replayed the same."""

from __future__ import annotations

import json
from pathlib import Path

from agentfsm import Agent, RunConfig
from agentfsm.backends.scripted import ScriptedBackend
from agentfsm.core.backend import Capabilities
from agentfsm.engine.consensus import choose, signature
from agentfsm.engine.decide import Answer, CallTools, Correct, EngineConfig, step
from agentfsm.core.messages import ToolCall, UserMessage
from agentfsm.dialects import get_dialect
from agentfsm.replays.compare import replay
from agentfsm.runtime.tools import ToolRegistry
from agentfsm.eval.fake_tools import TOOLS as TASK_TOOLS
from agentfsm.testing.example_tools import TOOLS

SPECS = ToolRegistry(list(TASK_TOOLS.values())).specs
SMALL = Capabilities(small_model=True)


def action(name: str, **arguments: object) -> str:
    return get_dialect("json-action").render_call(ToolCall(id="x", name=name, arguments=dict(arguments)))


def decide(reply: str, request: str = "How many miles is 42 km?") -> CallTools | Correct | Answer:
    config = EngineConfig.of(RunConfig(), SPECS, capabilities=SMALL)
    decision = step([UserMessage(content=request)], reply, config)
    assert not isinstance(decision, Correct) or decision.reason
    return decision  # type: ignore[return-value]


def test_only_accepted_decisions_vote_and_calls_vote_by_what_they_do() -> None:
    made_up = decide(action("multiply", a=1, b=2))  # no value from the request: refused
    assert isinstance(made_up, Correct) and signature(made_up) is None
    a = decide(action("convert_km_to_miles", km=42))
    b = decide(action("convert_km_to_miles", km=42.0))  # the same number
    c = decide(action("multiply", a=42, b=1.61), "Multiply 42 by 1.61.")
    assert signature(a) == signature(b) != signature(c)
    chosen = choose([made_up, c, a, b])
    assert chosen is not None and (chosen.index, chosen.votes, chosen.voters) == (2, 2, 3)
    assert choose([made_up, made_up]) is None


def test_among_agreeing_calls_the_one_with_the_users_words_as_written_is_taken() -> None:
    request = "What's the weather like in Example City?"
    squeezed = decide(action("get_weather", city="Example_City"), request)
    written = decide(action("get_weather", city="Example City"), request)
    assert signature(squeezed) == signature(written)
    chosen = choose([squeezed, written], conversation=request.lower())
    assert chosen is not None and chosen.index == 1


def test_answers_vote_together() -> None:
    hello = decide('{"final": {"content": "Hello!"}}', "Hello there")
    hi = decide('{"final": {"content": "Hi, how can I help?"}}', "Hello there")
    call = decide(action("get_weather", city="there"), "Hello there")
    chosen = choose([call, hello, hi])
    assert chosen is not None and chosen.signature == "answer" and chosen.index == 1


def _agent(backend: ScriptedBackend, transcript: Path, **settings: object) -> Agent:
    """An agent with consensus at ``auto`` (on for a small model) unless ``settings`` say otherwise."""
    return Agent(backend, TOOLS, transcript=transcript, **{"consensus": "auto", **settings})  # type: ignore[arg-type]


def test_a_refused_call_is_outvoted_by_the_candidates_and_the_run_replays(tmp_path: Path) -> None:
    replies = [
        action("multiply", a=1, b=2),  # greedy: made up, refused by grounding
        action("add", a=42, b=0.1),  # not offered here: refused
        action("convert_km_to_miles", km=42),
        '{"final": {"content": "About 26 miles."}}',
        action("convert_km_to_miles", km=42),
        action("multiply", a=3, b=3),  # refused
        action("convert_km_to_miles", km=42.0),
        '{"final": {"content": "42 km is 26.1 miles."}}',  # after the result
    ]
    backend = ScriptedBackend(replies, capabilities=SMALL)
    path = tmp_path / "run.jsonl"
    result = _agent(backend, path).run("How many miles is 42 km?")
    assert [c["call"]["name"] for c in result.tool_calls] == ["convert_km_to_miles"]
    assert "26.1" in result.content
    events = [json.loads(line) for line in path.read_text().splitlines()]
    candidates = [e for e in events if e["type"] == "model_output" and e.get("candidate")]
    assert [e["candidate"] for e in candidates] == [1, 2, 3, 4, 5, 6]
    verdict = next(e for e in events if e["type"] == "guard" and e["guard"] == "consensus")
    assert verdict["verdict"] == "accept" and "3 of 4 accepted candidates (6 drawn)" in verdict["detail"]
    assert not any(e["type"] == "retry" for e in events)  # no correction was needed
    # sampled: temperature and distinct seeds; the run's own settings recorded
    requests = [e for e in events if e["type"] == "model_request" and e.get("candidate")]
    assert {r["options"]["temperature"] for r in requests} == {0.8}
    assert len({r["options"]["seed"] for r in requests}) == 6
    start = next(e for e in events if e["type"] == "run_start")
    assert start["config"]["consensus"] == 6
    assert replay(path).identical


def test_no_candidate_accepted_falls_back_to_the_correction(tmp_path: Path) -> None:
    made_up = action("multiply", a=1, b=2)
    replies = [made_up] * 7 + ['{"final": {"content": "I need the numbers."}}']
    backend = ScriptedBackend(replies, capabilities=SMALL)
    path = tmp_path / "run.jsonl"
    result = _agent(backend, path, consensus_samples=6).run("Hello! How are you?")
    assert result.tool_calls == []
    events = [json.loads(line) for line in path.read_text().splitlines()]
    assert any(e["type"] == "guard" and e["reason"] == "no_consensus" for e in events)
    assert any(e["type"] == "retry" and e["reason"] in ("ungrounded_call", "missing_value") for e in events)
    assert replay(path).identical


def test_consensus_is_off_by_default_for_a_capable_model_and_when_asked(tmp_path: Path) -> None:
    made_up = action("multiply", a=1, b=2)
    cases = (
        (SMALL, {"consensus": "off"}),
        (Capabilities(), {"grounding": "on"}),  # auto: off for a capable model
    )
    for capabilities, settings in cases:
        backend = ScriptedBackend([made_up, '{"final": {"content": "Hi!"}}'], capabilities=capabilities)
        path = tmp_path / f"run-{len(settings)}-{capabilities.small_model}.jsonl"
        _agent(backend, path, **settings).run("Hello! How are you?")
        assert backend.remaining == 0 and len(backend.requests) == 2  # no candidates drawn
    # the default: off, on the embedded (small) model too
    backend = ScriptedBackend([made_up, '{"final": {"content": "Hi!"}}'], capabilities=SMALL)
    Agent(backend, TOOLS).run("Hello! How are you?")
    assert backend.remaining == 0 and len(backend.requests) == 2
    assert RunConfig().consensus == "off"


def test_drawing_stops_once_the_vote_cannot_change() -> None:
    """settled: the leader ahead by more than the candidates left, and one of its group
    with every string as written; otherwise drawing goes on."""
    from agentfsm.engine.consensus import settled

    request = "What's the weather like in Example City?"
    written = decide(action("get_weather", city="Example City"), request)
    squeezed = decide(action("get_weather", city="Example_City"), request)
    refused = decide(action("multiply", a=1, b=2), request)
    conversation = request.lower()
    assert settled([refused, written, written, written], 2, conversation)  # 3 > 0 + 2
    assert not settled([refused, written, written, written], 3, conversation)  # 3 more could tie
    assert not settled([refused, squeezed, squeezed, squeezed], 2, conversation)  # one may copy it as written
    assert settled([refused, squeezed, written, squeezed], 2, conversation)
    assert not settled([refused, refused], 0, conversation)  # nothing accepted: nothing to keep
    hello = decide('{"final": {"content": "Hello!"}}', "Hello there")
    assert settled([hello, hello, hello], 2) and not settled([hello, hello], 2)


def test_a_unanimous_draw_stops_early_and_replays(tmp_path: Path) -> None:
    convert = action("convert_km_to_miles", km=42)
    replies = [action("multiply", a=1, b=2)] + [convert] * 4 + ['{"final": {"content": "42 km is 26.1 miles."}}']
    backend = ScriptedBackend(replies, capabilities=SMALL)
    path = tmp_path / "run.jsonl"
    result = _agent(backend, path).run("How many miles is 42 km?")
    assert [c["call"]["name"] for c in result.tool_calls] == ["convert_km_to_miles"]
    events = [json.loads(line) for line in path.read_text().splitlines()]
    drawn = [e["candidate"] for e in events if e["type"] == "model_output" and e.get("candidate")]
    assert drawn == [1, 2, 3, 4]  # 4 of 6: after the 4th, 2 more could not outvote 4
    verdict = next(e for e in events if e["type"] == "guard" and e["guard"] == "consensus")
    assert "4 of 4 accepted candidates (4 drawn)" in verdict["detail"]
    assert replay(path).identical
