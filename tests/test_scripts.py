"""The language-neutral checks read every script and number format alike.

A request written in Japanese, Russian, Arabic or Hindi, with full-width, Arabic-Indic or
Devanagari digits, a no-break space or an apostrophe between thousands, a minus sign, a
decomposed accent or a zero-width space, gets the decision the same request in English
gets: a correct call runs and the answer that states its result stands; a made-up value
or a misread number is refused. Runs: the agent on a scripted backend, grounding on.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentfsm import Agent
from agentfsm.backends import ScriptedBackend
from agentfsm.core.messages import UserMessage
from agentfsm.core.numbers import decimals_in, digits_in
from agentfsm.testing.example_tools import TOOLS, convert_km_to_miles


def get_weather(city: str) -> str:
    """The current weather in a city."""
    return f"sunny, 25 °C in {city}"


def _action(tool: str, **arguments: Any) -> str:
    return "```json action\n" + json.dumps({"tool": tool, "parameters": arguments}, ensure_ascii=False) + "\n```"


def _run(request: str, *replies: str) -> tuple[list[str | None], list[tuple[str, dict[str, Any]]], str]:
    """The corrections, the calls run and the answer of one run on ``replies``."""
    backend = ScriptedBackend([*replies, "(unused)", "(unused)", "(unused)"])
    result = Agent(backend, [*TOOLS, get_weather], grounding="on").run(request)
    corrections = [m.correction for m in result.messages if isinstance(m, UserMessage) and m.correction]
    calls = [(c["call"]["name"], c["call"]["arguments"]) for c in result.tool_calls]
    return corrections, calls, result.content


# --- numbers -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("12.5", 12.5),
        ("１２．５", 12.5),  # full-width digits and stop
        ("١٢٫٥", 12.5),  # Arabic-Indic digits, Arabic decimal separator
        ("۱۲٫۵", 12.5),  # Persian digits
        ("१२.५", 12.5),  # Devanagari digits
        ("১২.৫", 12.5),  # Bengali digits
        ("1.234,5", 1234.5),  # "." between thousands, "," the decimal mark
        ("1,234.5", 1234.5),
        ("1\u00a0234,5", 1234.5),  # no-break space between thousands
        ("1\u202f234,5", 1234.5),  # narrow no-break space
        ("1'234.5", 1234.5),
        ("١٬٢٣٤٫٥", 1234.5),  # Arabic thousands separator
        ("1.000.000", 1e6),
        ("\u22123", -3.0),  # the minus sign
        ("−12,5", -12.5),
    ],
)
def test_a_number_reads_the_same_in_every_script_and_format(text: str, value: float) -> None:
    assert digits_in(f"x {text} y") == {value}


def test_a_decimal_of_any_script_is_known_by_its_parts() -> None:
    for text in ("12,5", "١٢٫٥", "１２．５", "१२.५"):
        (decimal,) = decimals_in(text)
        assert (decimal.value, decimal.whole, decimal.after, decimal.joined) == (12.5, 12.0, 5.0, 125.0)
    (grouped,) = decimals_in("1\u00a0234,5")
    assert (grouped.value, grouped.whole, grouped.joined) == (1234.5, 1234.0, 12345.0)


# --- runs ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "request_text",
    [
        "12.5乘以4是多少？",
        "１２．５かける４は？",
        "كم يساوي ١٢٫٥ ضرب ٤؟",
        "१२.५ गुणा ४ कितना है?",
        "Сколько будет 12,5 умножить на 4?",
        "What is 12.5 times 4?",
    ],
)
def test_a_decimal_in_any_digits_is_called_and_its_misreading_refused(request_text: str) -> None:
    right = _run(request_text, _action("multiply", a=12.5, b=4), "50")
    assert right == ([], [("multiply", {"a": 12.5, "b": 4})], "50")
    misread, calls, _ = _run(request_text, _action("multiply", a=125, b=4), "50")
    assert misread == ["misread_number"] and calls == []


@pytest.mark.parametrize(
    ("request_text", "km"),
    [
        ("How many miles is 1,234.5 km?", 1234.5),
        ("Wie viele Meilen sind 1.234,5 km?", 1234.5),
        ("Combien de miles font 1\u202f234,5 km ?", 1234.5),
        ("Wie viele Meilen sind 1'234.5 km?", 1234.5),
        ("كم ميلا في ١٬٢٣٤٫٥ كم؟", 1234.5),
        ("How many miles is -5 km?", -5),
        ("How many miles is \u22125 km?", -5),
    ],
)
def test_a_number_with_its_separators_or_sign_is_the_call_s_one_value(request_text: str, km: float) -> None:
    answer = f"{convert_km_to_miles(km):.2f}"
    corrections, calls, content = _run(request_text, _action("convert_km_to_miles", km=km), answer)
    assert (corrections, calls, content) == ([], [("convert_km_to_miles", {"km": km})], answer)


