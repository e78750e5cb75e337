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
from agentfsm.extension import extension_options, read_extension
from agentfsm.guards import placeholder
from agentfsm.messages import AssistantMessage, Message, PromptMessage, ToolMessage, ToolSpec, UserMessage
from agentfsm.parser import parse_reply
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


def _round_corrections(history: Sequence[Message]) -> list[tuple[str, AssistantMessage]]:
    """This round's corrections, latest first: each reason with the reply it rejected
    (a round starts at the user's message or the last tool result)."""
    found: list[tuple[str, AssistantMessage]] = []
    for i in range(len(history) - 1, 0, -1):
        msg = history[i]
        if isinstance(msg, ToolMessage) or (isinstance(msg, UserMessage) and msg.correction is None):
            break
        rejected = history[i - 1]
        if isinstance(msg, UserMessage) and msg.correction and isinstance(rejected, AssistantMessage):
            found.append((msg.correction, rejected))
    return found


def _retry_tools(
    history: Sequence[Message], specs: Sequence[ToolSpec], tool_choice: str
) -> Sequence[ToolSpec]:
    """The tools the retry's grammar offers, after some corrections: the stricter retry
    under constrained decoding.

    - after a ``repeated_call`` correction, the tools already called in this user turn
      are left out: the model must use the results (answer) or try another tool;
    - the tools of every reply rejected for ``placeholder_argument`` in this round are
      left out: the model found nothing in the request to call them with.

    When a call is mandatory, the grammar keeps every offered tool.
    """
    if not history or not isinstance(history[-1], UserMessage) or call_required(tool_choice):
        return specs
    dropped: set[str] = set()
    if history[-1].correction == REPEATED_CALL:
        for msg in reversed(history):
            if isinstance(msg, UserMessage) and msg.correction is None:
                break  # the user's turn starts here
            if isinstance(msg, AssistantMessage):
                dropped.update(c.name for c in msg.tool_calls)
    for reason, rejected in _round_corrections(history):
        if reason == placeholder.REASON:
            dropped.update(c.name for c in parse_reply(rejected.content or "", specs).tool_calls)
    return [s for s in specs if s.name not in dropped] if dropped else specs


def _compact(history: Sequence[Message]) -> bool:
    """Whether an action was cut off in this round: its retries bound argument lists."""
    return any(reason == "truncated_action" for reason, _ in _round_corrections(history))


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
        offered = _retry_tools(history, specs, config.tool_choice)
        # where the backend extends a single call into a list, the reply itself is one call
        listed = config.parallel and not backend.capabilities.list_continuation
        schema = build_action_schema(offered, config.tool_choice, listed, _compact(history))
        options = options.model_copy(update={"json_schema": schema})
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
        if level == "constrained" and config.parallel and backend.capabilities.list_continuation:
            text, extra = await _extend(backend, prompt, options, history, config, text, attempts, emit)
            usage = usage + extra
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


async def _extend(
    backend: Backend,
    prompt: list[PromptMessage],
    options: GenerationOptions,
    history: Sequence[Message],
    config: EngineConfig,
    text: str,
    attempt: int,
    emit: Emit,
) -> tuple[str, Usage]:
    """The extension step of a parallel turn (:mod:`agentfsm.extension`): after a reply
    that is exactly one clean call, let the model list more. Returns the reply the
    engine sees (the list of calls kept, or ``text`` unchanged) and the step's usage."""
    parsed = parse_reply(text, config.tools, CONSTRAINED_DIALECT)
    if len(parsed.tool_calls) != 1 or parsed.rejected or parsed.truncated:
        return text, Usage()
    first = parsed.tool_calls[0]
    offered = _retry_tools(history, config.tools, config.tool_choice)
    opts = extension_options(options, first, offered, config.tool_choice)
    if opts is None:
        return text, Usage()
    emit(
        "model_request",
        attempt=attempt,
        messages=[m.model_dump(mode="json") for m in prompt],
        options=opts.model_dump(mode="json"),
        enforcement="constrained",
        extension=True,
    )
    completion = await backend.acomplete(prompt, opts)
    emit(
        "model_output",
        text=(opts.prefill or "") + completion.text,
        usage=completion.usage.model_dump(),
        finish_reason=completion.finish_reason,
        extension=True,
    )
    calls = read_extension(first, completion.text)
    if len(calls) == 1:
        return text, completion.usage
    return get_dialect(CONSTRAINED_DIALECT).render_calls(calls), completion.usage


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
