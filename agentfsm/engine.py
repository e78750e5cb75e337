"""The engine: given a history and a raw model reply, decide what happens next.

It is the only place that fires machine events. It is pure: the same history and
reply always give the same decision, which is what makes replay possible.

Decisions:

- :class:`CallTools`: the reply holds acceptable tool calls (ids minted here);
- :class:`Correct`: a guard rejected the reply and budget remains: send ``message``;
- :class:`Answer`: a final answer in prose;
- :class:`Fail`: the turn cannot go on (budget spent, loop detected): ``error``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeAlias

from loguru import logger

from agentfsm._types import ToolChoice
from agentfsm.contract import render_example_call
from agentfsm.dialects import get_dialect
from agentfsm.dialects.base import ParsedReply
from agentfsm.errors import InvalidTransition, LoopDetected, RetryBudgetExceeded, RunError
from agentfsm.guards import budget, loops, run_guards
from agentfsm.guards.base import Correction, Stop
from agentfsm.machine import AgentMachine
from agentfsm.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolSpec,
    UserMessage,
)
from agentfsm.parser import parse_reply
from agentfsm.states import DECIDING_STATES, State, derive_state

__all__ = [
    "Answer",
    "CallTools",
    "Correct",
    "Decision",
    "EngineConfig",
    "Fail",
    "GuardRecord",
    "REPEATED_CALL",
    "TransitionRecord",
    "conversation_text",
    "dispatch",
    "receive",
    "step",
]


@dataclass(frozen=True)
class EngineConfig:
    """What the engine needs to know about the turn."""

    tools: tuple[ToolSpec, ...] = ()
    dialect: str = "json-action"
    tool_choice: ToolChoice = "auto"
    parallel: bool = True
    max_corrections: int = 3
    loop_threshold: int = 3
    strict: bool = False


@dataclass(frozen=True)
class TransitionRecord:
    """One fired machine event."""

    source: State
    event: str
    dest: State


@dataclass(frozen=True)
class GuardRecord:
    """One guard verdict, for transcripts and logs."""

    guard: str
    verdict: str
    reason: str
    detail: str


@dataclass(frozen=True)
class _Base:
    parsed: ParsedReply
    transitions: tuple[TransitionRecord, ...]
    guards: tuple[GuardRecord, ...] = field(default=())


@dataclass(frozen=True)
class CallTools(_Base):
    """Dispatch these calls; ``assistant`` is the message to append to the history."""

    calls: tuple[ToolCall, ...] = ()
    assistant: AssistantMessage = field(default_factory=AssistantMessage)


@dataclass(frozen=True)
class Correct(_Base):
    """Re-ask the model: append ``assistant`` (the rejected reply) and ``message``."""

    message: UserMessage = field(default_factory=lambda: UserMessage(content=""))
    assistant: AssistantMessage = field(default_factory=AssistantMessage)
    reason: str = ""
    attempt: int = 1


@dataclass(frozen=True)
class Answer(_Base):
    """A final answer."""

    content: str = ""
    assistant: AssistantMessage = field(default_factory=AssistantMessage)


@dataclass(frozen=True)
class Fail(_Base):
    """The turn ends without an answer."""

    error: RunError = field(default_factory=lambda: RunError("failed"))


Decision: TypeAlias = CallTools | Correct | Answer | Fail


def _calls_so_far(history: Sequence[Message]) -> int:
    return sum(len(m.tool_calls) for m in history if isinstance(m, AssistantMessage))


def _fire(machine: AgentMachine, event: str, records: list[TransitionRecord], **facts: object) -> None:
    source = machine.state
    dest = machine.fire(event, **facts)
    records.append(TransitionRecord(source, event, dest))


#: the correction reason for a call that repeats the previous round's call and result
REPEATED_CALL = "repeated_call"


def _first_repeat(history: Sequence[Message], calls: Sequence[ToolCall]) -> tuple[ToolCall, str] | None:
    """A call that repeats the last round exactly, when the model was not told so already.

    Weak models often re-issue the call whose result they just got. They are told once
    per round, with the result quoted (under constrained decoding the retry's grammar
    also leaves that tool out); if they insist, the call runs, and the loop guard stops
    the turn after ``loop_threshold`` identical rounds.
    """
    for msg in reversed(history):
        if isinstance(msg, ToolMessage):
            break  # only this round's corrections count
        if isinstance(msg, UserMessage):
            if msg.correction == REPEATED_CALL:
                return None
            if msg.correction is None:
                break
    for call in calls:
        if loops.repeats(history, call) == 1:
            for msg in reversed(history):
                if isinstance(msg, ToolMessage):
                    return call, msg.result.content
            return None
    return None


def conversation_text(history: Sequence[Message]) -> str:
    """What the conversation said, lowercased: system prompts, user turns (not the
    runtime's corrections) and tool results; the model's own replies are left out."""
    parts: list[str] = []
    for msg in history:
        if isinstance(msg, ToolMessage):
            parts.append(msg.result.content)
        elif isinstance(msg, UserMessage):
            if msg.correction is None:
                parts.append(msg.content)
        elif isinstance(msg, SystemMessage):
            parts.append(msg.content)
    return "\n".join(parts).lower()


def step(history: Sequence[Message], reply: str, config: EngineConfig) -> Decision:
    """Decide what to do with ``reply``, the model's answer to ``history``."""
    state = derive_state(history)
    if state not in DECIDING_STATES:
        raise InvalidTransition("step", state.value)
    machine = AgentMachine(state)
    records: list[TransitionRecord] = []
    parsed = parse_reply(reply, config.tools, config.dialect, strict=config.strict)
    logger.debug(
        "parsed reply: {} call(s), {} problem(s), truncated={}",
        len(parsed.tool_calls),
        len(parsed.problems),
        parsed.truncated,
    )
    if config.tool_choice == "none":
        # Tools are off: whatever the model wrote as an action is dropped, prose stays.
        content = parsed.content or ""
        _fire(machine, "answer", records, answer_allowed=True)
        return Answer(parsed, tuple(records), content=content, assistant=AssistantMessage(content=content))

    dialect = get_dialect(config.dialect)
    example = render_example_call(config.tools[0], dialect) if config.tools else ""
    verdict = run_guards(
        parsed,
        tools=config.tools,
        tool_choice=config.tool_choice,
        dialect_name=config.dialect,
        example=example,
        # only calls are checked against it: a prose reply need not gather the text
        source=conversation_text(history) if parsed.tool_calls else "",
    )
    if isinstance(verdict, Correction):
        guard = GuardRecord(verdict.guard, "correct", verdict.reason, verdict.detail)
        used = budget.corrections_in_turn(history)
        logger.info("guard {} fired: {} ({})", verdict.guard, verdict.reason, verdict.detail)
        if used >= config.max_corrections:
            _fire(machine, "abort", records)
            error = RetryBudgetExceeded(attempts=used + 1, last_reply=reply, reason=verdict.reason)
            return Fail(parsed, tuple(records), (guard,), error=error)
        attempt = used + 1
        text = budget.escalate(verdict.message, attempt, config.dialect, dialect.opener)
        _fire(machine, "correct", records, budget_left=True)
        logger.info("retry {} of {}: {}", attempt, config.max_corrections, verdict.reason)
        return Correct(
            parsed,
            tuple(records),
            (guard,),
            message=UserMessage(content=text, correction=verdict.reason),
            assistant=AssistantMessage(content=reply),
            reason=verdict.reason,
            attempt=attempt,
        )

    calls = list(parsed.tool_calls)
    if calls and not config.parallel:
        calls = calls[:1]
    if not calls:
        content = parsed.content or ""
        _fire(machine, "answer", records, answer_allowed=True)
        return Answer(parsed, tuple(records), content=content, assistant=AssistantMessage(content=content))

    base = _calls_so_far(history)
    minted = tuple(
        ToolCall(id=f"call_{base + i}", name=c.name, arguments=c.arguments) for i, c in enumerate(calls)
    )
    repeated = _first_repeat(history, minted)
    if repeated is not None:
        used = budget.corrections_in_turn(history)
        if used < config.max_corrections:
            call, result = repeated
            text = (
                f"You already called {call.name} with these arguments and the result was: "
                f"{result[:300]}\nUse that result. Answer the user now, or call a different tool."
            )
            guard = GuardRecord("loops", "correct", REPEATED_CALL, f"{call.name} repeated with the same arguments")
            _fire(machine, "correct", records, budget_left=True)
            return Correct(
                parsed,
                tuple(records),
                (guard,),
                message=UserMessage(content=text, correction=REPEATED_CALL),
                assistant=AssistantMessage(content=reply),
                reason=REPEATED_CALL,
                attempt=used + 1,
            )
    stop = loops.check(history, minted, threshold=config.loop_threshold)
    if isinstance(stop, Stop):
        _fire(machine, "abort", records)
        guard = GuardRecord(stop.guard, "stop", stop.reason, stop.detail)
        repeats = config.loop_threshold
        return Fail(parsed, tuple(records), (guard,), error=LoopDetected(minted[0].name, repeats))
    _fire(machine, "emit", records, calls_valid=True)
    assistant = AssistantMessage(content=parsed.content, tool_calls=minted)
    return CallTools(parsed, tuple(records), calls=minted, assistant=assistant)


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
