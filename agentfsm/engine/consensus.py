"""Self-consistency after a refused reply: which of several candidate decisions to take.

When the engine refuses the model's reply (a correction), the turn runner may first
draw a few more candidates of the same request at a sampling temperature
(:func:`agentfsm.runtime.model_calls.vote`) and let the engine decide each one, as it
decided the refused reply. This module picks among those decisions, purely:

- only decisions the engine *accepts* vote: calls it would run, or an answer it would
  give (a refused candidate, a spent budget or a failure has no vote);
- calls vote by what they do: the same tool names with the same arguments (numbers
  compared as numbers, strings by their words: "Example_City" is "example city"), in any order;
  every accepted answer votes for "answer" (the call-or-answer decision);
- the most votes win (on a tie, the signature drawn first); among the decisions that
  agree, the one that copied the user's words as written, then the first drawn;
- drawing stops once more candidates could not change the pick (:func:`settled`): the
  leader is ahead by more than the candidates left, and one of its group copied every
  string as written.

Guards filter, the majority decides: a weak model's one-off mistakes (a made-up value,
the wrong tool) are outvoted by what it does most often when asked the same thing.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentfsm.engine.decisions import Answer, CallTools, Decision
from agentfsm.guards._history import argument_strings

__all__ = ["TEMPERATURE", "Vote", "choose", "settled", "signature", "verbatim"]

_WORD = re.compile(r"[^\W_]+")
#: the sampling temperature of the candidates (greedy decoding would repeat the refused reply)
TEMPERATURE = 0.8


@dataclass(frozen=True)
class Vote:
    """The chosen candidate: its index among the candidates, its votes, how many voted."""

    index: int
    votes: int
    voters: int
    signature: str


def _canonical(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        return " ".join(_WORD.findall(value.lower()))
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in sorted(value.items())}
    return str(value)


def signature(decision: Decision) -> str | None:
    """What ``decision`` votes for, or None when it has no vote."""
    if isinstance(decision, CallTools):
        calls = sorted(
            json.dumps([c.name, _canonical(c.arguments)], sort_keys=True, ensure_ascii=False)
            for c in decision.calls
        )
        return " + ".join(calls)
    if isinstance(decision, Answer) and not decision.exhausted:
        return "answer"
    return None


def verbatim(decision: Decision, conversation: str) -> int:
    """How many of a decision's string arguments occur as written in ``conversation``
    (lowercased): among candidates that agree, the one that copied the user's words."""
    if not isinstance(decision, CallTools):
        return 0
    return sum(v in conversation for c in decision.calls for v in _strings(c.arguments))


def _strings(value: Any) -> list[str]:
    """The call's non-blank string values, stripped and lowercased."""
    return [s.strip().lower() for s in argument_strings(value) if s.strip()]


def choose(decisions: Sequence[Decision], conversation: str = "") -> Vote | None:
    """The decision most accepted ones agree with, or None when the engine accepted none.

    Among the agreeing decisions, the one whose strings occur as written in
    ``conversation`` (:func:`verbatim`), then the first drawn."""
    signed = [(i, s) for i, s in enumerate(map(signature, decisions)) if s is not None]
    if not signed:
        return None
    counts = Counter(s for _, s in signed)
    best = max(counts.values())
    winner = next(s for _, s in signed if counts[s] == best)
    group = [i for i, s in signed if s == winner]
    index = max(group, key=lambda i: (verbatim(decisions[i], conversation), -i))
    return Vote(index=index, votes=best, voters=len(signed), signature=winner)


def settled(decisions: Sequence[Decision], remaining: int, conversation: str = "") -> bool:
    """Whether :func:`choose` picks the same candidate whatever ``remaining`` more
    candidates are drawn: its signature leads by more than ``remaining`` votes (so no
    other, old or new, can reach or tie it), and a candidate of its group already has
    every string as written (no later one can be preferred for copying more)."""
    signed = [(i, s) for i, s in enumerate(map(signature, decisions)) if s is not None]
    if not signed:
        return False
    ranked = Counter(s for _, s in signed).most_common(2)
    lead, runner_up = ranked[0][1], ranked[1][1] if len(ranked) > 1 else 0
    if lead <= runner_up + remaining:
        return False
    group = [decisions[i] for i, s in signed if s == ranked[0][0]]
    return any(verbatim(d, conversation) == _string_count(d) for d in group)


def _string_count(decision: Decision) -> int:
    if not isinstance(decision, CallTools):
        return 0
    return sum(len(_strings(c.arguments)) for c in decision.calls)
