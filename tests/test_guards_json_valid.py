"""Tests for the JSON-validity guard."""

from __future__ import annotations

import pytest

from agentfsm.core.parsed import ParsedReply, Problem
from agentfsm.guards import json_valid
from agentfsm.guards.base import ACCEPT, Accept, Correction
from agentfsm.core.messages import ToolCall


def _reply(
    *problems: Problem, calls: tuple[ToolCall, ...] = (), truncated: bool = False
) -> ParsedReply:
    return ParsedReply(content=None, tool_calls=calls, problems=problems, truncated=truncated)


def test_accepts_a_clean_reply() -> None:
    call = ToolCall(id="c1", name="get_weather", arguments={"city": "Paris"})
    assert json_valid.check(_reply(calls=(call,)), "json-action") == ACCEPT


def test_accepts_a_repaired_action() -> None:
    repaired = Problem(code="repaired_json", message="trailing comma removed", rejected=False)
    assert isinstance(json_valid.check(_reply(repaired), "json-action"), Accept)


def test_invalid_json_names_the_error_and_its_position() -> None:
    problem = Problem(code="invalid_json", message="Expecting ',' delimiter", position=57)
    verdict = json_valid.check(_reply(problem), "json-action")
    assert isinstance(verdict, Correction)
    assert verdict.guard == "json_valid"
    assert verdict.reason == "invalid_json"
    assert "at character 57" in verdict.message
    assert "Expecting ',' delimiter" in verdict.message
    assert "valid JSON" in verdict.message
    assert "```json action```" in verdict.message


@pytest.mark.parametrize(
    ("code", "reason", "words"),
    [
        ("invalid_json", "invalid_json", "valid JSON"),
        ("truncated", "truncated_action", "cut off"),
        ("malformed_action", "malformed_action", "no usable tool name"),
        ("extra_text", "extra_text", "one JSON object only"),
        ("limit_exceeded", "limit_exceeded", "too large"),
    ],
)
def test_each_rejected_problem_has_its_reason_code(code: str, reason: str, words: str) -> None:
    problem = Problem.model_validate({"code": code, "message": "m", "position": 3})
    verdict = json_valid.check(_reply(problem), "json-protocol")
    assert isinstance(verdict, Correction)
    assert verdict.reason == reason
    assert words in verdict.message
    assert verdict.detail.startswith(code)


def test_truncated_flag_without_problem_is_corrected() -> None:
    verdict = json_valid.check(_reply(truncated=True), "command")
    assert isinstance(verdict, Correction)
    assert verdict.reason == "truncated_action"


def test_the_example_is_appended() -> None:
    problem = Problem(code="invalid_json", message="bad")
    example = '```json action\n{"tool": "f", "parameters": {}}\n```'
    verdict = json_valid.check(_reply(problem), "json-action", example=example)
    assert isinstance(verdict, Correction)
    assert verdict.message.endswith("Example:\n" + example)


@pytest.mark.parametrize(
    ("dialect", "words"),
    [("command", "@tool line"), ("smiley", "😊"), ("json-protocol", "JSON action object")],
)
def test_message_names_the_dialect_format(dialect: str, words: str) -> None:
    verdict = json_valid.check(_reply(Problem(code="invalid_json", message="bad")), dialect)
    assert isinstance(verdict, Correction)
    assert words in verdict.message
