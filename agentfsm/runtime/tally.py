"""What a turn, or a whole run, has cost so far: kept current as it goes, so a caller can
report the cost of one that failed half-way (the proxy's failed turn, a batch task's
failed run). The agent's :class:`~agentfsm.runtime.agent.RunResult` is read from it too."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentfsm.core.backend import Usage

__all__ = ["Tally"]


@dataclass
class Tally:
    """Counts of a turn, or of a run when one tally is handed to each of its turns."""

    #: deciding model calls (each counts against ``max_steps``)
    attempts: int = 0
    #: corrections sent back to the model
    corrections: int = 0
    #: tokens of every model call: attempts, extensions, consensus candidates (their sum)
    usage: Usage = field(default_factory=Usage)
    #: each model call's tokens, in the order they were made (:meth:`charge`)
    call_usage: list[Usage] = field(default_factory=list)
    #: model calls answered: attempts and consensus candidates (an extension continues its call)
    model_calls: int = 0
    #: ``score`` calls of the backend (the model's call-or-answer choice: 2 per choice)
    scores: int = 0
    #: corrections and stops, by the guard that made them (``{"schema": 1}``)
    guards: dict[str, int] = field(default_factory=dict)
    #: the run's tool calls, each ``{"call": ..., "result": ...}`` (None until it has run)
    calls: list[dict[str, Any]] = field(default_factory=list)
    #: the lowest completion limit a backend sent in place of a deciding call's own
    #: ``max_tokens`` (:attr:`~agentfsm.core.backend.Completion.max_tokens_sent`); None: none lowered
    max_tokens_sent: int | None = None

    def charge(self, usage: Usage) -> None:
        """Count one model call's tokens."""
        self.call_usage.append(usage)
        self.usage += usage

    def sent_limit(self, max_tokens: int | None) -> None:
        """Note a completion limit a backend lowered (None: it sent the one asked)."""
        if max_tokens is not None:
            known = self.max_tokens_sent
            self.max_tokens_sent = max_tokens if known is None else min(known, max_tokens)

    def guarded(self, guard: str) -> None:
        """Count one correction or stop by ``guard``."""
        self.guards[guard] = self.guards.get(guard, 0) + 1
