"""The call-or-answer choice the model scores (agentfsm.engine.choice, runtime.choose).

No word of a request is read to decide: a scripted backend stands in for the model's
scores, and the same request in four languages reaches the same decision; the grammar of
the request that follows allows only the chosen branch; a replay serves the recorded
scores back; with the default policies no module that reads English is loaded.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from agentfsm import Agent, RunConfig, ScriptedBackend, replay
from agentfsm.backends import Capabilities
from agentfsm.core.events import ChoiceEvent
from agentfsm.core.messages import PromptMessage
from agentfsm.engine.choice import CONTENT_FREE, continuations, pick
from agentfsm.runtime.transcript import read_events

ROOT = Path(__file__).parent.parent
GRAMMAR = Capabilities(json_schema=True)


def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"{city}: 3 C, snow"


def multiply(a: float, b: float) -> float:
    """Multiply two numbers."""
    return a * b


WEATHER = {
    "en": "What's the weather in Berlin?",
    "de": "Wie ist das Wetter in Berlin?",
    "es": "¿Qué tiempo hace en Berlin?",
    "fr": "Quel temps fait-il à Berlin ?",
}
GREETING = {
    "en": "Hello! How are you today?",
    "de": "Hallo! Wie geht es dir heute?",
    "es": "¡Hola! ¿Cómo estás hoy?",
    "fr": "Bonjour ! Comment vas-tu aujourd'hui ?",
}


def _last_user(messages: Sequence[PromptMessage]) -> str:
    return next(m.content for m in reversed(messages) if m.role == "user")


def _model(lean: str) -> Any:
    """Scores as a model that finds ``lean`` likeliest after any real request (an answer
    first, then get_weather, multiply), and leans toward calls on the content-free one."""

    def score(messages: Sequence[PromptMessage], options: Sequence[str]) -> list[float]:
        if _last_user(messages).endswith(CONTENT_FREE):
            scores = [-3.0, -0.5, -1.0, -1.5]  # the prompt's own lean: a call
        else:
            scores = {"answer": [-0.5, -1.5, -2.0, -2.5], "get_weather": [-3.0, -0.1, -0.2, -4.0]}[lean]
        return scores[: len(options)]

    return score


@pytest.mark.parametrize("lang", sorted(WEATHER))
def test_the_same_request_in_four_languages_reaches_the_same_call(lang: str, tmp_path: Path) -> None:
    call = '{"action": {"tool": "get_weather", "args": {"city": "Berlin"}}}'
    backend = ScriptedBackend([call, '{"final": {"content": "Berlin: 3 C, snow."}}'], GRAMMAR,
                              scores=_model("get_weather"))
    path = tmp_path / "run.jsonl"
    result = Agent(backend, [get_weather, multiply], transcript=path).run(WEATHER[lang])
    assert [c["call"]["name"] for c in result.tool_calls] == ["get_weather"]
    # the grammar of the scored request allows a get_weather call only
    schema = json.dumps(backend.requests[0].options.json_schema)
    assert '"get_weather"' in schema and '"multiply"' not in schema and '"final"' not in schema
    # the content-free twin, then the request itself, were scored
    assert [_last_user(r.messages) for r in backend.score_requests] == [CONTENT_FREE, WEATHER[lang]]
    choice = [e for e in read_events(path) if isinstance(e, ChoiceEvent)]
    assert [c.tool for c in choice] == ["get_weather"]
    assert replay(path).identical


@pytest.mark.parametrize("lang", sorted(GREETING))
def test_the_same_greeting_in_four_languages_is_answered(lang: str) -> None:
    backend = ScriptedBackend(['{"final": {"content": "Fine, thanks."}}'], GRAMMAR, scores=_model("answer"))
    result = Agent(backend, [get_weather, multiply]).run(GREETING[lang])
    assert result.content == "Fine, thanks." and result.tool_calls == []
    schema = json.dumps(backend.requests[0].options.json_schema)
    assert '"final"' in schema and '"action"' not in schema


def test_the_choice_is_calibrated_against_the_prompts_own_lean() -> None:
    # raw, a call looks likelier than an answer (-0.9 vs -1.0) ...
    scores, lean = [-1.0, -0.9, -0.9, -5.0], [-3.0, -0.5, -0.5, -5.0]
    assert pick(["get_weather", "multiply"], scores, lean, calibration=0.0).tool == "get_weather"
    # ... but the prompt leans far more toward a call with no request at all: an answer
    assert pick(["get_weather", "multiply"], scores, lean).tool is None


def test_continuations_are_the_grammar_branches() -> None:
    from agentfsm.core.messages import ToolSpec

    options = continuations([ToolSpec(name="get_weather", parameters={"type": "object"})])
    assert options == ['{"final"', '{"action"', '{"action": {"tool": "get_weather"']


def test_no_choice_after_results_or_corrections_or_when_off() -> None:
    call = '{"action": {"tool": "get_weather", "args": {"city": "Berlin"}}}'
    final = '{"final": {"content": "3 C and snow in Berlin."}}'
    backend = ScriptedBackend([call, final], GRAMMAR, scores=_model("get_weather"))
    Agent(backend, [get_weather]).run(WEATHER["en"])
    assert len(backend.score_requests) == 2  # the first decision only; not after the result
    off = ScriptedBackend([call, final], GRAMMAR, scores=_model("get_weather"))
    Agent(off, [get_weather], config=RunConfig(choice="off")).run(WEATHER["en"])
    assert off.score_requests == []
    # auto leaves it off for a small model (the embedded one): its scores carry no signal
    small = ScriptedBackend([call, final], GRAMMAR.model_copy(update={"small_model": True}), scores=_model("get_weather"))
    Agent(small, [get_weather]).run(WEATHER["en"])
    assert small.score_requests == []
    forced = ScriptedBackend([call, final], GRAMMAR.model_copy(update={"small_model": True}), scores=_model("get_weather"))
    Agent(forced, [get_weather], config=RunConfig(choice="on")).run(WEATHER["en"])
    assert len(forced.score_requests) == 2


_RUN = """
import json, sys
from agentfsm import Agent, RunConfig, ScriptedBackend
from agentfsm.backends import Capabilities

