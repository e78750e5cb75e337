"""One deciding turn: ask the model, let the engine decide, re-ask within the budget.

Shared by the agent loop and the proxy. The turn ends with tool calls to dispatch or
a final answer; a spent budget or a loop raises the engine's typed error. Corrections
are appended to ``history`` (the rejected reply and the correction message), so the
budget is counted from the history, as a stateless proxy counts it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agentfsm.backends.base import Backend, GenerationOptions, Usage
from agentfsm.contract import render_contract
from agentfsm.dialects import get_dialect
from agentfsm.engine import REPEATED_CALL, Answer, CallTools, Correct, EngineConfig, Fail, TransitionRecord, step
from agentfsm.enforcement import CONSTRAINED_DIALECT, build_action_schema, call_required, choose_level
from agentfsm.errors import MaxStepsExceeded
from agentfsm.messages import AssistantMessage, Message, PromptMessage, ToolSpec, UserMessage
from agentfsm.projection import project_history

__all__ = ["TurnResult", "contract_for", "emit_transition", "prepare_request", "record_decision", "run_turn"]

Emit = Callable[..., None]


@dataclass(frozen=True)
class TurnResult:
    """How a turn ended: calls or an answer, and what it cost."""

    decision: CallTools | Answer
    attempts: int
    corrections: int
    usage: Usage
    level: str


def _noop(*_args: Any, **_kwargs: Any) -> None:
    return None


def _without_repeated(
    history: Sequence[Message], specs: Sequence[ToolSpec], tool_choice: str
) -> Sequence[ToolSpec]:
    """After a ``repeated_call`` correction, the retry's grammar leaves out the tools
    already called in this user turn.

    That is the stricter retry under constrained decoding: the model must use the
    results (answer) or call a tool it has not tried yet.
    """
    if not history or not isinstance(history[-1], UserMessage) or history[-1].correction != REPEATED_CALL:
        return specs
    called: set[str] = set()
    for msg in reversed(history):
        if isinstance(msg, UserMessage) and msg.correction is None:
            break  # the user's turn starts here
        if isinstance(msg, AssistantMessage):
            called.update(c.name for c in msg.tool_calls)
    kept = [s for s in specs if s.name not in called]
    if call_required(tool_choice):
        return specs  # a call is mandatory: the grammar keeps every offered tool
    return kept


def _level_and_dialect(backend: Backend, config: EngineConfig, enforcement: str) -> tuple[str, str]:
    level = choose_level(enforcement, backend.capabilities, config.tool_choice) if config.tools else "prompt"
    # the grammar forces the json-protocol shape: teach and show that one format
    return level, CONSTRAINED_DIALECT if level == "constrained" else config.dialect


def contract_for(backend: Backend, config: EngineConfig, enforcement: str) -> str | None:
    """The contract the model is given for ``config`` on ``backend`` (None without tools)."""
    if not config.tools:
        return None
    _, dialect = _level_and_dialect(backend, config, enforcement)
    return render_contract(config.tools, dialect, config.tool_choice, config.parallel)


def prepare_request(
    backend: Backend,
    history: Sequence[Message],
    config: EngineConfig,
    enforcement: str,
    options: GenerationOptions,
) -> tuple[list[PromptMessage], GenerationOptions, str, str]:
    """The prompt, options, enforcement level and prefill for the next model call."""
    specs = config.tools
    level, dialect = _level_and_dialect(backend, config, enforcement)
    prefill = ""
    if level == "constrained":
        offered = _without_repeated(history, specs, config.tool_choice)
        options = options.model_copy(update={"json_schema": build_action_schema(offered, config.tool_choice)})
    elif level == "prefill" and call_required(config.tool_choice):
        prefill = get_dialect(config.dialect).opener
        options = options.model_copy(update={"prefill": prefill})
    prompt = project_history(
        history,
        specs,
        dialect=dialect,
        tool_choice=config.tool_choice,
        parallel=config.parallel,
        contract=contract_for(backend, config, enforcement),
    )
    return prompt, options, level, prefill


async def run_turn(
    backend: Backend,
    history: list[Message],
    *,
    config: EngineConfig,
    enforcement: str = "auto",
    options: GenerationOptions | None = None,
    emit: Emit = _noop,
    on_transition: Callable[[TransitionRecord], None] | None = None,
    max_steps: int | None = None,
    steps_taken: int = 0,
) -> TurnResult:
    """Call the model until the engine accepts a reply; mutates ``history``.

    On ``CallTools`` and ``Answer`` the accepted assistant message has been appended.
    ``max_steps`` bounds the model calls of a whole run, ``steps_taken`` of which
    earlier turns already made.
    """
    options = options or GenerationOptions()
    usage = Usage()
    attempts = 0
    corrections = 0
    while True:
        if max_steps is not None and steps_taken + attempts >= max_steps:
            raise MaxStepsExceeded(max_steps)
        prompt, opts, level, prefill = prepare_request(backend, history, config, enforcement, options)
        attempts += 1
        emit(
            "model_request",
            attempt=attempts,
            messages=[m.model_dump(mode="json") for m in prompt],
            options=opts.model_dump(mode="json"),
            enforcement=level,
        )
        completion = await backend.acomplete(prompt, opts)
        text = prefill + completion.text
        usage = usage + completion.usage
        emit("model_output", text=text, usage=completion.usage.model_dump(), finish_reason=completion.finish_reason)
        decision = step(history, text, config)
        record_decision(decision, emit, on_transition)
        if isinstance(decision, Correct):
            corrections += 1
            emit("retry", reason=decision.reason, attempt=decision.attempt, message=decision.message.content)
            history.extend([decision.assistant, decision.message])
            continue
        if isinstance(decision, Fail):
            raise decision.error
        history.append(decision.assistant)
        return TurnResult(decision, attempts, corrections, usage, level)


def record_decision(
    decision: CallTools | Answer | Correct | Fail,
    emit: Emit,
    on_transition: Callable[[TransitionRecord], None] | None,
) -> None:
    """Write the parse result, guard verdicts and transitions of a decision."""
    parsed = decision.parsed
    emit(
        "parse",
        content=parsed.content,
        tool_calls=[c.model_dump(mode="json") for c in parsed.tool_calls],
        problems=[p.model_dump(mode="json") for p in parsed.problems],
        truncated=parsed.truncated,
    )
    for g in decision.guards:
        emit("guard", guard=g.guard, verdict=g.verdict, reason=g.reason, detail=g.detail)
    for rec in decision.transitions:
        if on_transition is not None:
            on_transition(rec)
        emit_transition(emit, rec)


def emit_transition(emit: Emit, rec: TransitionRecord) -> None:
    """Write one fired machine event to the transcript."""
    emit("transition", **{"from": rec.source.value, "event": rec.event, "to": rec.dest.value})
