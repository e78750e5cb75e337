"""The engine: given a history and a raw model reply, decide what happens next.

It is the only place that fires machine events. It is pure: the same history and
reply always give the same decision, which is what makes replay possible.

Decisions:

- :class:`CallTools`: the reply holds acceptable tool calls (ids minted here);
- :class:`Correct`: a guard rejected the reply and budget remains: send ``message``;
- :class:`Answer`: a final answer in prose;
- :class:`Fail`: the turn cannot go on (budget spent under a required call, loop
  detected): ``error``.

When the correction budget is spent and the turn does not require a call, the turn
ends with the model's best acceptable reply: an :class:`Answer` with ``exhausted``
set (the latest prose of the round, never a rejected call); when the model wrote no
prose, with :class:`Fail` (:class:`RetryBudgetExceeded`), as under a required call.

:func:`~agentfsm.engine.plan.plan` decides what the next request offers (re-exported
here); :func:`step` decides what a reply means. Nothing else decides.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from loguru import logger

from agentfsm.core.choice import ToolChoice
from agentfsm.prompt.contract import render_call_template
from agentfsm.dialects import get_dialect
from agentfsm.core.parsed import ParsedReply
from agentfsm.core.errors import InvalidTransition, LoopDetected, RetryBudgetExceeded
from agentfsm.guards import answer_schema, budget, empty, injection, loops, repeated_call, run_guards, runtime_text
from agentfsm.guards.runtime_text import is_template
from agentfsm.guards import tool_choice as tool_choice_guard
from agentfsm.guards._history import conversation_text
from agentfsm.policy import Policies
from agentfsm.engine.authored import others_texts, runtime_texts
from agentfsm.engine.plan import plan, policies_of, tool_choice_now, wants_vote
from agentfsm.guards.base import Correction, Stop, Verdict
from agentfsm.engine.decisions import (
    Answer,
    CallTools,
    Correct,
    Decision,
    EngineConfig,
    Fail,
    GuardRecord,
    Plan,
    TransitionRecord,
)
from agentfsm.core.machine import AgentMachine
from agentfsm.core.messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolMessage,
    ToolSpec,
    UserMessage,
    round_start,
)
from agentfsm.dialects.parse import parse_reply
from agentfsm.core.states import DECIDING_STATES, State, derive_state

__all__ = [
    "Answer",
    "CallTools",
    "Correct",
    "Decision",
    "EngineConfig",
    "Fail",
    "GuardRecord",
    "Plan",
    "TransitionRecord",
    "conversation_text",
    "dispatch",
    "plan",
    "policies_of",
    "receive",
    "step",
    "tool_choice_now",
    "wants_vote",
]


def _calls_so_far(history: Sequence[Message]) -> int:
    return sum(len(m.tool_calls) for m in history if isinstance(m, AssistantMessage))


def _fire(machine: AgentMachine, event: str, records: list[TransitionRecord], **facts: object) -> None:
    source = machine.state
    dest = machine.fire(event, **facts)
    records.append(TransitionRecord(source, event, dest))


def step(history: Sequence[Message], reply: str, config: EngineConfig, finish_reason: str = "stop") -> Decision:
    """Decide what to do with ``reply``, the model's answer to ``history``.

    ``finish_reason`` is the backend's: after ``length`` the reply was cut at the token
    limit, so an action in it is a correction (``truncated_action``), never a call.
    """
    state = derive_state(history)
    if state not in DECIDING_STATES:
        raise InvalidTransition("step", state.value)
    choice = tool_choice_now(history, config)
    parsed = parse_reply(reply, config.tools, config.dialect, strict=config.strict)
    if finish_reason == "length" and parsed.tool_calls and not parsed.truncated:
        # the calls read whole, but the text stopped at the token limit: the last one may be cut
        parsed = parsed.model_copy(update={"truncated": True})
    logger.debug(
        "parsed reply: {} call(s), {} problem(s), truncated={}",
        len(parsed.tool_calls),
        len(parsed.problems),
        parsed.truncated,
    )
    policies = policies_of(config)
    if choice == ToolChoice.NONE:
        return _tools_off(_Turn(AgentMachine(state), [], parsed, reply, history, config, choice, policies))
    injected = (
        injection.data_actions(history, config.tools, config.dialect) if parsed.tool_calls else injection.NO_DATA_ACTIONS
    )
    # a reply that quotes a data action and makes its own call keeps its own call
    parsed = injection.without_quoted(parsed, injected)
    return _tools_on(_Turn(AgentMachine(state), [], parsed, reply, history, config, choice, policies), injected)


def _tools_off(turn: _Turn) -> Decision:
    """Tools are off: an action (or nothing at all) is sent back for prose, never run
    and never passed on as an empty answer."""
    parsed, config, choice = turn.parsed, turn.config, turn.choice
    off = tool_choice_guard.check(parsed, choice, config.tools, dialect_name=config.dialect)
    if not isinstance(off, Correction):
        off = empty.check(parsed, choice, config.dialect)
    refused = off if isinstance(off, Correction) else _unfit_answer(parsed.content or "", turn)
    if refused is not None:
        return _refuse(turn, refused, escalate=False)
    return _answer(turn, (), parsed.content or "")


def _tools_on(turn: _Turn, injected: injection.DataActions) -> Decision:
    """Tools are on: the reply's calls pass the guards and the policies, or its prose
    passes the answer checks."""
    parsed, history, config, choice, policies = turn.parsed, turn.history, turn.config, turn.choice, turn.policies
    # only calls are checked against it (guards, grounding): a prose reply need not gather it
    conversation = conversation_text(history) if parsed.tool_calls else ""
    dialect = get_dialect(config.dialect)
    shown = _example_tool(turn.reply, config, choice)
    example = render_call_template(shown, dialect) if shown is not None else ""
    verdict = run_guards(
        parsed,
        tools=config.tools,
        tool_choice=choice,
        dialect_name=config.dialect,
        example=example,
        source=conversation,
        injected=injected,
        refusals=policies.refusal,
    )
    if isinstance(verdict, Correction):
        return _refuse(turn, verdict, escalate=True)

    calls = list(parsed.tool_calls)
    if calls and not config.parallel:
        calls = calls[:1]
    if not calls:
        unfit = _unfit_answer(parsed.content or "", turn)
        if isinstance(unfit, Correction):
            return _refuse(turn, unfit, escalate=False)
        unsupported = policies.check_answer(history, parsed.content or "", config.tools, choice)
        if isinstance(unsupported, Correction):
            return _refuse(turn, unsupported, escalate=False)
        return _answer(turn, (), parsed.content or "")

    base = _calls_so_far(history)
    minted = tuple(
        ToolCall(id=f"call_{base + i}", name=c.name, arguments=c.arguments) for i, c in enumerate(calls)
    )
    repeat = repeated_call.check(history, minted, choice)
    if isinstance(repeat, Correction):
        # told once per round while budget remains; past that, the call runs (loops stops it)
        corrected = _correct(turn, repeat, escalate=False)
        if corrected is not None:
            return corrected
    stop = loops.check(history, minted, threshold=config.loop_threshold)
    if isinstance(stop, Stop):
        _fire(turn.machine, "abort", turn.records, must_stop=True)
        guard = GuardRecord(stop.guard, "stop", stop.reason, stop.detail)
        # the looping call, which need not be the first of the reply
        error = LoopDetected(stop.tool or minted[0].name, stop.repeats or config.loop_threshold)
        return Fail(parsed, tuple(turn.records), (guard,), error=error)
    unfounded = policies.check_call(history, minted, config.tools, choice, conversation)
    if isinstance(unfounded, Correction):
        return _refuse(turn, unfounded, escalate=False)
    _fire(turn.machine, "emit", turn.records, calls_valid=all(c.name in {t.name for t in config.tools} for c in minted))
    assistant = AssistantMessage(content=_own_prose(parsed.content, turn), tool_calls=minted)
    return CallTools(parsed, tuple(turn.records), calls=minted, assistant=assistant)


def _example_tool(reply: str, config: EngineConfig, choice: ToolChoice) -> ToolSpec | None:
    """The tool a format correction's example shows: the one ``tool_choice`` names, else
    the offered tool the reply names first (a call cut off by the token limit still
    names its tool), else the first offered. An example of another tool than the one
    the model was calling steered its retry to that tool."""
    tools = config.tools
    named = [t for t in tools if t.name == choice.name]
    if named:
        return named[0]
    first: tuple[int, ToolSpec] | None = None
    for tool in tools:
        at = _name_at(reply, tool.name)
        if at >= 0 and (first is None or at < first[0]):
            first = (at, tool)
    if first is not None:
        return first[1]
    return tools[0] if tools else None


def _name_at(text: str, name: str) -> int:
    """Where ``name`` first stands in ``text`` as a whole identifier, or -1: no letter,
    digit, ``_`` or ``-`` on either side, and no ``.`` before it (``math.add`` is another
    tool than ``add``; a full stop after a name still ends it)."""
    at = text.find(name)
    while at >= 0:
        before = text[at - 1] if at else " "
        end = at + len(name)
        after = text[end] if end < len(text) else " "
        if not (before.isalnum() or before in "_.-" or after.isalnum() or after in "_-"):
            return at
        at = text.find(name, at + 1)
    return -1


def _own_prose(content: str | None, turn: _Turn) -> str | None:
    """The prose beside a reply's calls, or None when it carries the runtime's own text
    (a model that copies a correction, then calls): the calls stand, and the runtime's
    words never reach the client as the model's."""
    if not content or not content.strip():
        return content
    copied = _copied(content, turn)
    if isinstance(copied, Correction):
        logger.debug("prose beside the calls dropped: {}", copied.detail)
        return None
    return content