def get_weather(city: str) -> str:
    '''Current weather for a city.'''
    return "3 C, snow"

backend = ScriptedBackend(['{"action": {"tool": "get_weather", "args": {"city": "Berlin"}}}',
                           '{"final": {"content": "3 C, snow."}}'],
                          Capabilities(json_schema=True, small_model=True), scores=[[-3, -1, -1], [-2, -0.1, -0.1]])
config = RunConfig(choice="on", policies=tuple(json.loads(sys.argv[2])))
assert Agent(backend, [get_weather], config=config).run(sys.argv[1]).content == "3 C, snow."
print(json.dumps(sorted(m for m in sys.modules if m.startswith("agentfsm.policy"))))
"""


def test_with_the_english_policies_off_no_english_word_list_is_consulted(tmp_path: Path) -> None:
    """With the defaults, the modules that decide by English words whether a request is
    about a tool are never loaded; with refusal off too, none that holds English words."""
    def loaded(policies: Sequence[str]) -> set[str]:
        out = subprocess.run([sys.executable, "-c", _RUN, WEATHER["de"], json.dumps(list(policies))], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout
        return set(json.loads(out.splitlines()[-1]))

    english = {"agentfsm.policy.relevance", "agentfsm.policy.coverage", "agentfsm.policy.clauses"}
    default = loaded(RunConfig().policies)
    assert not default & english
    assert "agentfsm.policy.grounding" in default  # the language-neutral value checks run
    neutral = loaded(("answers", "grounding"))
    assert not neutral & (english | {"agentfsm.policy.refusal"})
