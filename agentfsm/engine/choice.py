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
    :func:`continuations` (an answer, a call, then each tool's name)."""

    tools: tuple[str, ...]
    scores: tuple[float, ...]
    baseline: tuple[float, ...]
    tool: str | None
    #: log-odds of a call over an answer, after calibration (positive: a call)
    margin: float


def continuations(tools: Sequence[ToolSpec]) -> list[str]:
    """The beginnings scored, as the json-protocol grammar writes them: an answer and a
    call (the branch), then the call of each tool (which one).

    Only where the grammar lets the model choose do the options differ: the first two
    part at the key, the others at the tool's name. The tokens the grammar forces after
    that (``: {"tool": "``) are the same for every tool, so they do not sway the choice
    of a tool, and they are not counted against a call."""
    return ['{"final"', '{"action"'] + [
        '{"action": {"tool": ' + json.dumps(tool.name, ensure_ascii=False) for tool in tools
    ]


def pick(
    tools: Sequence[str], scores: Sequence[float], baseline: Sequence[float], calibration: float = CALIBRATION
) -> Choice:
    """The choice ``scores`` make: a call when, once the ``baseline`` lean is taken off,
    the model finds a call likelier than an answer; of the tool it finds likeliest for
    this request."""
    if len(scores) != len(tools) + 2 or len(baseline) != len(scores):
        raise ValueError(f"{len(scores)} scores and {len(baseline)} baseline scores for {len(tools)} tools, a call and an answer")
    margin = (scores[1] - scores[0]) - calibration * (baseline[1] - baseline[0])
    tool = None
    if margin > 0:
        named = scores[2:]
        tool = tools[max(range(len(tools)), key=named.__getitem__)]
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
