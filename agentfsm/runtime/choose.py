"""The model's call-or-answer choice, scored (:mod:`agentfsm.engine.choice`): the IO half.

Two ``score`` calls on the backend (:class:`~agentfsm.core.backend.ScoresContinuations`):
the content-free prompt first, then the real one, so that the context is left holding
the real prompt for the generation that follows. Both lists and the choice are written
as one ``choice`` event; a replay serves them back (:mod:`agentfsm.replays.backend`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from agentfsm.core.backend import GenerationOptions, ScoresContinuations
from agentfsm.core.events import ChoiceEvent
from agentfsm.core.messages import Message, PromptMessage
from agentfsm.engine.choice import Choice, content_free, continuations, narrow, pick
from agentfsm.engine.decisions import Plan
from agentfsm.runtime.model_calls import bounded
from agentfsm.runtime.recorder import Recorder
from agentfsm.runtime.tally import Tally

__all__ = ["choose"]

#: the prompt and options that carry out a plan for a history
Request = Callable[[Sequence[Message], Plan], tuple[list[PromptMessage], GenerationOptions]]


async def choose(
    scorer: ScoresContinuations,
    history: Sequence[Message],
    p: Plan,
    request: Request,
    recorder: Recorder,
    tally: Tally,
    deadline: float | None,
) -> tuple[Plan, Choice]:
    """Score the choice the next reply begins with and narrow ``p`` to it."""
    options = continuations(p.tools)
    null_prompt, null_opts = request(content_free(history), p)
    baseline = await bounded(scorer.ascore(null_prompt, null_opts, options), deadline)
    prompt, opts = request(history, p)
    scores = await bounded(scorer.ascore(prompt, opts, options), deadline)
    tally.scores += 2
    choice = pick([t.name for t in p.tools], scores, baseline)
    recorder.emit(
        ChoiceEvent, tools=choice.tools, scores=choice.scores, baseline=choice.baseline,
        tool=choice.tool, margin=choice.margin,
    )
    return narrow(p, choice), choice
