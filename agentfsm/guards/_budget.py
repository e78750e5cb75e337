"""The work one schema validation may spend (:mod:`agentfsm.guards.schema`).

A validation holds one :class:`Budget` (in :data:`BUDGET` while it runs): linear-matcher
work for the client's regexes, and keyword evaluations, each counted by the keyword
wrapper :func:`counted`. What would pass a bound raises :class:`Undecided`, and the call
is accepted with a note rather than checked. Counts, not seconds: a replay decides the same.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from jsonschema.exceptions import ValidationError

from agentfsm.guards import _linear_regex

__all__ = ["BUDGET", "MAX_KEYWORD_STEPS", "MAX_PATTERN_WORK", "Budget", "Undecided", "counted", "trim"]

#: total linear-matcher work (positions x instructions) one validation may spend on regexes
MAX_PATTERN_WORK = 2_000_000
#: keyword evaluations and the errors they yield, for one validation (~10 µs each): a
#: schema whose ``$ref`` / ``allOf`` / ``anyOf`` branches fan out (a 1.4 KB schema of 19
#: levels froze the proxy's event loop 22 s) is exponential in its nesting
MAX_KEYWORD_STEPS = 50_000


class Undecided(Exception):
    """A safety bound or an unsupported construct: validation is skipped."""


def trim(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Budget:
    """Linear-matcher work and keyword evaluations left for one validation."""

    def __init__(self) -> None:
        self.left = MAX_PATTERN_WORK
        self.steps = MAX_KEYWORD_STEPS
        self.notes: list[str] = []

    def step(self) -> None:
        """Count one keyword evaluation (or error); :class:`Undecided` once they are spent."""
        self.steps -= 1
        if self.steps < 0:
            raise Undecided(f"more than {MAX_KEYWORD_STEPS} schema keyword evaluations")

    def search(self, pattern: str, text: str) -> bool | None:
        cost = _linear_regex.work(pattern, text)
        if cost is None:
            self.notes.append(f"pattern {trim(pattern, 60)!r} not checked (unsupported)")
            return None
        if cost > self.left:
            self.notes.append(f"pattern {trim(pattern, 60)!r} not checked (size bound)")
            return None
        self.left -= cost
        return _linear_regex.search(pattern, text, max_work=cost)


#: the budget of the validation in progress (the extended validator class is built once)
BUDGET: ContextVar[Budget] = ContextVar("agentfsm_schema_budget")


def counted(keyword: Any) -> Any:
    """``keyword``, counting each evaluation and each error it yields against the
    validation's budget."""

    def run(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
        budget = BUDGET.get()
        budget.step()
        for error in keyword(validator, value, instance, schema) or ():
            budget.step()
            yield error

    return run
