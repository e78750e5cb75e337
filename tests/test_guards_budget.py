"""Tests for the retry budget: counting from the history, raising, and escalation."""

from __future__ import annotations

import pytest

from agentfsm.guards import budget
from agentfsm.core.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolResult,
    UserMessage,
)

SYSTEM = SystemMessage(content="contract")
ASK = UserMessage(content="Weather in Paris?")
BAD = AssistantMessage(content="I have no tools.")


def _fix(reason: str = "refusal") -> UserMessage:
    return UserMessage(content="Call a tool.", correction=reason)


CALL = AssistantMessage(tool_calls=(ToolCall(id="c1", name="get_weather"),))
RESULT = ToolMessage(result=ToolResult(call_id="c1", content="18C"))


@pytest.mark.parametrize(
    ("history", "expected"),
    [
        ([], 0),
        ([SYSTEM, ASK], 0),
        ([SYSTEM, ASK, BAD], 0),
        ([SYSTEM, ASK, BAD, _fix(), BAD], 1),
        ([SYSTEM, ASK, BAD, _fix(), BAD, _fix("missing_call"), BAD], 2),
        # a new user turn resets the count
        ([ASK, BAD, _fix(), BAD, _fix(), BAD, ASK, BAD], 0),
        ([ASK, BAD, _fix(), BAD, ASK, BAD, _fix(), BAD], 1),
        # a tool result resets it too: a new decision
        ([ASK, BAD, _fix(), CALL, RESULT, BAD], 0),
        ([ASK, BAD, _fix(), CALL, RESULT, BAD, _fix(), BAD], 1),
    ],
)
def test_corrections_in_turn(history: list[Message], expected: int) -> None:
    assert budget.corrections_in_turn(history) == expected


def test_next_attempt_counts_up_to_the_budget() -> None:
    assert budget.next_attempt([ASK, BAD], max_corrections=2) == 1
    history: list[Message] = [ASK, BAD, _fix(), BAD]
    assert budget.next_attempt(history, max_corrections=2) == 2
    assert budget.next_attempt([*history, _fix(), BAD], max_corrections=2) is None


def test_zero_budget_allows_no_correction() -> None:
    assert budget.next_attempt([ASK, BAD], max_corrections=0) is None


MESSAGE = (
    "Your last response did not include any ```json action``` block. "
    "You must call get_weather now.\nExample:\n```json action\n{}\n```"
)
OPENER = "```json action\n"


def test_attempt_one_is_the_message_as_written() -> None:
    assert budget.escalate(MESSAGE, 1, "json-action", OPENER) == MESSAGE


def test_attempt_two_adds_the_procedural_wording() -> None:
    text = budget.escalate(MESSAGE, 2, "json-action", OPENER)
    assert text.startswith(MESSAGE)
    assert text.endswith(
        "You must respond with one valid ```json action``` block now. "
        "Do not explain. Output the ```json action``` block directly."
    )


def test_attempt_three_is_terse_with_the_opener() -> None:
    text = budget.escalate(MESSAGE, 3, "command", "@tool ")
    assert text == (
        "Your last response did not include any ```json action``` block. "
        "Reply with the @tool line only. Do not explain. Start your reply with exactly: @tool "
    )
    assert len(text) < len(budget.escalate(MESSAGE, 2, "command", "@tool "))


def test_each_attempt_differs() -> None:
    texts = {budget.escalate(MESSAGE, n, "smiley", "😊" * 14) for n in (1, 2, 3)}
    assert len(texts) == 3