def _copied(content: str, turn: _Turn) -> Verdict:
    """The verdict of :mod:`agentfsm.guards.runtime_text` on ``content``: whether it
    copies the runtime's own text of this conversation."""
    return runtime_text.check(content, *turn.authored)


def _unfit_answer(content: str, turn: _Turn) -> Correction | None:
    """The correction for an answer that copies the runtime's own text, or is not the
    JSON of the client's output schema."""
    copied = _copied(content, turn)
    if isinstance(copied, Correction):
        return copied
    if turn.config.answer_schema is None:
        return None
    verdict = answer_schema.check(content, turn.config.answer_schema)
    return verdict if isinstance(verdict, Correction) else None


def _answer(turn: _Turn, guards: tuple[GuardRecord, ...], content: str, exhausted: bool = False) -> Answer:
    _fire(turn.machine, "answer", turn.records, answer_allowed=turn.choice.allows_answer)
    cut = any(p.code == "truncated_final" for p in turn.parsed.problems)
    return Answer(
        turn.parsed,
        tuple(turn.records),
        guards,
        content=(content := turn.policies.finish_answer(content, cut)),
        assistant=AssistantMessage(content=content),
        exhausted=exhausted,
    )


@dataclass(frozen=True)
class _Turn:
    """The reply being decided, with what deciding it needs (one per :func:`step`, built
    once the reply is read: without the data actions it quotes, where tools are on)."""

    machine: AgentMachine
    records: list[TransitionRecord]
    parsed: ParsedReply
    reply: str
    history: Sequence[Message]
    config: EngineConfig
    choice: ToolChoice
    policies: Policies

    @cached_property
    def authored(self) -> tuple[list[str], list[str]]:
        """The runtime's texts in this conversation and everyone else's
        (:mod:`agentfsm.engine.authored`): read once, however many replies of the round
        are checked against them (:func:`_best_prose`)."""
        return runtime_texts(self.history, self.config, self.choice), others_texts(self.history, self.config)


