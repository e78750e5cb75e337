"""The turn runner: ask the model, let the engine decide, re-ask within the budget.

:func:`stream_turn` is the one loop. It is an async generator that yields prose deltas
(``str``) as the :class:`~agentfsm.dialects.stream.StreamParser` releases them, when
asked to stream, and ends with the :class:`TurnResult`. The agent, the proxy (with
and without streaming), batch, eval and replay all run it; :func:`run_turn` drains it
for callers that want the result only.

What happens once, here:

- each attempt's request follows :func:`~agentfsm.engine.decide.plan` (tool_choice,
  enforcement level, retry grammar, compaction, extension), built by
  :func:`~agentfsm.runtime.request.build_request` and sent by
  :func:`~agentfsm.runtime.attempt.generate`;
- prose is *held* (not yielded while it arrives) until the engine accepts the attempt,
  then yielded whole: a refused attempt's prose never reaches the caller, so a streamed
  answer is the whole answer. With ``live``, prose is yielded as the parser releases it
  wherever a prose answer is allowed (not while a call is required, under constrained
  decoding, where the model writes JSON, nor for a client schema's JSON); a refused
  attempt's prose is then already out;
- the extension step (parallel calls by list continuation) after one clean call the engine accepts;
- usage per attempt (the backend's report, estimated only where it reports none), and
  the backend's ``finish_reason``, passed to the engine (an action cut at the token
  limit is a correction, never a call);
- corrections are appended to ``history`` (the rejected reply and the correction), so
  the budget is counted from the history, as a stateless proxy counts it.

The event loop is never held long by one reply: a streamed reply's parsing gives the
loop a turn every few milliseconds (:data:`~agentfsm.runtime.attempt.YIELD_EVERY`), and
the engine decides a long reply (:data:`~agentfsm.runtime.model_calls.OFF_LOOP_CHARS`;
:func:`~agentfsm.runtime.model_calls.decide`) in a worker thread, where parsing and
validating it cannot stall the proxy's other clients.

The turn ends with tool calls or an answer; a spent budget under a required call, a
loop, or ``max_steps`` raise the engine's typed error. Under ``auto`` a spent budget
ends the turn with the model's best acceptable reply (``TurnResult.exhausted``).
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from dataclasses import dataclass, replace
from typing import Any

from agentfsm.core._types import EnforcementLevel
from agentfsm.core.config import DEFAULTS
from agentfsm.core.backend import Backend, GenerationOptions, ScoresContinuations, Usage
from agentfsm.engine.decide import Answer, CallTools, Correct, EngineConfig, Fail, TransitionRecord
from agentfsm.engine.choice import wants_choice
from agentfsm.engine.plan import plan, wants_vote
from agentfsm.core.errors import MaxStepsExceeded, NothingToDecide, RunError, UsageError
from agentfsm.core.events import GuardEvent, ModelOutputEvent, ModelRequestEvent, ParseEvent, RetryEvent
from agentfsm.core.messages import Message
from agentfsm.core.states import DECIDING_STATES, State, derive_state, pending_calls, shared_ids
from agentfsm.core.stops import StopCutter, cut_at_stop
from agentfsm.dialects.stream import StreamParser
from agentfsm.runtime.attempt import Attempt, generate
from agentfsm.runtime.choose import choose
from agentfsm.runtime.model_calls import decide, extend, record_cut, vote
from agentfsm.runtime.recorder import NO_RECORDER, Recorder
from agentfsm.runtime.request import build_request
from agentfsm.runtime.tally import Tally

__all__ = [
    "Tally",
    "TurnResult",
    "record_decision",
    "recorded_turn",
    "run_turn",
    "stream_turn",
]

@dataclass(frozen=True)
class TurnResult:
    """How a turn ended: calls or an answer, and what it cost."""

    decision: CallTools | Answer
    attempts: int
    corrections: int
    usage: Usage
    level: str
    #: the backend's finish_reason for the accepted attempt
    finish_reason: str = "stop"
    #: the stop sequence (``options.stop``) that ended the answer, which is cut before it
    stop_sequence: str | None = None

    @property
    def exhausted(self) -> bool:
        """The correction budget ran out: the answer is the model's best acceptable reply."""
        return isinstance(self.decision, Answer) and self.decision.exhausted


