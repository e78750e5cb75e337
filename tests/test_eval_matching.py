"""The suite's checks are language-neutral: values, not words."""

from __future__ import annotations

from typing import Any

import pytest

from agentfsm.eval.matching import (
    ANY,
    OneOf,
    answer_matches,
    call,
    calls_match,
    commuting,
    fold,
    numbers_in,
    value_matches,
    words,
)

GERMANY = OneOf("Germany", "Deutschland", "Alemania", "Allemagne")


def test_fold_ignores_case_accents_spaces_and_punctuation() -> None:
    assert fold("Pérou") == fold("PEROU") == "perou"
    assert fold("US-Dollar") == fold("us dollar") == fold("US Dollar")
    assert fold("São Paulo") == "saopaulo"
    assert fold("$") == "$" and fold(" € ") == "€"  # symbols stay themselves, not an empty key
    assert words("14:30 Uhr, Zürich") == ["14", "30", "uhr", "zurich"]


@pytest.mark.parametrize(
    ("expected", "got", "ok"),
    [
        (12.5, 12.5, True),
        (4, 4.0, True),
        (12.5, "12.5", True),
        (12.5, "12,5", True),  # a decimal comma, as written in German, Spanish, French
        (12.5, 12.50000001, True),
        (12.5, 1.25, False),
        (4, True, False),
        (4, None, False),
        (4, "four", False),
        ("Paris", "paris", True),
        ("Paris", "París", True),
        ("Paris", "Paris, France", False),
        (GERMANY, "Allemagne", True),
        (GERMANY, "alemania", True),
        (GERMANY, "Austria", False),
        (GERMANY, 3, False),
        (ANY, "Running late", True),
        (ANY, "  ", False),
        (ANY, None, False),
        (True, True, True),
        (True, 1, False),
    ],
)
def test_values_are_compared_as_values(expected: Any, got: Any, ok: bool) -> None:
    assert value_matches(expected, got) is ok


def test_calls_match_exactly_in_any_order() -> None:
    want = (call("get_weather", city=OneOf("Tokyo", "Tokio")), call("get_weather", city="Paris"))
    assert calls_match(want, [("get_weather", {"city": "París"}), ("get_weather", {"city": "Tokio"})])
    assert not calls_match(want, [("get_weather", {"city": "Tokyo"})])
    assert not calls_match(want, [("get_weather", {"city": "Tokyo"}), ("get_weather", {"city": "Tokio"})])
    assert not calls_match(want, [("get_weather", {"city": "Tokyo"}), ("get_weather", {"city": "Paris"}),
                                  ("get_weather", {"city": "Paris"})])
    assert not calls_match((call("multiply", a=1, b=4),), [("multiply", {"a": 1, "b": 4, "c": 0})])
    assert not calls_match((call("multiply", a=1, b=4),), [("add", {"a": 1, "b": 4})])
    assert calls_match((), [])
    assert not calls_match((), [("add", {"a": 1, "b": 2})])


def test_commuting_arguments_may_come_in_either_order() -> None:
    add = commuting("add", 8, 5)
    assert calls_match((add,), [("add", {"a": 5, "b": 8})]) and calls_match((add,), [("add", {"a": 8, "b": "5"})])
    assert not calls_match((add,), [("add", {"a": 8, "b": 8})])
    # a made call that could match either expected one is assigned where it fits
    two = (call("f", x=OneOf("a", "b")), call("f", x="a"))
    assert calls_match(two, [("f", {"x": "a"}), ("f", {"x": "b"})])


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("26,1 Meilen", [261.0, 26.1]),
        ("about 26.1 miles", [26.1, 261.0]),
        ("50", [50.0, 50.0]),
        ("1,234.5", [1234.5]),
        ("1.234,5", [1234.5]),
        ("−3 °C", [-3.0, -3.0]),
        ("1.2.3", [123.0]),
        ("12-15 km", [12.0, 12.0, 15.0, 15.0]),
    ],
)
def test_numbers_are_read_with_either_decimal_mark(text: str, values: list[float]) -> None:
    assert sorted(numbers_in(text)) == sorted(values)


@pytest.mark.parametrize(
    ("answer", "expected", "ok"),
    [
        ("12.5 times 4 is 50.0.", (50,), True),
        ("12,5 mal 4 ergibt 50.", (50,), True),
        ("Das sind etwa 26,1 Meilen.", (26.1,), True),
        ("C'est environ 31,07 miles.", (31.07,), True),
        ("It is 150.", (50,), False),
        ("Il fait 18 °C à Paris et 22 °C à Tokyo.", (18, 22), True),
        ("Il fait 18 °C à Paris.", (18, 22), False),
        ("Las capitales son Lima y Nairobi.", (OneOf("Lima"), OneOf("Nairobi")), True),
        ("The climate is mild.", (OneOf("Lima"),), False),  # a whole word, not a piece of one
        ("In Tokio ist es 14:30 Uhr.", (OneOf("14:30", "14h30"),), True),
        ("À Tokyo il est 14 h 30.", (OneOf("14:30", "14 h 30"),), True),
        ("Es ist 12:30.", (OneOf("14:30", "2:30 pm"),), False),
        ("¡Hola! Estoy bien, gracias.", (), True),
        ("  ", (), False),
    ],
)
def test_answers_are_checked_for_result_values_in_any_language(answer: str, expected: Any, ok: bool) -> None:
    assert answer_matches(answer, expected) is ok


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("東京は晴れ、25度です。", [OneOf("晴れ"), 25]),  # a word inside a sentence without spaces
        ("서울은 맑음, 25도", [OneOf("서울"), 25]),  # a particle after the word
        ("อากาศที่กรุงเทพฝนตก 25 องศา", [OneOf("ฝนตก"), 25]),  # Thai: no space between words
        ("ရန်ကုန်မှာမိုးရွာတယ်", [OneOf("မိုးရွာ")]),  # Myanmar
        ("Diyarbakır'da hava 25 derece", [OneOf("Diyarbakir"), 25]),  # Turkish ı written without
        ("結果は５０です", [50]),  # full-width digits right after a CJK character
        ("النتيجة ١٢٫٥", [12.5]),  # Arabic-Indic digits and decimal separator
        ("परिणाम १२.५ है", [12.5]),  # Devanagari digits
        ("Результат: 1\u00a0234,5", [1234.5]),  # thousands grouped by a no-break space
        ("Ergebnis: 1.234,5", [1234.5]),
        ("Résultat : \u22123", [-3]),  # the minus sign
    ],
)
def test_an_answer_in_any_script_states_its_results(answer: str, expected: list[Any]) -> None:
    assert answer_matches(answer, expected)


def test_whole_words_still_count_in_a_script_written_with_spaces() -> None:
    assert not answer_matches("It is 25 °C and sunnyish.", [OneOf("sunny"), 25])
    assert not answer_matches("MP3", [3])


@pytest.mark.parametrize("got", ["١٢٫٥", "１２．５", "१२.५", "12,5"])
def test_a_numeric_string_in_any_digits_is_its_number(got: str) -> None:
    assert value_matches(12.5, got)


def test_a_thousands_string_and_a_decomposed_string_match() -> None:
    assert value_matches(1234.5, "1.234,5") and value_matches(1234.5, "1\u00a0234,5")
    assert value_matches("München", "Mu\u0308nchen")
    assert value_matches(OneOf("Łódź"), "Lodz") and value_matches(OneOf("Tromsø"), "TROMSO")
