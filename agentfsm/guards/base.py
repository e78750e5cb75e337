"""Guard verdicts, and the words the corrections use for each action format.

A guard returns one of three values:

- :class:`Accept`: nothing to correct (``detail`` may carry a note for the logs);
- :class:`Correction`: ask the model again with ``message``; ``reason`` is a short code;
- :class:`Stop`: do not ask again, end the run (repeated-call loops).

A correction is a value, never an exception: the engine decides what to do with it.
"""

from __future__ import annotations

from typing import Annotated, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field

from agentfsm.core._types import DialectName
from agentfsm.dialects import DIALECTS
from agentfsm.dialects.base import Dialect

__all__ = [
    "ACCEPT",
    "Accept",
    "Correction",
    "CorrectionReason",
    "Stop",
    "Verdict",
    "action_format",
    "action_name",
    "answer_format",
    "with_example",
]

_FROZEN = ConfigDict(frozen=True, extra="forbid")

CorrectionReason: TypeAlias = Literal[
    "invalid_json",
    "truncated_action",
    "malformed_action",
    "extra_text",
    "limit_exceeded",
    "unknown_tool",
    "schema_mismatch",
    "refusal",
    "missing_call",
    "wrong_tool",
    "calls_not_allowed",
    "placeholder_argument",
    "repeated_call",
    "injected_action",
    "ungrounded_call",
    "missing_value",
    "misread_number",
    "unwritten_number",
    "misread_member",
    "misplaced_value",
    "irrelevant_tool",
    "stale_call",
    "unsupported_answer",
    "uncovered_request",
    "empty_reply",
    "invalid_answer",
    "runtime_text",
]


class Accept(BaseModel):
    """The reply passes; ``detail`` is an optional note for the logs."""

    model_config = _FROZEN
    kind: Literal["accept"] = "accept"
    guard: str = ""
    detail: str = ""


class Correction(BaseModel):
    """Ask the model again: ``message`` is the text to send, ``reason`` a short code."""

    model_config = _FROZEN
    kind: Literal["correction"] = "correction"
    guard: str
    reason: CorrectionReason
    message: str
    #: for logs and transcripts; never sent to the model
    detail: str = ""
    #: the index of the offending call in ``ParsedReply.tool_calls``, when one call is at fault
    call_index: int | None = None


class Stop(BaseModel):
    """End the run without asking again (a repeated-call loop)."""

    model_config = _FROZEN
    kind: Literal["stop"] = "stop"
    guard: str
    reason: Literal["loop"]
    detail: str
    #: the repeated tool, and how many times it already ran with the same result
    tool: str | None = None
    repeats: int = 0


Verdict: TypeAlias = Annotated[Accept | Correction | Stop, Field(discriminator="kind")]

#: the plain accept, for guards with nothing to note
ACCEPT = Accept()

# The words themselves belong to each dialect (``action_name``, ``action_format``,
# ``answer_format`` on its class); these read them, with plain words for an unknown name.


def _dialect(dialect_name: DialectName) -> Dialect | None:
    return DIALECTS.get(dialect_name)


def action_name(dialect_name: DialectName) -> str:
    """The short name of one action in this dialect (``"```json action``` block"``)."""
    d = _dialect(dialect_name)
    return d.action_name if d is not None else "action block"


def action_format(dialect_name: DialectName) -> str:
    """How one action is written in this dialect, in one short phrase."""
    d = _dialect(dialect_name)
    return d.action_format if d is not None else "one action block"


def answer_format(dialect_name: DialectName) -> str:
    """How a final answer is written in this dialect."""
    d = _dialect(dialect_name)
    return d.answer_format if d is not None else "plain text"


def with_example(message: str, example: str) -> str:
    """Append a rendered example action to a correction message, when there is one."""
    example = example.strip()
    return f"{message}\nExample:\n{example}" if example else message
