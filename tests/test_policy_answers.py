"""A final answer that loops (a sentence, or a stretch inside one, repeated to the token limit)
is cut where the loop starts."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentfsm.policy.answers import _break, _trim_sentences, trim_repetition
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
        # a loop inside a sentence, running to the end: the stretch kept once
        ("No, no, no, no, no, no, no, no, no, no, no, no, no, no, no, no, no, no, n", "No"),
        ("Nein, es tut mir leid, es tut mir leid, es tut mir leid, es tut mir leid, es tut mir leid, es tut",
         "Nein, es tut mir leid"),
        ("The value of the current current current current current current current current curr",
         "The value of the current"),
        ("It is 18.23°C, which is 18.23°C, 18.23°C, 18.23°C, 18.23°C, 18.23°C, 18.23°C, 18.2",
         "It is 18.23°C, which is 18.23°C"),
        ("我想知道我想知道我想知道我想知道我想知道我想知道我想知道我想知道我想知道", "我想知道"),
        # repeated digits are a number as written; short or few repeats are not a loop
        ("It is 5,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,",
         "It is 5,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,"),
        ("That is $1.100000000000001.00000000000001.00000000000001.00000000000001.0000",
         "That is $1.100000000000001.00000000000001.00000000000001.00000000000001.0000"),
        ("He laughed: ha ha ha ha", "He laughed: ha ha ha ha"),
        ("25.5°C, 10.5°F, 2.5°C, 1.5°F, 2.5°C, 1.5°F", "25.5°C, 10.5°F, 2.5°C, 1.5°F, 2.5°C, 1.5°F"),
        # a loop that starts inside a number is cut where a copy's last number ends
        ("Tel Aviv: 25.5°C, 10.5°F, 2.5°C, 1.5°F, 2.5°C, 1.5°F, 2.5°C, 1.5°F, 2.5°C, 1.5°F, 2.5°C, 1.5°F, 2.5°C,",
         "Tel Aviv: 25.5°C, 10.5°F, 2.5°C, 1.5°F"),
        ("the cursor 'pp_next.com.au.victim.com.au.victim.com.au.victim.com.au.victim.com.au.victim.com.au",
         "the cursor 'pp_next.com.au.victim"),
        ("Very very good, and that is all there is to say about it.",
         "Very very good, and that is all there is to say about it."),
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


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # cut inside a number it never finished: the unfinished sentence goes
        ("The result of convert_km_to_miles is 31.07. The result of convert_km_to_miles is "
         "50.000000000000011111111111111111111111111111111111111111111111",
         "The result of convert_km_to_miles is 31.07."),
        ("Es sind 62,14 Meilen.\nDas sind 100,000000000000000000000000000000000000000000",
         "Es sind 62,14 Meilen."),
        # no whole sentence before it: the number stays as written
        ("The mass is approximately 931.671223999999999999999999999999999999999999",
         "The mass is approximately 931.671223999999999999999999999999999999999999"),
        # a loop with letters is cut as before; an answer that ends otherwise is kept
        ("Tokyo is the capital. Tokyo is the capital. Tokyo is the capital. Tokyo is", "Tokyo is the capital."),
        ("It is 31.07 miles. That is about 50 km.", "It is 31.07 miles. That is about 50 km."),
        ("Avogadro's number is large. It is 602,000,000,000,000,000,000,000.",
         "Avogadro's number is large. It is 602,000,000,000,000,000,000,000."),
    ],
)
def test_a_cut_answer_loses_the_number_it_never_finished(text: str, expected: str) -> None:
    assert trim_repetition(text, cut=True) == expected


def test_an_answer_not_cut_keeps_a_number_of_repeated_digits() -> None:
    """Written whole (a googol, a long zero run), the digits are the model's number."""
    text = "A googol is big. It is 1" + "0" * 100
    assert trim_repetition(text) == text


def test_the_engine_drops_the_unfinished_number_of_a_cut_final_answer() -> None:
    config = EngineConfig(dialect="json-protocol")
    cut = '{"final": {"content": "It is 31.07 miles. The result is 50.0000000000000111111111111111111111111111111111'
    decision = step([UserMessage(content="How far is 50 km in miles?")], cut, config)
    assert isinstance(decision, Answer) and decision.content == "It is 31.07 miles."
    whole = cut + '"}}'
    decision = step([UserMessage(content="How far is 50 km in miles?")], whole, config)
    assert isinstance(decision, Answer) and decision.content.endswith("1111")


_JA = "東京の今日の天気は晴れで、最高気温は二十五度、最低気温は十八度になる見込みです。"
_AR = "الطقس في القاهرة اليوم مشمس ودرجة الحرارة العظمى خمسة وعشرون درجة؟"
_HI = "दिल्ली में आज मौसम धूप वाला है और अधिकतम तापमान पच्चीस डिग्री रहेगा।"
_EN = "The weather in Tokyo today is sunny, with a high of twenty five degrees and a low of eighteen."


@pytest.mark.parametrize(
    ("first", "sentence", "gap"),
    [("はい。", _JA, ""), ("نعم. ", _AR, " "), ("हाँ। ", _HI, " "), ("Yes. ", _EN, " ")],
    ids=["japanese", "arabic", "hindi", "english"],
)
def test_a_long_sentence_repeated_is_cut_in_any_script(first: str, sentence: str, gap: str) -> None:
    # each sentence is longer than a loop inside a sentence (40 characters): only the
    # sentence breaks of its script find the loop
    looped = first + (sentence + gap) * 4 + sentence[:10]
    assert trim_repetition(looped) == first + sentence


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("結果は１２．５です。結果は１２．５です。結果は", "結果は１２．５です。"),  # a full-width stop between digits ends no sentence
        ("晴れ。曇り。晴れ。雨。", "晴れ。曇り。晴れ。雨。"),  # said twice, then goes on
        ("¿Qué tal? Bien. ¿Y tú?", "¿Qué tal? Bien. ¿Y tú?"),  # an inverted mark opens a sentence
    ],
)
def test_sentences_of_any_script_are_cut_only_where_they_loop(text: str, expected: str) -> None:
    assert trim_repetition(text) == expected


def _cut_as_specified(text: str) -> str:
    """The sentence rule as the module states it, one sentence at a time: the answer ends
    before the first sentence already written from which every sentence only repeats one
    written before it (or begins one)."""
    pieces = _break().split(text)
    keys = [" ".join(s.split()).lower() for s in pieces[::2]]
    for i, key in enumerate(keys):
        seen = [k for k in keys[:i] if k]
        if key and key in seen and all(not k or any(s.startswith(k) for s in seen) for k in keys[i:]):
            return "".join(pieces[: 2 * i]).rstrip()
    return text


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["It is sunny.", "It is", "Sunny.", "It rains.", "晴れ。", "晴", "", "\n"]), max_size=14))
def test_sentences_are_cut_as_specified(sentences: list[str]) -> None:
    text = " ".join(sentences)
    assert _trim_sentences(text) == _cut_as_specified(text)


def test_a_long_answer_that_repeats_a_block_then_goes_on_is_read_in_linear_time() -> None:
    # each repeated line looked at every line after it, each against every line before
    # it: 800 lines twice then a new one took 3.4 s, 1,600 about half a minute
    block = "\n".join(f"- step {i}: run the check on item {i}" for i in range(1600))
    text = f"{block}\n{block}\nDone."
    started = time.process_time()
    assert trim_repetition(text) == text
    assert trim_repetition(f"{block}\n{block}\n- step 0: run") == block
    assert time.process_time() - started < 1