async def stream_turn(
    backend: Backend,
    history: list[Message],
    *,
    config: EngineConfig,
    enforcement: EnforcementLevel = DEFAULTS.enforcement,
    options: GenerationOptions | None = None,
    recorder: Recorder = NO_RECORDER,
    on_transition: Callable[[TransitionRecord], None] | None = None,
    max_steps: int | None = None,
    steps_taken: int = 0,
    stream: bool = False,
    live: bool = False,
    deadline: float | None = None,
    tally: Tally | None = None,
) -> AsyncGenerator[str | TurnResult, None]:
    """Run one deciding turn; mutates ``history``. Yields prose deltas (only with
    ``stream``: the accepted content once decided, or with ``live`` as it arrives) and,
    last, the :class:`TurnResult`.

    On ``CallTools`` and ``Answer`` the accepted assistant message has been appended.
    ``max_steps`` bounds the model calls of a whole run, ``steps_taken`` of which
    earlier turns already made; ``deadline`` (event-loop time) bounds every wait on
    the backend; ``tally`` is kept current as the turn goes (for a caller that must
    report the cost of a turn that failed).
    """
    options = options or GenerationOptions()
    # stop sequences end the answer, never an action they would cut (core.stops): the
    # backend gets none; the prose the caller sees and the accepted answer are cut here
    cutter = StopCutter(options.stop)
    if options.stop:
        options = options.model_copy(update={"stop": ()})
    tally = tally if tally is not None else Tally()
    attempts = corrections = 0
    voted = False
    # consensus decides the first decision of a user turn; later, only where the policy
    # that refused says so (engine.decide.wants_vote)
    if not history:
        raise UsageError("the conversation is empty: there is nothing for the model to answer")
    state = derive_state(history)
    if state not in DECIDING_STATES:
        # before any model call: the engine would refuse its reply, the call paid for
        raise NothingToDecide(state.value, pending := pending_calls(history), shared_ids(history, pending))
    first = state is State.FIRST_DECISION
    usage = Usage()
    while True:
        if max_steps is not None and steps_taken + attempts >= max_steps:
            raise MaxStepsExceeded(max_steps)
        p = plan(history, config, backend.capabilities, enforcement)
        # the protocol check last: on Python 3.11 it costs ~20 µs, on every proxied request
        if config.choice and wants_choice(history, p, backend.capabilities.scoring) and isinstance(
            backend, ScoresContinuations
        ):
            p, _ = await choose(
                backend, history, p, lambda h, q: build_request(h, config, q, options)[:2], recorder, tally, deadline
            )
        prompt, opts, prefill = build_request(history, config, p, options)
        attempts += 1
        tally.attempts += 1
        recorder.emit(ModelRequestEvent, attempt=attempts, messages=tuple(prompt), options=opts, enforcement=p.level)
        # held unless live; held even then: a required call's preamble, JSON under a grammar,
        # and an answer that must be a client schema's JSON (checked whole before it is seen)
        hold = (not live or p.level == "constrained" or p.tool_choice.requires_call
                or config.answer_schema is not None)
        parser = StreamParser(config.tools, config.dialect) if stream else None
        out = Attempt()
        try:
            # a lowered limit is noted once the upstream answers, before any text or a
            # keep-alive leaves (a proxy's headers go with it)
            async for text in generate(backend, prompt, opts, prefill, out, parser=parser, hold=hold, deadline=deadline,
                                       on_limit=tally.sent_limit):
                if shown := cutter.feed(text):
                    yield shown
        except BaseException:  # the client left, or the stream failed: what it had seen is recorded
            record_cut(recorder, tally, prompt, out.parts, prefill, out.max_tokens_sent)
            raise
        tally.model_calls += 1
        usage += out.usage
        tally.charge(out.usage)
        tally.sent_limit(out.max_tokens_sent)
        recorder.emit(ModelOutputEvent, text=out.text, usage=out.usage, finish_reason=out.finish_reason,
                      max_tokens_sent=out.max_tokens_sent)
        # the reply is read, and corrected, in the format this attempt asked for (under a
        # grammar the json-protocol shape: a correction then shows that shape, not another)
        deciding = config if p.dialect == config.dialect else replace(config, dialect=p.dialect)
        decision = await decide(history, out.text, deciding, out.finish_reason)
        if p.extend and not isinstance(decision, Correct):
            # only an accepted call is extended (a refused one is corrected as it is: the
            # list would be refused with it); the extension may add calls, never refuse
            # the call the model made: a refused list falls back to its first call
            text, extended = await extend(backend, history, prompt, options, config, p, out.text, attempts, recorder, deadline)
            if extended is not None:
                usage += extended
                tally.charge(extended)
            if text != out.text:
                listed = await decide(history, text, deciding, out.finish_reason)
                if isinstance(listed, Correct):
                    recorder.emit(GuardEvent, guard="extension", verdict="accept", reason="first_call_alone",
                                  detail=f"the extended list was refused ({listed.reason}); its first call is accepted alone")
                else:
                    decision = listed
        record_decision(decision, recorder, on_transition, tally)
        if (isinstance(decision, Correct) and config.consensus and not voted
                and wants_vote(config, decision.reason, first)):
            voted = True  # a refused first decision's candidates, before its correction
            chosen, extra = await vote(
                backend, prompt, opts, prefill, history, decision, out.usage.completion_tokens, deciding,
                p.level, attempts, recorder, deadline, tally,
            )
            usage += extra  # the candidates are charged on the tally one by one
            if chosen is not None:
                decision = chosen
                record_decision(decision, recorder, on_transition, tally)
        if isinstance(decision, Correct):
            corrections += 1
            tally.corrections += 1
            recorder.emit(RetryEvent, reason=decision.reason, attempt=decision.attempt, message=decision.message.content)
            history.extend([decision.assistant, decision.message])
            continue
        if isinstance(decision, Fail):
            raise decision.error
        if stream:
            rest = _unsent(decision.assistant.content or "", "".join(out.forwarded))
            if shown := cutter.feed(rest) + cutter.flush():
                yield shown
        if isinstance(decision, Answer) and cutter.stops:
            content, stopped = cut_at_stop(decision.content, cutter.stops)
            if stopped is not None:
                cut = decision.assistant.model_copy(update={"content": content or None})
                decision = replace(decision, content=content, assistant=cut)
        else:
            stopped = None
        history.append(decision.assistant)
        yield TurnResult(decision, attempts, corrections, usage, p.level, out.finish_reason, stopped)
        return


