"""The refusal policy's phrase set by category and lookalikes, and the refusal guard's
verdicts on what it reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentfsm.core.choice import ToolChoice
from agentfsm.core.parsed import ParsedReply
from agentfsm.guards import refusal as guard
from agentfsm.policy import refusal
from agentfsm.guards.base import ACCEPT, Accept, Correction
from agentfsm.core.messages import ToolCall, ToolSpec

FIXTURES = Path(__file__).parent.parent / "fixtures" / "refusals"
TOOLS = [ToolSpec(name="get_weather"), ToolSpec(name="web_search")]


def _cases() -> list[tuple[str, str]]:
    cases = []
    for path in sorted(FIXTURES.glob("*.txt")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip() and not line.startswith("#"):
                cases.append((path.stem, line))
    return cases


CASES = _cases()


def test_every_category_has_fixtures() -> None:
    stems = {stem for stem, _ in CASES}
    assert stems == {*guard.CATEGORIES, "not_refusal"}
    assert set(refusal.PHRASES) == set(guard.CATEGORIES)


@pytest.mark.parametrize(("expected", "text"), CASES, ids=[f"{s}:{t[:40]}" for s, t in CASES])
def test_phrase_categories(expected: str, text: str) -> None:
    found = refusal.match(text)
    got = found.category if found else "not_refusal"
    assert got == expected
    if found:
        assert found.phrase in refusal.normalize(text)


@pytest.mark.parametrize(
    ("text", "normalized"),
    [
        ("I can’t", "i cannot"),
        ("I  CAN NOT\n do it", "i cannot do it"),
        ("I'm sure I won't", "i am sure i will not"),
        ("dont doesn't isn't", "do not does not is not"),
    ],
)
def test_normalize(text: str, normalized: str) -> None:
    assert refusal.normalize(text) == normalized


def test_scan_is_bounded() -> None:
    text = "x" * (refusal.MAX_SCAN_CHARS + 10) + " I can't help with that."
    assert refusal.match(text) is None


def _check(reply: ParsedReply, choice: str, tools: list[ToolSpec], **kwargs: Any) -> Any:
    """The refusal guard, reading refusals with the policy's phrases."""
    return guard.check(reply, ToolChoice.parse(choice), tools, match=refusal.match, **kwargs)


def _prose(text: str) -> ParsedReply:
    return ParsedReply(content=text)


@pytest.mark.parametrize("choice", ["auto", "required", "get_weather"])
def test_no_tools_claim_is_a_failed_tool_turn(choice: str) -> None:
    verdict = _check(_prose("Sorry, I don't have access to tools."), choice, TOOLS)
    assert isinstance(verdict, Correction)
    assert verdict.reason == "refusal"
    assert verdict.guard == "refusal"
    assert verdict.detail.startswith("no_tools")
    assert "You do have tools: get_weather, web_search." in verdict.message
    assert "did not include any ```json action``` block" in verdict.message


def test_environment_limitation_under_auto_is_corrected() -> None:
    verdict = _check(_prose("I can't browse the internet."), "auto", TOOLS)
    assert isinstance(verdict, Correction)
    assert verdict.detail.startswith("environment_limitation")
    assert "answer directly only if no tool fits" in verdict.message


def test_hard_refusal_under_named_choice_names_the_tool() -> None:
    verdict = _check(_prose("I cannot help with that."), "get_weather", TOOLS)
    assert isinstance(verdict, Correction)
    assert "You must call get_weather now." in verdict.message


def test_soft_deflection_is_a_legitimate_answer_under_auto() -> None:
    verdict = _check(_prose("You can check a weather website."), "auto", TOOLS)
    assert isinstance(verdict, Accept)
    assert "soft_deflection" in verdict.detail


def test_soft_deflection_under_required_is_corrected() -> None:
    verdict = _check(_prose("You can check a weather website."), "required", TOOLS)
    assert isinstance(verdict, Correction)
    assert "You must call one tool now." in verdict.message


@pytest.mark.parametrize(
    "reply",
    [
        ParsedReply(content="The capital of France is Paris."),
        ParsedReply(content="I can't wait to help you!"),
        ParsedReply(content=None),
    ],
)
def test_a_plain_answer_is_accepted(reply: ParsedReply) -> None:
    assert _check(reply, "auto", TOOLS) == ACCEPT


def test_accepts_when_a_call_was_made_no_tools_were_offered_or_choice_is_none() -> None:
    text = "I don't have tools."
    call = ToolCall(id="c1", name="get_weather")
    assert _check(ParsedReply(content=text, tool_calls=(call,)), "auto", TOOLS) == ACCEPT
    assert _check(_prose(text), "auto", []) == ACCEPT
    assert _check(_prose(text), "none", TOOLS) == ACCEPT


def test_json_protocol_final_content_is_scanned() -> None:
    reply = ParsedReply(content=None, final="I cannot access real-time data.")
    verdict = _check(reply, "auto", TOOLS, dialect_name="json-protocol")
    assert isinstance(verdict, Correction)
    assert "JSON action object" in verdict.message
