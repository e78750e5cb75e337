"""One eval case's deciding turn, with its transcript events.

:func:`run_case_turn` is the benchmark's decision path: the runner
(:mod:`agentfsm.eval.runner`) scores what it decides, and replay
(:mod:`agentfsm.replays.rerun`) runs a recorded case through it again.
"""

from __future__ import annotations

from typing import Any

from agentfsm.core._types import EnforcementLevel
from agentfsm.core.backend import Backend, GenerationOptions
from agentfsm.engine.decide import CallTools, EngineConfig
from agentfsm.core.errors import RunError
from agentfsm.core.events import ModelRequestEvent, RetryEvent
from agentfsm.core.messages import Message
from agentfsm.prompt.contract import contract_hash
from agentfsm.runtime.transcript import TranscriptWriter
from agentfsm.runtime.turn import TurnResult, contract_for, run_turn

__all__ = ["run_case_turn"]


class _Steps:
    """Writes the turn's events, counting its model calls and corrections (for ``run_end``)."""

    def __init__(self, writer: TranscriptWriter) -> None:
        self.writer = writer
        self.steps = self.corrections = 0

    def __call__(self, type_: str, **fields: Any) -> None:
        match self.writer.emit(type_, **fields):
            case ModelRequestEvent(extension=False):
                self.steps += 1
            case RetryEvent():
                self.corrections += 1
            case _:
                pass


async def run_case_turn(
    backend: Backend,
    history: list[Message],
    config: EngineConfig,
    enforcement: EnforcementLevel,
    options: GenerationOptions,
    writer: TranscriptWriter,
) -> TurnResult | RunError:
    """The eval's deciding turn with its transcript events after ``request``: the contract,
    the turn, then its calls (scored, never run), its answer, or the error that ended it.

    Replay runs a recorded eval case through this same function."""

    emit = _Steps(writer)
    contract = contract_for(backend, config, enforcement)
    if contract is not None:
        emit("contract", hash=contract_hash(contract), text=contract)
    try:
        result = await run_turn(backend, history, config=config, enforcement=enforcement, options=options, emit=emit)
    except RunError as exc:
        emit("error", error=type(exc).__name__, message=str(exc))
        emit("run_end", status="error", steps=emit.steps, corrections=emit.corrections)
        return exc
    if isinstance(result.decision, CallTools):
        for call in result.decision.calls:
            emit("tool_call", call=call)
    else:
        emit("final", content=result.decision.content, exhausted=result.exhausted)
    emit("run_end", status="final", steps=result.attempts, corrections=result.corrections)
    return result