async def run_turn(backend: Backend, history: list[Message], **kwargs: Any) -> TurnResult:
    """Call the model until the engine accepts a reply (:func:`stream_turn`, drained);
    mutates ``history``. Takes :func:`stream_turn`'s keyword arguments. The stream is closed
    on return (left to the event loop, a loop that never waited kept every turn's frame)."""
    async with aclosing(stream_turn(backend, history, **kwargs)) as items:
        async for item in items:
            if isinstance(item, TurnResult):
                return item
    raise AssertionError("stream_turn ended without a result")  # pragma: no cover


def _unsent(content: str, forwarded: str) -> str:
    """What of the accepted content the caller has not seen yet.

    Normally nothing (the parser forwarded it all) or everything (prose was held). When
    the engine's content is the forwarded prose plus more (e.g. a ``final`` object's
    text), the rest; when they disagree otherwise, nothing: text cannot be taken back.
    """
    if not forwarded.strip():
        return content
    if content.startswith(forwarded):
        return content[len(forwarded):]
    if content.strip().startswith(forwarded.strip()):
        return content.strip()[len(forwarded.strip()):]
    return ""


def record_decision(
    decision: CallTools | Answer | Correct | Fail,
    recorder: Recorder,
    on_transition: Callable[[TransitionRecord], None] | None,
    tally: Tally | None = None,
) -> None:
    """Write the parse result, guard verdicts and transitions of a decision; count its
    corrections and stops by guard on ``tally``."""
    parsed = decision.parsed
    recorder.emit(ParseEvent, content=parsed.content, tool_calls=parsed.tool_calls, problems=parsed.problems,
                  truncated=parsed.truncated)
    for g in decision.guards:
        recorder.emit(GuardEvent, guard=g.guard, verdict=g.verdict, reason=g.reason, detail=g.detail)
        if tally is not None and g.verdict in ("correct", "stop"):
            tally.guarded(g.guard)
    for rec in decision.transitions:
        if on_transition is not None:
            on_transition(rec)
        recorder.transition(rec)


async def recorded_turn(
    backend: Backend,
    history: list[Message],
    config: EngineConfig,
    enforcement: EnforcementLevel,
    options: GenerationOptions,
    recorder: Recorder,
) -> TurnResult | RunError:
    """One deciding turn framed on ``recorder`` (after its ``start``): the contract, the
    turn, then its calls (decided, not run), its answer, or the error that ended it, and
    ``run_end``. The benchmark's decision path; replay runs a recorded eval case through
    it again."""
    recorder.contract(backend, config, enforcement)
    tally = Tally()
    try:
        result = await run_turn(
            backend, history, config=config, enforcement=enforcement, options=options, recorder=recorder, tally=tally
        )
    except BaseException as exc:  # a RunError is the result; a cancellation (Ctrl-C) ends it too
        recorder.end(tally, exc)
        if isinstance(exc, RunError):
            return exc
        raise
    if isinstance(result.decision, CallTools):
        recorder.calls(result.decision.calls)
    else:
        recorder.answer(result.decision.content, result.exhausted)
    recorder.end(tally)
    return result
