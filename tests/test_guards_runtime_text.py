"""An answer never carries the runtime's own text (agentfsm.guards.runtime_text), in any language."""

from __future__ import annotations

import pytest

from agentfsm import Agent, RunConfig, ScriptedBackend
from agentfsm.core.errors import RetryBudgetExceeded
from agentfsm.guards.base import Accept, Correction
from agentfsm.guards.runtime_text import check, find_runtime_text

FRAMING = "The user asked: What's the weather like in Oslo right now?\nIf you have what the user asked for, answer now."
CORRECTION = "The request is not about get_weather: reply to the user's message directly."


def test_a_copied_correction_or_framing_is_found() -> None:
    assert find_runtime_text("The request is not about get_weather: reply now", [CORRECTION], ["Wie ist das Wetter?"])
    copied = find_runtime_text("It is 3 C. The user asked: What's the weather like in Oslo right now?", [FRAMING],
                               ["What's the weather like in Oslo right now?", "3 C, snow"])
    assert copied is not None and copied.startswith("the user asked")


@pytest.mark.parametrize(
    "answer",
    [
        "It is 3 C with snow in Oslo right now.",  # restates a result
        "What's the weather like in Oslo right now? It is 3 C.",  # repeats the user's question
        "Il fait 3 C et il neige à Oslo.",
        "",
    ],
)
def test_restating_results_or_the_request_is_not_runtime_text(answer: str) -> None:
    allowed = ["What's the weather like in Oslo right now?", "Oslo: 3 C, snow"]
    assert isinstance(check(answer, [FRAMING, CORRECTION], allowed), Accept)


def test_folded_words_in_any_script() -> None:
    runtime = ["Écrivez votre réponse à l'utilisateur vous-même, en mots simples."]
    assert find_runtime_text("ECRIVEZ VOTRE REPONSE A L'UTILISATEUR VOUS-MEME", runtime, ["Bonjour"])
    assert isinstance(check("Привет! Как дела у тебя сегодня вечером?", runtime, ["Привет"]), Accept)


def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


def test_the_engine_asks_again_and_never_answers_with_copied_text() -> None:
    # an empty reply is corrected; the model copies that correction; it is asked again
    copy = "Your last reply was empty. Answer the user, please."
    backend = ScriptedBackend(["   ", copy, "Hallo! Mir geht es gut."])
    result = Agent(backend, [add], config=RunConfig(max_corrections=3)).run("Hallo! Wie geht es dir?")
    assert result.content == "Hallo! Mir geht es gut."
    assert result.corrections == 2
    # when the budget runs out on copies only, the turn gives up: the runtime never answers
    stuck = ScriptedBackend(["   ", copy, copy])
    with pytest.raises(RetryBudgetExceeded):
        Agent(stuck, [add], config=RunConfig(max_corrections=2)).run("Hallo! Wie geht es dir?")


def test_a_correction_reason_is_recorded() -> None:
    verdict = check("Write your reply to the user's last message yourself, in plain words", [
        "Write your reply to the user's last message yourself, in plain words; do not repeat these instructions."], [])
    assert isinstance(verdict, Correction) and verdict.reason == "runtime_text"


def test_results_stated_plainly_are_the_models_answer() -> None:
    """"The result of add is 7." states a result the way a correction asks for it: not refused."""
    call = '```json action\n{"tool": "add", "args": {"a": 2, "b": 5}}\n```'
    backend = ScriptedBackend([call, "The result of add is 7. The result of add is 7 indeed, as asked."])
    result = Agent(backend, [add]).run("Add 2 and 5.")
    assert result.content.startswith("The result of add is 7.") and result.corrections == 0