def _refuse(turn: _Turn, verdict: Correction, *, escalate: bool) -> Correct | Answer | Fail:
    """The reply is refused for ``verdict``: a correction while the budget lasts, else
    the spent-budget outcome."""
    logger.info("guard {} fired: {} ({})", verdict.guard, verdict.reason, verdict.detail)
    corrected = _correct(turn, verdict, escalate=escalate)
    if corrected is not None:
        return corrected
    return _spent(turn, verdict)


def _correct(turn: _Turn, verdict: Correction, *, escalate: bool) -> Correct | None:
    """The correction for ``verdict`` while the turn's budget lasts, else ``None``."""
    config = turn.config
    attempt = budget.next_attempt(turn.history, config.max_corrections)
    if attempt is None:
        return None
    dialect = get_dialect(config.dialect)
    text = budget.escalate(verdict.message, attempt, config.dialect, dialect.opener) if escalate else verdict.message
    _fire(turn.machine, "correct", turn.records, budget_left=True)
    logger.info("retry {} of {}: {}", attempt, config.max_corrections, verdict.reason)
    return Correct(
        turn.parsed,
        tuple(turn.records),
        (GuardRecord(verdict.guard, "correct", verdict.reason, verdict.detail),),
        message=UserMessage(content=text, correction=verdict.reason),
        assistant=AssistantMessage(content=turn.reply),
        reason=verdict.reason,
        attempt=attempt,
    )


