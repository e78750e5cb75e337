"""An answer never carries the runtime's own text (agentfsm.guards.runtime_text), in any language."""

from __future__ import annotations

import pytest

from agentfsm import Agent, RunConfig, ScriptedBackend
from agentfsm.core.errors import RetryBudgetExceeded
from agentfsm.engine.decide import Answer, EngineConfig, step
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


#: the grounding correction's wording before 2026-11-26, whose first sentence was given as the answer
UNGROUNDED = 'No tool fits this request. Reply to the user\'s message directly: "¿Hace frío en Buenos Aires?"'


@pytest.mark.parametrize("answer", ["No tool fits this request", "no tool fits this request.", "Reply to the user's message directly"])
def test_a_short_answer_that_is_a_stretch_of_a_correction_is_found(answer: str) -> None:
    """Under the six-word run, a whole answer copied from a correction is found too: the
    grounding correction's first sentence was given as the answer (issue 27)."""
    assert find_runtime_text(answer, [UNGROUNDED], ["¿Hace frío en Buenos Aires?", "get_weather\nThe weather of a city."])


@pytest.mark.parametrize(
    "answer",
    [
        "Overcast, 12 °C",  # a result
        "Hace frío en Buenos Aires",  # the request's own words
        "No tool",  # under three words
        "No, it fits.",  # not a stretch of the correction
        "The weather of Paris",  # the tool's own words and a name
    ],
)
def test_a_short_answer_of_the_users_or_the_tools_words_is_not_runtime_text(answer: str) -> None:
    allowed = ["¿Hace frío en Buenos Aires?", "get_weather\nThe weather of a city.", "Overcast, 12 °C"]
    assert isinstance(check(answer, [UNGROUNDED, "Result of get_weather: Overcast, 12 °C"], allowed), Accept)


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


def translate_text(text: str) -> str:
    """Translate a text into English."""
    return text


def get_weather(city: str) -> str:
    """The current weather in a city."""
    return "sunny"


_SEA = "The sea is a vast and mysterious realm full of life and light."


@pytest.mark.parametrize("dialect", ["json-action", "json-protocol"])
def test_the_models_own_words_from_a_refused_call_are_its_answer(dialect: str) -> None:
    """A small model puts its answer into a call's argument; the correction that refuses
    the call quotes it; the same sentence as the answer is the model's, not the runtime's."""
    call = (f'```json action\n{{"tool": "translate_text", "args": {{"text": "{_SEA}"}}}}\n```' if dialect == "json-action"
            else f'{{"action": {{"tool": "translate_text", "args": {{"text": "{_SEA}"}}}}}}')
    answer = _SEA if dialect == "json-action" else f'{{"final": {{"content": "{_SEA}"}}}}'
    backend = ScriptedBackend([call, answer])
    result = Agent(backend, [translate_text, get_weather], config=RunConfig(dialect=dialect, grounding="on")).run(
        "Write one short sentence about the sea.")
    assert result.content == _SEA
    assert result.corrections == 1  # the made-up call only


def test_a_call_that_copied_a_correction_does_not_make_the_copy_the_models() -> None:
    # the correction's words, written into a refused call and then answered, are still its
    copied = "If one of your tools finds them from the user's words, call it first"
    made_up = f'```json action\n{{"tool": "translate_text", "args": {{"text": "{_SEA}"}}}}\n```'
    again = f'```json action\n{{"tool": "translate_text", "args": {{"text": "{copied}"}}}}\n```'
    backend = ScriptedBackend([made_up, again, copied, "The sea is wide."])
    result = Agent(backend, [translate_text, get_weather], config=RunConfig(grounding="on", max_corrections=3)).run(
        "Write one short sentence about the sea.")
    assert result.content == "The sea is wide."
    assert result.corrections == 3


def test_the_engine_decides_a_reply_to_an_empty_history() -> None:
    # reading the model's own call strings paired each message with the next one, and the
    # pairing refused an empty history (ValueError from zip(strict=True))
    decision = step([], "hello", EngineConfig())
    assert isinstance(decision, Answer) and decision.content == "hello"
