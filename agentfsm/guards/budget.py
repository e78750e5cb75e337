"""Retry budget: corrections per turn are counted from the history and bounded.

The count is derived from the messages alone (a stateless proxy enforces the same
budget as a long-running agent): the correction user messages since the last real
user message or the last tool result. Each re-ask is stricter than the one before
(:func:`escalate`); :func:`next_attempt` says whether one more is allowed. This module
is the one place corrections are counted.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentfsm.core._types import DialectName
from agentfsm.core.config import DEFAULTS
from agentfsm.guards.base import action_name
from agentfsm.core.messages import Message, UserMessage, round_start

__all__ = ["DEFAULT_MAX_CORRECTIONS", "GUARD", "corrections_in_turn", "escalate", "next_attempt"]

GUARD = "budget"
#: corrections allowed per turn unless configured otherwise (:class:`~agentfsm.core.config.RunConfig`)
DEFAULT_MAX_CORRECTIONS = DEFAULTS.max_corrections


def corrections_in_turn(history: Sequence[Message]) -> int:
    """Correction messages since the last real user message or the last tool result (the
    current round: :func:`~agentfsm.core.messages.round_start`)."""
    return sum(isinstance(m, UserMessage) and m.correction is not None for m in history[round_start(history):])


def next_attempt(history: Sequence[Message], max_corrections: int = DEFAULT_MAX_CORRECTIONS) -> int | None:
    """The attempt number of the correction about to be sent (1 for the first re-ask),
    or ``None`` when ``max_corrections`` re-asks were already sent this turn.

    ``history`` is the conversation before the new correction. What a spent budget
    means is the engine's decision (:func:`agentfsm.engine.decide.step`).
    """
    used = corrections_in_turn(history)
    return None if used >= max_corrections else used + 1


def _first_sentence(message: str) -> str:
    line = message.strip().splitlines()[0] if message.strip() else ""
    for end in (". ", "? ", "! "):
        cut = line.find(end)
        if cut != -1:
            return line[: cut + 1]
    return line


def escalate(message: str, attempt: int, dialect_name: DialectName, opener: str) -> str:
    """The correction text for ``attempt``: each attempt is stricter than the last.

    1. the guard's message as written (specific, polite);
    2. the message plus the procedural wording: "You must respond with one valid
       action block now. Do not explain. Output the action block directly.";
    3+. one sentence of the message, then "Reply with the action only. Start your reply
       with exactly: <opener>".
    """
    name = action_name(dialect_name)
    if attempt <= 1:
        return message
    if attempt == 2:
        return (
            f"{message}\nYou must respond with one valid {name} now. "
            f"Do not explain. Output the {name} directly."
        )
    start = f" Start your reply with exactly: {opener}" if opener else ""
    return f"{_first_sentence(message)} Reply with the {name} only. Do not explain.{start}"
