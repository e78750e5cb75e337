"""A call's number that is only part of a written decimal ("12" for "12,5") is corrected,
in every language alike: digits only."""

from __future__ import annotations

import pytest

from agentfsm.core.choice import ToolChoice
from agentfsm.core.messages import Message, ToolCall, ToolMessage, ToolResult, UserMessage, AssistantMessage
from agentfsm.core.numbers import decimals_in
from agentfsm.guards.base import ACCEPT, Correction
from agentfsm.policy import grounding
from agentfsm.testing.example_tools import TOOLS
from agentfsm.runtime.tools import ToolRegistry

SPECS = ToolRegistry(TOOLS).specs


def _check(request: str, *calls: ToolCall, history: list[Message] | None = None,
           choice: ToolChoice = ToolChoice.AUTO) -> object:
    history = history or [UserMessage(content=request)]
    return grounding.check(history, calls, choice, SPECS, request)


def _multiply(a: float, b: float, id: str = "call_0") -> ToolCall:
    return ToolCall(id=id, name="multiply", arguments={"a": a, "b": b})


@pytest.mark.parametrize(
    "asked",
    ["Multipliziere 12,5 mit 4.", "Multiplica 12,5 por 4.", "Multiplie 12,5 par 4.", "Multiply 12.5 by 4.",
     "12,5 × 4 = ?", "12,5と4を掛けて"],
)
@pytest.mark.parametrize("misread", [12, 125, 5])
def test_a_part_of_a_written_decimal_is_corrected_in_any_language(asked: str, misread: float) -> None:
    verdict = _check(asked, _multiply(misread, 4))
    assert isinstance(verdict, Correction) and verdict.reason == grounding.MISREAD_REASON
    assert "12" in verdict.message and "12.5" in verdict.message
    assert _check(asked, _multiply(12.5, 4)) is ACCEPT


def test_it_is_corrected_under_a_required_call_too() -> None:
    """The correction asks for a call, so it holds whatever tool_choice allows."""
    verdict = _check("Multiplica 12,5 por 4.", _multiply(12, 4), choice=ToolChoice.REQUIRED)
    assert isinstance(verdict, Correction) and verdict.reason == grounding.MISREAD_REASON


@pytest.mark.parametrize(
    ("asked", "calls"),
    [
        # the part is written on its own too
        ("Run 12 laps of 12,5 km: multiply 12 by 4.", [_multiply(12, 4)]),
        # a comma that lists two numbers, both used by the reply's calls
        ("Future value of 1000 at 5% for 1,5 and 10 years.",
         [ToolCall(id=f"call_{i}", name="multiply", arguments={"a": 1000, "b": y}) for i, y in enumerate((1, 5, 10))]),
        # thousands, and zero parts, are not decimals to misread
        ("Add 1,000 and 3.", [ToolCall(id="call_0", name="add", arguments={"a": 1, "b": 3})]),
        ("The result was 48.0; add 0 and 2.", [ToolCall(id="call_0", name="add", arguments={"a": 0, "b": 2})]),
        ("Multiply 0.5 by 5.", [_multiply(0.5, 5)]),
    ],
)
def test_what_is_not_a_misreading(asked: str, calls: list[ToolCall]) -> None:
    assert _check(asked, *calls) is ACCEPT


def test_the_run_together_number_of_a_listed_comma_is_still_corrected() -> None:
    calls = [ToolCall(id="call_0", name="multiply", arguments={"a": 1000, "b": 15})]
    verdict = _check("Future value of 1000 at 5% for 1,5 and 10 years.", *calls)
    assert isinstance(verdict, Correction)
    assert "1.5, or 1 and 5" in verdict.message


def test_a_decimal_used_by_an_earlier_call_of_the_turn_is_read_right() -> None:
    request = "Multiplica 12,5 por 4 y suma 12."
    history: list[Message] = [
        UserMessage(content=request),
        AssistantMessage(tool_calls=(_multiply(12.5, 4),)),
        ToolMessage(result=ToolResult(call_id="call_0", content="50.0", name="multiply")),
    ]
    later = ToolCall(id="call_1", name="add", arguments={"a": 50, "b": 12})
    assert _check(request, later, history=history) is ACCEPT


