"""End to end on the real embedded model (SmolLM2-135M, temperature 0, fixed seed),
through each enforcement level: the outcome is always protocol-valid — a final answer
after valid calls, corrections, or a typed error — never a crash."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentfsm import Agent, RunError
from agentfsm.core.backend import GenerationOptions
from agentfsm.backends.local import get_local_backend
from agentfsm.testing.example_tools import TOOLS
from agentfsm.core.states import State
from agentfsm.runtime.transcript import read_transcript

pytestmark = pytest.mark.model

VALID_STATES = {s.value for s in State}


@pytest.mark.parametrize(
    ("enforcement", "tool_choice"),
    [("prompt", "auto"), ("prefill", "required"), ("constrained", "auto"), ("constrained", "required")],
)
def test_every_enforcement_level_ends_protocol_valid(enforcement: str, tool_choice: str, tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    agent = Agent(
        get_local_backend(),
        TOOLS,
        enforcement=enforcement,
        tool_choice=tool_choice,
        max_steps=3,
        options=GenerationOptions(max_tokens=96, temperature=0.0, seed=0),
        transcript=path,
    )
    try:
        result = agent.run("Convert 10 km to mi.")
    except RunError as exc:  # budget, loop or max steps: typed, and recorded
        outcome = type(exc).__name__
    else:
        outcome = "final"
        assert result.path[0] == "first-decision" and result.path[-1] == "final"
    events = read_transcript(path)
    assert events[-1]["type"] == "run_end"
    assert events[-1]["status"] == ("final" if outcome == "final" else "error")
    levels = {e["enforcement"] for e in events if e["type"] == "model_request"}
    assert levels == {enforcement}
    for e in events:
        if e["type"] == "transition":
            assert {e["from"], e["to"]} <= VALID_STATES
        if e["type"] == "tool_call":  # every call that ran names an offered tool, with object args
            assert e["call"]["name"] in {"multiply", "convert_km_to_miles"}
            assert isinstance(e["call"]["arguments"], dict)
    if enforcement == "constrained":
        # decoding is held to the action schema: every output is one JSON object; an
        # extension step continues its open list, which ends at the first repeat of its
        # first call (a stop string) or at its token bound: its complete items count
        for e in events:
            if e["type"] != "model_output":
                continue
            if e.get("extension"):
                assert e["text"].startswith('{"action": [') and e["finish_reason"] in ("stop", "length")
            else:
                assert isinstance(json.loads(e["text"]), dict)


def test_the_demo_task_runs_to_an_answer(tmp_path: Path) -> None:
    """What `make demo` runs: two tool calls, then an answer, on the default settings."""
    path = tmp_path / "demo.jsonl"
    result = Agent(get_local_backend(), TOOLS, transcript=path).run(
        "Multiply 12.5 by 4, then convert the result from km to miles."
    )
    assert result.path[-1] == "final"
    assert result.tool_calls, "the demo task is answered through tool calls"
    assert {c["call"]["name"] for c in result.tool_calls} <= {"multiply", "convert_km_to_miles"}


def test_two_cities_in_german_are_both_called(tmp_path: Path) -> None:
    """The parallel list's second city is a copy of the request's word ("Tokio"), not a
    garbled one the guards refuse (the model alone writes "Tko")."""
    def get_weather(city: str) -> str:
        """The current weather in a city."""
        return {"paris": "sunny, 18 °C", "tokio": "cloudy, 22 °C"}.get(city.lower(), "unknown")

    path = tmp_path / "run.jsonl"
    result = Agent(get_local_backend(), [get_weather], transcript=path).run("Wie ist das Wetter in Paris und in Tokio?")
    assert [c["call"]["arguments"]["city"] for c in result.tool_calls][:2] == ["Paris", "Tokio"]
    extension = [e for e in read_transcript(path) if e["type"] == "model_request" and e.get("extension")]
    city = extension[0]["options"]["list_continuation"]["item_schema"]["properties"]["args"]["properties"]["city"]
    assert "Tokio" in city["enum"]
