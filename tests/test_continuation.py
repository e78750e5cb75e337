"""Tests for the tool-result continuation framing."""

from __future__ import annotations

import re

import pytest

from agentfsm.core.choice import ToolChoice
from agentfsm.prompt.results import (
    TRUNCATION_MARKER,
    frame_result,
    frame_results,
    next_step,
    truncate_result,
)
from agentfsm.core.errors import UsageError
from agentfsm.core.messages import AssistantMessage, ToolCall, ToolMessage, ToolResult, UserMessage
from agentfsm.prompt.projection import project_history

OK = ToolResult(call_id="c1", content='{"temp": 18}', name="get_weather")
EMPTY = ToolResult(call_id="c2", content="", status="empty")
ERROR = ToolResult(call_id="c3", content="city not found", status="error")
LONG = ToolResult(call_id="c4", content="x" * 100)


def test_truncate_leaves_short_results_alone() -> None:
    assert truncate_result(OK, 100) is OK


def test_truncate_cuts_and_marks() -> None:
    cut = truncate_result(LONG, 40)
    assert cut.status == "truncated"
    assert cut.content == "x" * 40 + TRUNCATION_MARKER.format(omitted=60, total=100)
    assert cut.call_id == LONG.call_id
    assert LONG.content == "x" * 100  # values are immutable


def test_truncate_keeps_the_error_status() -> None:
    cut = truncate_result(ToolResult(call_id="e", content="e" * 50, status="error"), 10)
    assert cut.status == "error"
    assert "result truncated" in cut.content


def test_truncate_rejects_a_nonsense_cap() -> None:
    with pytest.raises(UsageError):
        truncate_result(OK, 0)


@pytest.mark.parametrize(
    ("result", "name", "expected"),
    [
        # a short one-line result is a sentence the model can restate
        (OK, None, 'The result of get_weather is {"temp": 18}.'),
        (OK, "weather", 'The result of weather is {"temp": 18}.'),
        (ToolResult(call_id="c7", content="sunny.\nwarm"), "w", "Result of w:\nsunny.\nwarm"),
        (EMPTY, "lookup", "No data from lookup: the result is empty."),
        (
            ToolResult(call_id="c5", content="  \n"),
            "lookup",
            "No data from lookup: the result is empty.",
        ),
        (ERROR, "lookup", "Error from lookup, the call failed:\ncity not found"),
        (
            ToolResult(call_id="c6", content="part", status="truncated"),
            None,
            "Result of the tool, truncated (incomplete):\npart",
        ),
    ],
)
def test_frame_result_wording(result: ToolResult, name: str | None, expected: str) -> None:
    assert frame_result(result, tool_name=name) == expected


def test_frame_result_truncates_over_the_cap() -> None:
    text = frame_result(LONG, tool_name="dump", max_chars=10)
    assert text.startswith("Result of dump, truncated (incomplete):\nxxxxxxxxxx\n[")
    assert "90 of 100 characters omitted" in text


def test_each_status_has_its_own_wording() -> None:
    frames = [frame_result(r, tool_name="t", max_chars=40) for r in (OK, EMPTY, ERROR, LONG)]
    heads = [frame.splitlines()[0] for frame in frames]
    assert heads == [
        'The result of t is {"temp": 18}.',
        "No data from t: the result is empty.",
        "Error from t, the call failed:",
        "Result of t, truncated (incomplete):",
    ]


def test_frame_results_auto_lets_the_model_call_or_answer() -> None:
    text = frame_results([(OK, None)], "json-action", ToolChoice.parse("auto"))
    assert text.startswith('Tool result:\nThe result of get_weather is {"temp": 18}.\n\n')
    # answering comes first: most turns end after one round of results
    assert text.endswith(
        "If you have what the user asked for, answer now, stating the results, in plain text. "
        'If a further step is needed, call the next tool, written as a ```json action``` block with '
        '{"tool": NAME, "parameters": {...}}.'
    )
    # the request is not echoed: a small model copied the echo into its answers
    asked = frame_results([(OK, None)], "json-action", ToolChoice.parse("auto"), request="Weather  in\nParis?")
    assert "Weather in Paris?" not in asked and "The user asked" not in asked


def test_several_results_of_one_tool_are_told_apart_by_their_arguments() -> None:
    calls = (ToolCall(id="call_0", name="get_capital", arguments={"country": "Peru"}),
             ToolCall(id="call_1", name="get_capital", arguments={"country": "Kenya"}),
             ToolCall(id="call_2", name="get_weather", arguments={"city": "Lima"}))
    history = [UserMessage(content="Capitals of Peru and Kenya, and the weather in Lima?"),
               AssistantMessage(tool_calls=calls),
               *(ToolMessage(result=ToolResult(call_id=c.id, content=v)) for c, v in zip(calls, ("Lima", "Nairobi", "sunny")))]
    text = project_history(history, [])[-1].content
    assert "The result of get_capital(country='Peru') is Lima." in text
    assert "The result of get_capital(country='Kenya') is Nairobi." in text
    assert "The result of get_weather is sunny." in text


def test_frame_results_several_with_hints() -> None:
    results = [(OK, None), (EMPTY, "a"), (ERROR, "b"), (LONG, "c")]
    text = frame_results(results, "command", ToolChoice.parse("auto"), max_chars=10)
    assert text.startswith("Tool results:\n")
    assert "(call" not in text  # no call id: the model's own actions carry none
    assert "If a call failed, fix its arguments" in text
    assert "An empty result means the tool found nothing." in text
    assert "A cut result is incomplete" in text
    assert "@tool NAME {json arguments}" in text


@pytest.mark.parametrize(
    ("choice", "dialect", "expected"),
    [
        ("none", "json-protocol", "Now answer the request in plain prose, using these results."),
        ("required", "command", "Now call the next tool, written as one line: @tool NAME {json"),
        ("get_weather", "smiley", "Now call get_weather, written as the JSON"),
    ],
)
def test_next_step_follows_tool_choice(choice: str, dialect: str, expected: str) -> None:
    assert next_step(["ok"], dialect, ToolChoice.parse(choice)).startswith(expected)


@pytest.mark.parametrize("dialect", ["json-action", "json-protocol", "command", "smiley"])
def test_under_none_the_prompt_shows_no_action_text_and_no_tool_list(dialect: str) -> None:
    """Tools off after a call: the earlier call is not replayed as action text (a model
    shown one writes another), the result is framed by name, the contract lists nothing."""
    from agentfsm.core.messages import ToolSpec
    from agentfsm.dialects import get_dialect
    from agentfsm.dialects.parse import parse_reply

    weather = ToolSpec(name="get_weather", description="Weather in a city.",
                       parameters={"type": "object", "properties": {"city": {"type": "string"}}})
    call = ToolCall(id="call_0", name="get_weather", arguments={"city": "Paris"})
    history = [UserMessage(content="Weather in Paris?"), AssistantMessage(tool_calls=(call,)),
               ToolMessage(result=ToolResult(call_id="call_0", content="sunny", name="get_weather"))]
    prompt = project_history(history, [weather], dialect=dialect, tool_choice=ToolChoice.NONE)
    assert [m.role for m in prompt] == ["system", "user"]
    text = "\n".join(m.content for m in prompt)
    assert get_dialect(dialect).render_call(call) not in text
    assert not parse_reply(text, [weather], dialect).tool_calls
    assert "The result of get_weather is sunny." in prompt[-1].content
    assert prompt[-1].content.endswith("Now answer the request in plain prose, using these results.")
