"""JSON validity: an action the parser could not read is sent back to be resent as valid JSON.

The parser reports what it dropped as rejected :class:`~agentfsm.core.parsed.Problem`
values; repaired actions (``rejected=False``) pass. The first rejected problem
decides the correction, which names the error and its character position.
"""

from __future__ import annotations

from typing import Final

from agentfsm.core._types import DialectName
from agentfsm.core.parsed import ParsedReply, Problem
from agentfsm.guards.base import (
    ACCEPT,
    Correction,
    CorrectionReason,
    Verdict,
    action_format,
    action_name,
    with_example,
)

__all__ = ["GUARD", "TRUNCATED", "check"]

GUARD = "json_valid"
#: the reason of an action cut off before its end
TRUNCATED: Final = "truncated_action"

_REASONS: dict[str, CorrectionReason] = {
    "invalid_json": "invalid_json",
    "truncated": TRUNCATED,
    "malformed_action": "malformed_action",
    "extra_text": "extra_text",
    "limit_exceeded": "limit_exceeded",
}


def _where(problem: Problem) -> str:
    return f" at character {problem.position}" if problem.position is not None else ""


def _message(problem: Problem, reason: CorrectionReason, dialect_name: DialectName) -> str:
    name = action_name(dialect_name)
    if reason == "invalid_json":
        return (
            f"Your {name} is not valid JSON{_where(problem)}: {problem.message}. "
            f"Resend the same action as valid JSON, written as {action_format(dialect_name)}."
        )
    if reason == "truncated_action":
        return f"Your {name} was cut off before its end. Resend the complete action, shorter."
    if reason == "malformed_action":
        return (
            f"Your {name} has no usable tool name or arguments{_where(problem)}. "
            f"Write it as {action_format(dialect_name)}."
        )
    if reason == "extra_text":
        return (
            f"Your reply has text outside the JSON object{_where(problem)}. "
            "Reply with one JSON object only, no other text."
        )
    return f"Your {name} is too large to read. Resend a smaller action."


def check(parsed: ParsedReply, dialect_name: DialectName, *, example: str = "") -> Verdict:
    """Accept a reply whose actions were all read; otherwise ask to resend valid JSON."""
    for problem in parsed.rejected:
        reason = _REASONS.get(problem.code)
        if reason is None:
            continue
        detail = f"{problem.code}{_where(problem)}: {problem.message}"
        if problem.source:
            detail += f" (format {problem.source})"
        return Correction(
            guard=GUARD,
            reason=reason,
            message=with_example(_message(problem, reason, dialect_name), example),
            detail=detail,
        )
    if parsed.truncated:
        problem = Problem(code="truncated", message="the reply ended inside an action")
        return Correction(
            guard=GUARD,
            reason="truncated_action",
            message=with_example(_message(problem, "truncated_action", dialect_name), example),
            detail=problem.message,
        )
    return ACCEPT