def test_decimals_are_read_as_written() -> None:
    found = [(d.text, d.value, d.whole, d.after, d.joined, d.thousands)
             for d in decimals_in("-12,5 and 3.75, 1,000 or 7, not 200.000")]
    assert found == [("-12,5", -12.5, -12.0, -5.0, -125.0, False), ("3.75", 3.75, 3.0, 75.0, 375.0, False),
                     ("1,000", 1000.0, 1.0, 0.0, 1000.0, True)]


def test_a_call_made_up_as_a_whole_is_groundings_to_judge() -> None:
    """Only a call whose other values come from the conversation misreads it: a made-up
    call that happens to hold a part of a decimal is refused as ungrounded (answer only)."""
    verdict = _check("Write a poem about 3.5 cats.", _multiply(3, 7))
    assert isinstance(verdict, Correction) and verdict.reason == grounding.MISSING_REASON


def test_the_retry_holds_every_free_number_to_the_written_ones() -> None:
    from agentfsm.core.backend import Capabilities
    from agentfsm.engine.decide import EngineConfig, plan
    from agentfsm.prompt.enforcement import build_action_schema

    request = "Multiplica 12,5 por 4."
    refused = _multiply(12, 4)
    verdict = _check(request, refused)
    assert isinstance(verdict, Correction)
    history: list[Message] = [
        UserMessage(content=request),
        AssistantMessage(content='{"action": {"tool": "multiply", "args": {"a": 12, "b": 4}}}'),
        UserMessage(content=verdict.message, correction=verdict.reason),
    ]
    config = EngineConfig(tools=tuple(SPECS), dialect="json-protocol", tool_choice="auto", grounding=True)
    p = plan(history, config, Capabilities(json_schema=True), "constrained")
    assert p.numbers == (4.0, 12.5)
    schema = build_action_schema(p.tools, p.tool_choice, numbers=p.numbers)
    multiply = next(b for b in schema["anyOf"][0]["properties"]["action"]["anyOf"]
                    if b["properties"]["tool"]["const"] == "multiply")
    assert multiply["properties"]["args"]["properties"]["a"]["enum"] == [4, 12.5]
    # without the correction, numbers are free
    assert plan(history[:1], config, Capabilities(json_schema=True), "constrained").numbers is None


@pytest.mark.parametrize(
    ("asked", "misread", "right"),
    [
        ("Depreciated value of a property costing $200,000 at 3% for 5 years.", 200, 200000),
        ("A loan of 1,250,000 at 4% for 15 years.", 1250, 1250000),
        ("A loan of 2,250,000 at 4% for 15 years.", 2, 2250000),
    ],
)
def test_the_leading_group_of_a_thousands_number_is_a_misreading(asked: str, misread: float, right: float) -> None:
    verdict = _check(asked, _multiply(misread, 4 if "4%" in asked else 3))
    assert isinstance(verdict, Correction) and verdict.reason == grounding.MISREAD_REASON
    assert _check(asked, _multiply(right, 4 if "4%" in asked else 3)) is ACCEPT


@pytest.mark.parametrize(("asked", "values"), [("Multipliziere 200.000 mit 3.", (200, 200000)),
                                               ("Multiply 1,000 by 3.", (1, 1000))])
def test_numbers_whose_reading_depends_on_the_language_are_left_alone(asked: str, values: tuple[int, ...]) -> None:
    """"200.000" is 200 in English and 200000 in German; "1,000"'s 1 is a default as often."""
    for value in values:
        assert _check(asked, _multiply(value, 3)) is ACCEPT



