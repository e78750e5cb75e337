"""A final answer that loops (a sentence repeated to the token limit) is cut where the loop starts."""

from __future__ import annotations

import pytest

from agentfsm.policy.answers import trim_repetition
from agentfsm.engine.decide import Answer, EngineConfig, step
from agentfsm.core.messages import UserMessage


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Tokyo is the capital. Tokyo is the capital. Tokyo is the capital. Tokyo is",
         "Tokyo is the capital."),
        ("It is 50.0. That is 31.07 miles. You asked: convert it. You asked: convert it. You asked: con",
         "It is 50.0. That is 31.07 miles. You asked: convert it."),
        ("a\nb\na\nb\na", "a\nb"),
        # said twice and then going on is not a loop; numbers do not end sentences
        ("Yes. Yes. But also no.", "Yes. Yes. But also no."),
        ("It is 5.0. Then 6.0.", "It is 5.0. Then 6.0."),
        ("Hello!", "Hello!"),
        ("", ""),
    ],
)
def test_trim_repetition(text: str, expected: str) -> None:
    assert trim_repetition(text) == expected


def test_the_engine_answers_with_the_trimmed_text() -> None:
    config = EngineConfig(dialect="json-protocol")
    reply = '{"final": {"content": "The sea is wide. The sea is wide. The sea is wide. The sea"}}'
    decision = step([UserMessage(content="Say something about the sea.")], reply, config)
    assert isinstance(decision, Answer) and decision.content == "The sea is wide."
    assert decision.assistant.content == "The sea is wide."


def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


@pytest.mark.parametrize(("policies", "framed"), [
    (("answers",), "The result of add is 7."),
    ((), "Result of add:\n7\n"),
    (("refusal",), "Result of add:\n7\n"),
])
def test_short_results_are_sentences_under_the_answers_policy_only(policies: tuple[str, ...], framed: str) -> None:
    """The sentence framing is language policy: ``answers`` turns it on, and a run
    without that policy sends the result as data under its label."""
    from agentfsm import Agent, RunConfig, ScriptedBackend

    call = '```json action\n{"tool": "add", "args": {"a": 2, "b": 5}}\n```'
    backend = ScriptedBackend([call, "It is 7."])
    Agent(backend, [add], config=RunConfig(policies=policies)).run("Add 2 and 5.")
    continuation = backend.requests[1].messages[-1].content
    assert framed in continuation
    assert ("The result of" in continuation) == ("answers" in policies)
