"""The answer-schema guard, and the engine holding a final answer to a client's output schema."""

from __future__ import annotations

import pytest

from agentfsm.engine.decide import Answer, Correct, EngineConfig, Fail, step
from agentfsm.core.errors import RetryBudgetExceeded
from agentfsm.core.messages import AssistantMessage, ToolSpec, UserMessage
from agentfsm.guards import answer_schema
from agentfsm.guards.base import ACCEPT, Correction

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "temperature_c": {"type": "integer"}},
    "required": ["city", "temperature_c"],
}
WEATHER = ToolSpec(name="get_weather", description="Weather in a city.",
                   parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})
ASK = [UserMessage(content="What is the weather in Paris?")]


def test_valid_json_passes() -> None:
    assert answer_schema.check('{"city": "Paris", "temperature_c": 18}', SCHEMA) == ACCEPT


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        ("It is 18 C in Paris.", "only one JSON value"),
        ('```json\n{"city": "Paris", "temperature_c": 18}\n```', "only one JSON value"),
        ('{"city": "Paris"}', "'temperature_c' is a required property"),
        ('{"city": "Paris", "temperature_c": "18"}', "answer.temperature_c"),
    ],
)
def test_anything_else_is_corrected_quoting_the_schema(answer: str, says: str) -> None:
    verdict = answer_schema.check(answer, SCHEMA)
    assert isinstance(verdict, Correction) and verdict.reason == "invalid_answer"
    assert says in verdict.message and '"required":["city","temperature_c"]' in verdict.message


@pytest.mark.parametrize("choice", ["auto", "none"])
def test_the_engine_corrects_a_prose_answer_and_accepts_the_json(choice: str) -> None:
    config = EngineConfig(tools=(WEATHER,), tool_choice=choice, answer_schema=SCHEMA)
    decision = step(ASK, "It is sunny in Paris.", config)
    assert isinstance(decision, Correct) and decision.reason == "invalid_answer"
    history = [*ASK, decision.assistant, decision.message]
    accepted = step(history, '{"city": "Paris", "temperature_c": 18}', config)
    assert isinstance(accepted, Answer) and accepted.content == '{"city": "Paris", "temperature_c": 18}'


def test_a_spent_budget_ends_with_the_latest_valid_json_or_fails() -> None:
    config = EngineConfig(tools=(WEATHER,), tool_choice="auto", answer_schema=SCHEMA, max_corrections=1)
    prose = "It is sunny in Paris."
    decision = step(ASK, prose, config)
    assert isinstance(decision, Correct)
    history = [*ASK, decision.assistant, decision.message]
    failed = step(history, "Still prose.", config)  # no valid JSON this round: never the prose
    assert isinstance(failed, Fail) and isinstance(failed.error, RetryBudgetExceeded)
    valid = '{"city": "Paris", "temperature_c": 18}'
    history = [*ASK, AssistantMessage(content=valid), UserMessage(content="again", correction="refusal")]
    ended = step(history, "Prose again.", config)
    assert isinstance(ended, Answer) and ended.exhausted and ended.content == valid
