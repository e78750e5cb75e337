"""Call or answer, and which tool: the model scores the choice; no word of the request is read.

At the first decision of a user turn under ``tool_choice: auto``, on a backend that
scores continuations (:class:`~agentfsm.core.backend.ScoresContinuations`) and
constrains decoding, the runtime asks the model how likely it finds each way its reply
could begin: ``{"final": ...`` (an answer) and ``{"action": {"tool": "NAME"`` for each
offered tool (:func:`continuations`). The grammar of the request then allows only the
chosen branch (:func:`narrow`); the model still writes every word of it.

A small model's raw scores lean one way whatever the request says (some prompts pull
every reply toward a call). That lean is measured on the same prompt with the user's
message replaced by a content-free one (:data:`CONTENT_FREE`) and subtracted
(contextual calibration, Zhao et al., 2021, "Calibrate before use"): what is left is
what the request itself adds. Nothing here depends on the language of the request.

Pure: the scores come in, a :class:`Choice` comes out; :mod:`agentfsm.runtime.choose`
does the scoring.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from agentfsm.core.choice import ToolChoice
from agentfsm.core.messages import Message, ToolSpec, UserMessage
from agentfsm.engine.decisions import Plan

__all__ = ["CALIBRATION", "CONTENT_FREE", "Choice", "continuations", "content_free", "narrow", "pick", "wants_choice"]

#: the content-free user message whose scores measure the prompt's own lean
CONTENT_FREE = "N/A"
#: how much of the content-free lean is taken off the call-or-answer margin
CALIBRATION = 1.0


@dataclass(frozen=True)
class Choice:
    """What the model scored and what was chosen: ``tool`` is the tool to call, ``None``
    for an answer. ``scores`` and ``baseline`` hold one log-probability per option of
    :func:`continuations` (the answer first, then the tools in order)."""

    tools: tuple[str, ...]
    scores: tuple[float, ...]
    baseline: tuple[float, ...]
    tool: str | None
    #: log-odds of a call over an answer, after calibration (positive: a call)
    margin: float


def continuations(tools: Sequence[ToolSpec]) -> list[str]:
    """The beginnings scored: an answer, then a call of each tool, as the json-protocol
    grammar writes them."""
    return ['{"final"'] + ['{"action": {"tool": ' + json.dumps(tool.name, ensure_ascii=False) for tool in tools]


def _logsumexp(values: Sequence[float]) -> float:
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values))


def _call_margin(scores: Sequence[float]) -> float:
    """log P(any call) - log P(answer)."""
    return _logsumexp(scores[1:]) - scores[0]


def pick(
    tools: Sequence[str], scores: Sequence[float], baseline: Sequence[float], calibration: float = CALIBRATION
) -> Choice:
    """The choice ``scores`` make once the ``baseline`` lean is taken off: a call when a
    call is likelier than an answer, of the tool the request makes likeliest (its score
    over its content-free score)."""
    if len(scores) != len(tools) + 1 or len(baseline) != len(scores):
        raise ValueError(f"{len(scores)} scores and {len(baseline)} baseline scores for {len(tools)} tools and an answer")
    margin = _call_margin(scores) - calibration * _call_margin(baseline)
    tool = None
    if margin > 0:
        lifted = [s - calibration * b for s, b in zip(scores[1:], baseline[1:])]
        tool = tools[max(range(len(tools)), key=lifted.__getitem__)]
    return Choice(tuple(tools), tuple(scores), tuple(baseline), tool, margin)


def content_free(history: Sequence[Message]) -> list[Message]:
    """``history`` with its last message (the user's) replaced by :data:`CONTENT_FREE`."""
    return [*history[:-1], UserMessage(content=CONTENT_FREE)]


def wants_choice(history: Sequence[Message], plan: Plan, scoring: bool) -> bool:
    """Whether the next request is a choice worth scoring: the first attempt at a user's
    message (no correction yet), ``auto``, a grammar carrying several branches, on a
    backend that scores."""
    last = history[-1] if history else None
    return (
        scoring
        and plan.level == "constrained"
        and plan.tool_choice == ToolChoice.AUTO
        and bool(plan.tools)
        and isinstance(last, UserMessage)
        and last.correction is None
    )


def narrow(plan: Plan, choice: Choice) -> Plan:
    """``plan`` with a grammar that allows only what ``choice`` chose (the prompt unchanged)."""
    if choice.tool is None:
        return replace(plan, tools=(), listed=False, extend=False)
    tools = tuple(t for t in plan.tools if t.name == choice.tool)
    return replace(plan, tools=tools, answers=False)