@pytest.mark.parametrize(
    ("asked", "call"),
    [
        ("Combien font 8 plus 5 ?", ToolCall(id="call_0", name="add", arguments={"a": 10, "b": 5})),
        ("I had 8 apples and bought 5 more. How many now?", ToolCall(id="call_0", name="add", arguments={"a": 3, "b": 5})),
        ("Ich lief 12,5 Runden einer 4K-Schleife.", _multiply(12.5, 1.5)),
    ],
)
def test_a_number_nobody_wrote_beside_an_unused_one_is_corrected(asked: str, call: ToolCall) -> None:
    verdict = _check(asked, call)
    assert isinstance(verdict, Correction) and verdict.reason == grounding.UNWRITTEN_REASON
    # once a turn: the retry's grammar holds the numbers, and a second such call is let through
    history: list[Message] = [UserMessage(content=asked), AssistantMessage(content="..."),
                              UserMessage(content=verdict.message, correction=verdict.reason)]
    assert _check(asked, call, history=history) is ACCEPT


@pytest.mark.parametrize(
    ("asked", "call"),
    [
        # a unit's scaling of a written number: 2 hours in minutes, 15 % as a fraction
        ("Set a timer for 2 hours and call it tea.", ToolCall(id="c", name="timer", arguments={"minutes": 120, "label": "tea"})),
        ("Tip 15 % on 80.", ToolCall(id="c", name="calculate_tip", arguments={"bill": 80, "percent": 0.15})),
        # every number of the request is used (a date's digits inside a string count)
        ("Book 2 seats on 2023-03-20.", ToolCall(id="c", name="book", arguments={"seats": 2, "date": "2023-03-20", "n": 9})),
        # 0 and 1 are defaults as often ("from rest"); a power is not a value
        ("From rest, at 9.8 m/s^2 for 5 s.", ToolCall(id="c", name="v", arguments={"v0": 0, "a": 9.8, "t": 5})),
        ("A wire with 4 A at 2 m; then a field of 5 over 3 m.", ToolCall(id="c", name="b", arguments={"i": 4, "d": 2, "mu": 1})),
        # a date written in words, called as digits
        ("Wind at 46.6, 1.88 on December 13, 2019?", ToolCall(id="c", name="w", arguments={"at": [46.6, 1.88], "date": "2019-12-13"})),
        # a call made up as a whole is grounding's to judge
        ("Write a poem about 3 cats.", ToolCall(id="c", name="add", arguments={"a": 7, "b": 9})),
    ],
)
def test_what_is_not_an_unwritten_number(asked: str, call: ToolCall) -> None:
    verdict = _check(asked, call)
    assert not (isinstance(verdict, Correction) and verdict.reason == grounding.UNWRITTEN_REASON)


def test_a_number_with_an_exponent_is_read_whole() -> None:
    from agentfsm.core.numbers import digits_in

    assert digits_in("charges of 1e-9 and 2E+3 at 0.05, the 3e edition") == {1e-9, 2000.0, 0.05, 3.0}
    assert list(decimals_in("1.5e-2")) == []
    call = ToolCall(id="c", name="potential", arguments={"charge1": 1e-9, "charge2": 2e-9, "distance": 0.05})
    assert _check("Potential between charges of 1e-9 and 2e-9 at a distance of 0.05?", call) is ACCEPT


def test_after_a_result_a_made_up_number_is_a_stale_call_not_an_unwritten_one() -> None:
    """Seen on the embedded model: after convert_km_to_miles(12.5)'s result, add(12.5, 1.5)
    was sent back as unwritten ("Call add again with the user's numbers"), and the model
    copied that correction into its answer. After a result it is stale: answer now."""
    asked = "Multiplica 12,5 por 4."
    first = ToolCall(id="call_0", name="convert_km_to_miles", arguments={"km": 12.5})
    history: list[Message] = [
        UserMessage(content=asked),
        AssistantMessage(tool_calls=(first,)),
        ToolMessage(result=ToolResult(call_id="call_0", content="7.77", name="convert_km_to_miles")),
    ]
    later = ToolCall(id="call_1", name="multiply", arguments={"a": 12.5, "b": 1.5})
    verdict = _check(asked, later, history=history)
    assert isinstance(verdict, Correction) and verdict.reason == grounding.STALE_REASON