def _spent(turn: _Turn, verdict: Correction) -> Answer | Fail:
    """The budget is spent on ``verdict``: when no call is required and the model wrote
    prose this round, the turn ends with it (the latest, never a rejected call, marked
    ``exhausted``); otherwise (a required call, or no prose: the runtime never answers
    for the model) it fails with :class:`RetryBudgetExceeded`."""
    used = budget.corrections_in_turn(turn.history)
    guard = GuardRecord(verdict.guard, "correct", verdict.reason, verdict.detail)
    spent = GuardRecord(budget.GUARD, "stop", "budget_spent", f"{used} correction(s) sent; last: {verdict.reason}")
    content = _best_prose(turn) if turn.choice.allows_answer else ""
    if content:
        logger.info("correction budget spent ({}): answering with the best reply so far", verdict.reason)
        return _answer(turn, (guard, spent), content, exhausted=True)
    _fire(turn.machine, "abort", turn.records, must_stop=True)
    error = RetryBudgetExceeded(attempts=used + 1, last_reply=turn.reply, reason=verdict.reason)
    return Fail(turn.parsed, tuple(turn.records), (guard, spent), error=error)


def _best_prose(turn: _Turn) -> str:
    """The latest prose of this round's replies (action text removed) that says
    something: not empty, not a copied ``<slot>`` of the contract, none of the runtime's
    own text, the client's output schema's JSON where there is one; ``""`` when the model
    wrote none."""
    if _acceptable(turn.parsed.content, turn):
        return turn.parsed.content or ""
    for msg in reversed(turn.history[round_start(turn.history):]):
        if isinstance(msg, AssistantMessage) and msg.content:
            prose = parse_reply(msg.content, turn.config.tools, turn.config.dialect).content
            if _acceptable(prose, turn):
                return prose or ""
    return ""


def _acceptable(prose: str | None, turn: _Turn) -> bool:
    """Prose that can end a spent turn: it says something, is no copied ``<slot>``, and
    passes the answer checks (:func:`_unfit_answer`)."""
    if not prose or not prose.strip() or is_template(prose):
        return False
    return _unfit_answer(prose, turn) is None


def dispatch() -> TransitionRecord:
    """The calls of the last reply are handed to the executor (tool-emitted -> awaiting-result)."""
    machine = AgentMachine(State.TOOL_EMITTED)
    dest = machine.fire("dispatch")
    return TransitionRecord(State.TOOL_EMITTED, "dispatch", dest)


def receive(history: Sequence[Message]) -> TransitionRecord:
    """A tool result arrived (the last message of ``history``)."""
    if not history or not isinstance(history[-1], ToolMessage):
        raise InvalidTransition("receive", derive_state(history).value)
    after = derive_state(history)
    all_in = after == State.RESULT_RECEIVED
    machine = AgentMachine(State.AWAITING_RESULT)
    dest = machine.fire("receive", all_results_in=all_in)
    return TransitionRecord(State.AWAITING_RESULT, "receive", dest)
