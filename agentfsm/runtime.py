"""The agent loop: backend + tools + engine, sync and async, with transcripts.

``Agent(tools=[...]).run("prompt")`` renders the contract, calls the backend, lets the
engine decide, runs the tools (several per reply, in order), feeds the results back,
and stops at a final answer or when a budget runs out. Every step is written to the
transcript as it happens, and reported to ``on_event`` (the CLI prints from it).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field, replace
from typing import Any

from loguru import logger

from agentfsm._types import ToolChoice
from agentfsm.backends.base import Backend, GenerationOptions, Usage
from agentfsm.continuation import truncate_result
from agentfsm.contract import contract_hash
from agentfsm.dialects import get_dialect
from agentfsm.engine import Answer, EngineConfig, TransitionRecord, dispatch, receive
from agentfsm.errors import AgentFSMError, MaxStepsExceeded, UsageError
from agentfsm.messages import Message, SystemMessage, ToolMessage, ToolSpec, UserMessage
from agentfsm.turn import contract_for, emit_transition, run_turn
from agentfsm.states import derive_state
from agentfsm.tools import ToolRegistry
from agentfsm.transcript import TranscriptWriter

__all__ = ["Agent", "RunResult", "run_turn"]

EventHook = Callable[[dict[str, Any]], None]


@dataclass
class RunResult:
    """What a finished run produced."""

    content: str
    messages: list[Message]
    path: list[str]
    steps: int
    corrections: int
    usage: Usage
    transcript: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)


def _default_backend() -> Backend:
    from agentfsm.backends.local import get_local_backend

    return get_local_backend()


class Agent:
    """A tool-using agent over a text-only backend.

    ``tool_choice`` binds the first decision after each user message; once tool
    results have come back the model may call again or answer (``none`` stays off).
    Without ``backend``, the embedded local model is used (needs ``agentfsm[local]``).
    """

    def __init__(
        self,
        backend: Backend | None = None,
        tools: Sequence[Any] | ToolRegistry = (),
        *,
        dialect: str = "json-action",
        tool_choice: ToolChoice = "auto",
        parallel: bool = True,
        enforcement: str = "auto",
        max_steps: int = 10,
        max_corrections: int = 3,
        loop_threshold: int = 3,
        system: str | None = None,
        options: GenerationOptions | None = None,
        transcript: str | os.PathLike[str] | None = None,
        mcp: Sequence[str] = (),
        result_max_chars: int = 8000,
        on_event: EventHook | None = None,
    ) -> None:
        get_dialect(dialect)  # fail early on an unknown dialect
        if max_steps < 1:
            raise UsageError("max_steps must be at least 1")
        self._backend = backend
        self.registry = tools if isinstance(tools, ToolRegistry) else ToolRegistry(tools)
        self.dialect = dialect
        self.tool_choice = tool_choice
        self.parallel = parallel
        self.enforcement = enforcement
        self.max_steps = max_steps
        self.max_corrections = max_corrections
        self.loop_threshold = loop_threshold
        self.system = system
        self.options = options or GenerationOptions()
        self.transcript = transcript
        self.mcp = tuple(mcp)
        self.result_max_chars = result_max_chars
        self.on_event = on_event

    @property
    def backend(self) -> Backend:
        if self._backend is None:
            self._backend = _default_backend()
        return self._backend

    def run(self, prompt: str | Sequence[Message]) -> RunResult:
        """Run until a final answer (blocking). Not for use inside a running event loop."""
        return asyncio.run(self.arun(prompt))

    async def arun(self, prompt: str | Sequence[Message]) -> RunResult:
        """Run until a final answer."""
        async with AsyncExitStack() as stack:
            registry = self.registry
            if self.mcp:
                from agentfsm.mcp_tools import mcp_tools

                registry = ToolRegistry(self.registry)
                for command in self.mcp:
                    for tool in await stack.enter_async_context(mcp_tools(command)):
                        registry.add(tool)
            return await self._loop(prompt, registry)

    def _history(self, prompt: str | Sequence[Message]) -> list[Message]:
        history: list[Message] = []
        if self.system:
            history.append(SystemMessage(content=self.system))
        if isinstance(prompt, str):
            history.append(UserMessage(content=prompt))
        else:
            history.extend(prompt)
        return history

    async def _loop(self, prompt: str | Sequence[Message], registry: ToolRegistry) -> RunResult:
        backend = self.backend
        specs: tuple[ToolSpec, ...] = registry.specs
        history = self._history(prompt)
        config = EngineConfig(
            tools=specs,
            dialect=self.dialect,
            tool_choice=self.tool_choice,
            parallel=self.parallel,
            max_corrections=self.max_corrections,
            loop_threshold=self.loop_threshold,
        )
        # tool_choice binds the first decision of the user's turn; once results are in,
        # the model may answer (tool history alone never makes another call mandatory).
        followup = config if self.tool_choice == "none" else replace(config, tool_choice="auto")
        writer = TranscriptWriter(self.transcript)
        emit = self._emitter(writer)
        path = [derive_state(history).value]
        usage = Usage()
        corrections = 0
        calls_log: list[dict[str, Any]] = []
        contract = contract_for(backend, config, self.enforcement)
        emit(
            "run_start",
            config={
                "dialect": self.dialect,
                "tool_choice": self.tool_choice,
                "enforcement": self.enforcement,
                "backend": backend.name,
                "tools": [s.name for s in specs],
                "max_steps": self.max_steps,
                "parallel": self.parallel,
            },
        )
        emit(
            "request",
            messages=[m.model_dump(mode="json") for m in history],
            tools=[s.model_dump(mode="json") for s in specs],
            tool_choice=self.tool_choice,
        )
        if contract is not None:
            emit("contract", hash=contract_hash(contract), text=contract)
        logger.info(
            "run start: tool mode {}, {} tool(s), contract injected: {}",
            bool(specs),
            len(specs),
            contract is not None,
        )

        def transition(rec: TransitionRecord) -> None:
            path.append(rec.dest.value)
            emit_transition(emit, rec)

        try:
            steps = 0
            while True:
                turn = await run_turn(
                    backend,
                    history,
                    config=config if steps == 0 else followup,
                    enforcement=self.enforcement,
                    options=self.options,
                    emit=emit,
                    on_transition=lambda rec: path.append(rec.dest.value),
                    max_steps=self.max_steps,
                    steps_taken=steps,
                )
                steps += turn.attempts
                corrections += turn.corrections
                usage = usage + turn.usage
                decision = turn.decision
                if isinstance(decision, Answer):
                    emit("final", content=decision.content)
                    emit("run_end", status="final", steps=steps, corrections=corrections)
                    return RunResult(
                        content=decision.content,
                        messages=history,
                        path=path,
                        steps=steps,
                        corrections=corrections,
                        usage=usage,
                        transcript=str(writer.path) if writer.path else None,
                        tool_calls=calls_log,
                    )
                for call in decision.calls:
                    emit("tool_call", call=call.model_dump(mode="json"))
                transition(dispatch())
                for call in decision.calls:
                    result = truncate_result(await registry.aexecute(call), self.result_max_chars)
                    calls_log.append({"call": call.model_dump(mode="json"), "result": result.model_dump(mode="json")})
                    emit("tool_result", result=result.model_dump(mode="json"))
                    history.append(ToolMessage(result=result))
                    transition(receive(history))
                if steps >= self.max_steps:
                    raise MaxStepsExceeded(self.max_steps)
        except AgentFSMError as exc:
            emit("error", error=type(exc).__name__, message=str(exc))
            emit("run_end", status="error", steps=steps, corrections=corrections)
            raise
        finally:
            writer.close()

    def _emitter(self, writer: TranscriptWriter) -> Callable[..., None]:
        hook = self.on_event

        def emit(type_: str, **fields: Any) -> None:
            event = writer.emit(type_, **fields)
            if hook is not None:
                hook(event)

        return emit
