"""Tests for run_guards: the fixed order, the first non-accept verdict wins, notes are kept."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter

from agentfsm.core.choice import ToolChoice
from agentfsm import guards
from agentfsm.core.parsed import ParsedReply, Problem
from agentfsm.guards import ACCEPT, Accept, Correction, run_guards
from agentfsm.core.messages import ToolCall, ToolSpec
from agentfsm.policy import get_policy

TOOLS = [
    ToolSpec(
        name="get_weather",
        parameters={
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    ),
    ToolSpec(name="odd", parameters={"type": "nope"}),
]
BROKEN = Problem(code="invalid_json", message="Expecting value", position=12)


def _reply(
    *calls: tuple[str, dict[str, Any]],
    content: str | None = None,
    problems: tuple[Problem, ...] = (),
) -> ParsedReply:
    return ParsedReply(
        content=content,
        tool_calls=tuple(
            ToolCall(id=f"c{i}", name=n, arguments=a) for i, (n, a) in enumerate(calls)
        ),
        problems=problems,
    )


def _run(reply: ParsedReply, choice: str = "auto", *, phrases: bool = True) -> Any:
    return run_guards(
        reply, tools=TOOLS, tool_choice=ToolChoice.parse(choice), dialect_name="json-action", example="EX",
        refusals=get_policy("refusal").refusal if phrases else None,
    )


def test_without_a_language_policy_no_reply_reads_as_a_refusal() -> None:
    """The refusal guard reads refusals only through a policy: without one, the forced
    call is what is missing."""
    verdict = _run(_reply(content="I don't have any tools."), "required", phrases=False)
    assert isinstance(verdict, Correction)
    assert (verdict.guard, verdict.reason) == ("tool_choice", "missing_call")
    assert _run(_reply(content="I don't have any tools."), "auto", phrases=False) == ACCEPT


def test_order_is_documented() -> None:
    assert guards.GUARD_ORDER == (
        "json_valid", "refusal", "tool_choice", "empty", "unknown_tool", "schema", "placeholder", "injection"
    )


def test_accepts_a_good_call() -> None:
    assert _run(_reply(("get_weather", {"city": "Paris"}))) == ACCEPT


def test_accepts_a_plain_answer_under_auto() -> None:
    assert _run(_reply(content="Paris is the capital of France.")) == ACCEPT


@pytest.mark.parametrize(
    ("reply", "choice", "guard", "reason"),
    [
        # invalid JSON wins over everything that follows
        (_reply(("nope", {}), problems=(BROKEN,)), "get_weather", "json_valid", "invalid_json"),
        # refusal text under a forced choice: reason refusal, not missing_call
        (_reply(content="I don't have any tools."), "required", "refusal", "refusal"),
        (_reply(content="Sure."), "required", "tool_choice", "missing_call"),
        # a named choice and an unknown tool: wrong_tool comes first
        (_reply(("nope", {})), "get_weather", "tool_choice", "wrong_tool"),
        (_reply(("get_weather", {"city": "Paris"})), "none", "tool_choice", "calls_not_allowed"),
        # unknown tool before the schema of another call
        (_reply(("get_weather", {}), ("nope", {})), "auto", "unknown_tool", "unknown_tool"),
        (_reply(("get_weather", {})), "auto", "schema", "schema_mismatch"),
    ],
)
def test_first_non_accept_wins(reply: ParsedReply, choice: str, guard: str, reason: str) -> None:
    verdict = _run(reply, choice)
    assert isinstance(verdict, Correction)
    assert (verdict.guard, verdict.reason) == (guard, reason)


def test_example_reaches_the_missing_call_message() -> None:
    verdict = _run(_reply(content="Sure."), "required")
    assert isinstance(verdict, Correction)
    assert verdict.message.endswith("Example:\nEX")


def test_notes_are_joined_into_the_accept() -> None:
    verdict = _run(_reply(("odd", {})))
    assert isinstance(verdict, Accept)
    assert verdict.detail.startswith("schema: call 0 (odd): invalid client schema")


def test_verdicts_round_trip_as_json() -> None:
    adapter: TypeAdapter[guards.Verdict] = TypeAdapter(guards.Verdict)
    verdict = _run(_reply(content="Sure."), "required")
    assert adapter.validate_json(adapter.dump_json(verdict)) == verdict


@pytest.mark.parametrize("text", ["", "   \n"])
@pytest.mark.parametrize("choice", ["auto", "none"])
def test_an_empty_reply_is_corrected_never_an_answer(text: str, choice: str) -> None:
    verdict = _run(_reply(content=text or None), choice)
    assert isinstance(verdict, Correction) and (verdict.guard, verdict.reason) == ("empty", "empty_reply")
    assert "empty" in verdict.message


def test_an_empty_reply_under_a_required_call_is_a_missing_call() -> None:
    verdict = _run(_reply(content=None), "required")
    assert isinstance(verdict, Correction) and verdict.reason == "missing_call"
