"""The agent loop: backend + tools + engine, sync and async, with transcripts.

``Agent(tools=[...]).run("prompt")`` renders the contract, calls the backend, lets the
engine decide, runs the tools (several per reply, in order), feeds the results back,
and stops at a final answer or when a budget runs out. Every step is written to the
transcript as it happens, and reported to ``on_event`` (the CLI prints from it).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Collection, Iterable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

from loguru import logger
from pydantic import BaseModel, ValidationError

from agentfsm.core.config import DEFAULTS, RunConfig
from agentfsm.core.backend import Backend, GenerationOptions, Usage, read_options
from agentfsm.prompt.results import truncate_result
from agentfsm.engine.decide import Answer, EngineConfig, TransitionRecord, dispatch, receive
from agentfsm.core.errors import MaxStepsExceeded, UsageError
from agentfsm.core.messages import Message, SystemMessage, ToolMessage, ToolSpec, UserMessage, parse_messages
from agentfsm.runtime.mcp import START_TIMEOUT, HeldServers, check_start_timeout, with_servers
from agentfsm.runtime.tally import Tally
from agentfsm.runtime.recorder import EventHook, Recorder, run_config, run_config_fields
from agentfsm.runtime.turn import run_turn
from agentfsm.core.states import derive_state
from agentfsm.runtime.tools import ToolRegistry
from agentfsm.core.events import EVENT_MODELS, AgentRunConfig, RunStartConfig, ToolResultEvent

__all__ = ["Agent", "RunResult", "run_turn"]



@dataclass
class RunResult:
    """What a finished run produced."""

    #: the final answer
    content: str
    #: the whole conversation as message models: the system message and the prompt, each
    #: model reply (a refused one followed by its correction, a ``UserMessage`` with
    #: ``correction`` set), the tool results, and the final answer last
    messages: list[Message]
    #: the machine states the run went through, in order (``first-decision`` ... ``final``)
    path: list[str]
    #: deciding model calls (each counts against ``max_steps``)
    steps: int
    #: corrections sent back to the model
    corrections: int
    #: the tokens of every model call of the run, summed
    usage: Usage
    #: the transcript file (shared by the runs of one Agent; each run has its own run id)
    transcript: str | None = None
    #: each tool call and its result as the model saw it (cut to ``result_max_chars``):
    #: ``{"call": {"id", "name", "arguments"}, "result": {"call_id", "content", "status", "name"}}``
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    #: the correction budget ran out: ``content`` is the model's best acceptable reply
    exhausted: bool = False
    #: this run's id in its transcript and events (runs sharing a transcript file are told
    #: apart by it); None when the run recorded nothing
    run_id: str | None = None


def _default_backend() -> Backend:
    from agentfsm.backends.local import get_local_backend

    return get_local_backend()


class Agent:
    """A tool-using agent over a text-only backend.

    ``tool_choice`` binds the first decision after each user message; once tool
    results have come back the model may call again or answer (``none`` stays off).
    When the correction budget of a decision is spent: under ``auto`` the run ends with
    the model's best acceptable reply (``RunResult.exhausted``, and ``exhausted`` on the
    transcript's ``final`` event); under a required call it raises
    :class:`~agentfsm.core.errors.RetryBudgetExceeded`.
    Without ``backend``, the embedded local model is used (needs ``agentfsm[local]``).
    How the run decides is ``config`` (:class:`~agentfsm.core.config.RunConfig`: dialect,
    enforcement, tool_choice, parallel, max_steps, max_corrections, loop_threshold,
    policies, grounding, choice, consensus, consensus_samples, result_max_chars); any of
    its fields may also be passed by name.
    ``event_types`` names the events ``on_event`` wants (default: all of them); without a
    ``transcript`` the others are then not built at all (a run that records nothing
    builds no events).
    A prompt is a string or a list of messages: the models, or dicts in the OpenAI chat
    shape or agentfsm's own. Misuse (a tools value that is not a list, a backend that is
    not one, an unknown event type ...) is a :class:`~agentfsm.core.errors.UsageError`
    when the agent is made. One agent may serve many concurrent :meth:`arun` calls.

    Each run starts the ``mcp`` servers and stops them when it ends. Inside
    ``async with agent:`` they are started once, on entering, and every :meth:`arun` of
    the block uses them (a stateful server keeps its state from run to run, and none pays
    its start-up again); leaving the block stops them and closes the backend's
    connections.
    """

    def __init__(
        self,
        backend: Backend | None = None,
        tools: Sequence[Any] | ToolRegistry | None = (),
        *,
        config: RunConfig = DEFAULTS,
        system: str | None = None,
        options: GenerationOptions | Mapping[str, Any] | None = None,
        transcript: str | os.PathLike[str] | None = None,
        mcp: Sequence[str] = (),
        mcp_start_timeout: float | None = None,
        on_event: EventHook | None = None,
        transcript_config: Mapping[str, Any] | None = None,
        event_types: Collection[str] | None = None,
        **settings: Any,
    ) -> None:
        if not isinstance(config, RunConfig):
            raise UsageError(f"config must be a RunConfig, got {type(config).__name__} "
                             "(pass its fields by name instead: Agent(..., dialect='command'))")
        #: how the run decides; ``settings`` (``dialect="smiley"``, ``max_steps=4``, any
        #: :class:`~agentfsm.core.config.RunConfig` field) change it, checked the same way
        self.config = config.replace(**settings) if settings else config
        if backend is not None and not all(hasattr(backend, a) for a in ("name", "capabilities", "acomplete")):
            raise UsageError(f"backend must be a Backend (OpenAICompatBackend(...), create_backend(...), "
                             f"ScriptedBackend(...)), got {_kind(backend)}")
        self._backend = backend
        self.registry = _registry(tools)
        if system is not None and not isinstance(system, str):
            raise UsageError(f"system must be a string, got {type(system).__name__}")
        self.system = system
        self.options = read_options(options)
        if transcript is not None and not isinstance(transcript, str | os.PathLike):
            raise UsageError(f"transcript must be a file path, got {type(transcript).__name__}")
        self.transcript = transcript
        self.mcp = tuple(mcp)
        #: seconds each ``mcp`` server has to start (None: :data:`~agentfsm.runtime.mcp.START_TIMEOUT`)
        self.mcp_start_timeout = None if mcp_start_timeout is None else check_start_timeout(mcp_start_timeout)
        self.on_event = on_event
        #: fields that the transcript's run_start config adds or overrides (batch sets
        #: ``producer`` and ``task``); checked against the producer's config model
        self.transcript_config = dict(transcript_config or {})
        self.event_types = _event_types(event_types)
        #: the servers of an ``async with agent:`` block, and the registry with their tools
        self._held: tuple[HeldServers, ToolRegistry] | None = None

    async def __aenter__(self) -> Agent:
        """Start the ``mcp`` servers for every run until the block is left."""
        if self._held is not None:
            raise UsageError("this Agent is already open: one `async with agent:` block at a time")
        servers = HeldServers(self.mcp, self._start_timeout())
        self._held = (servers, await servers.start(self.registry) if self.mcp else self.registry)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Stop the servers started on entering, and close the backend's connections."""
        held, self._held = self._held, None
        try:
            if held is not None:
                await held[0].stop()
        finally:
            await self._close_backend()

    def _start_timeout(self) -> float:
        return START_TIMEOUT if self.mcp_start_timeout is None else self.mcp_start_timeout

    @property
    def backend(self) -> Backend:
        if self._backend is None:
            self._backend = _default_backend()
        return self._backend

    def run(self, prompt: str | Sequence[Message]) -> RunResult:
        """Run until a final answer (blocking). Inside a running event loop (a notebook,
        an async web handler) it is a :class:`~agentfsm.core.errors.UsageError`: await
        :meth:`arun` there.

        Each call runs on an event loop of its own; the backend's async connections
        belong to that loop, so they are closed before it ends (the backend opens new
        ones on the next call)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            if self._held is not None:
                raise UsageError("Agent.run() was called on an open agent (inside `async with agent:`); "
                                 "await agent.arun(...) there") from None
            return asyncio.run(self._run_and_close(prompt))
        raise UsageError("Agent.run() was called inside a running event loop (a notebook, an async handler); "
                         "await agent.arun(...) instead")

    async def _run_and_close(self, prompt: str | Sequence[Message]) -> RunResult:
        try:
            return await self.arun(prompt)
        finally:
            await self._close_backend()

    async def _close_backend(self) -> None:
        # only a backend that was built: the embedded model holds no connections
        aclose = getattr(self._backend, "aclose", None) if self._backend is not None else None
        if aclose is not None:
            await aclose()

    async def arun(self, prompt: str | Sequence[Message], *, tally: Tally | None = None) -> RunResult:
        """Run until a final answer. ``tally``, a fresh one when given, is kept current as
        the run goes (its steps, corrections, usage, model calls, guards and tool calls), so
        a caller can report what a run that raised had done. A run whose task is cancelled
        (or that Ctrl-C interrupts under :meth:`run`) ends its transcript with ``run_end``
        status ``cancelled`` and re-raises."""
        async with AsyncExitStack() as stack:
            if self._held is not None:  # inside `async with agent:`, its servers
                registry = self._held[1]
            elif self.mcp:
                registry = await with_servers(stack, self.registry, self.mcp, self._start_timeout())
            else:
                registry = self.registry
            return await self._loop(prompt, registry, tally if tally is not None else Tally())

    def _history(self, prompt: str | Sequence[Message]) -> list[Message]:
        history: list[Message] = []
        if self.system:
            history.append(SystemMessage(content=self.system))
        if isinstance(prompt, str):
            history.append(UserMessage(content=prompt))
        else:
            history.extend(_messages(prompt))
        return history

    async def _loop(self, prompt: str | Sequence[Message], registry: ToolRegistry, tally: Tally) -> RunResult:
        backend = self.backend
        specs: tuple[ToolSpec, ...] = registry.specs
        history = self._history(prompt)
        run = self.config
        config = EngineConfig.of(
            run,
            specs,
            # tool_choice binds the first decision of the user's turn; once results are
            # in, the model may answer (the engine's plan decides, from the history)
            relax_after_results=True,
            capabilities=backend.capabilities,
        )
        types = self.event_types
        # without a transcript, only the events on_event wants are built at all
        wants = types.__contains__ if types is not None and self.transcript is None else None
        recorder = Recorder(self.transcript, on_event=self.on_event, wants=wants)
        path = [derive_state(history).value]
        logger.info(
            "run start: tool mode {}, {} tool(s), contract injected: {}",
            bool(specs),
            len(specs),
            bool(config.tools),  # contract_for renders one exactly when there are tools
        )

        def transition(rec: TransitionRecord) -> None:
            path.append(rec.dest.value)
            recorder.transition(rec)

        try:
            # inside: a hook that fails on these still gets the transcript ended
            recorder.start(lambda: self._run_start_config(backend, config), config, history)
            recorder.contract(backend, config, run.enforcement)
            while True:
                turn = await run_turn(
                    backend,
                    history,
                    config=config,
                    enforcement=run.enforcement,
                    options=self.options,
                    recorder=recorder,
                    on_transition=lambda rec: path.append(rec.dest.value),
                    max_steps=run.max_steps,
                    steps_taken=tally.attempts,
                    tally=tally,
                )
                decision = turn.decision
                if isinstance(decision, Answer):
                    recorder.answer(decision.content, decision.exhausted)
                    recorder.end(tally)
                    return RunResult(
                        content=decision.content,
                        messages=history,
                        path=path,
                        steps=tally.attempts,
                        corrections=tally.corrections,
                        usage=tally.usage,
                        transcript=str(recorder.path) if recorder.path else None,
                        tool_calls=tally.calls,
                        exhausted=decision.exhausted,
                        run_id=recorder.run_id,
                    )
                recorder.calls(decision.calls)
                transition(dispatch())
                entries: list[dict[str, Any]] = [{"call": c.model_dump(mode="json"), "result": None} for c in decision.calls]
                tally.calls += entries
                for call, entry in zip(decision.calls, entries, strict=True):
                    result = truncate_result(await registry.aexecute(call), run.result_max_chars)
                    entry["result"] = result.model_dump(mode="json")
                    recorder.emit(ToolResultEvent, result=result)
                    history.append(ToolMessage(result=result))
                    transition(receive(history))
                if tally.attempts >= run.max_steps:
                    raise MaxStepsExceeded(run.max_steps)
        except BaseException as exc:  # a failure, or a cancellation (Ctrl-C): run_end says which
            recorder.end(tally, exc)
            raise
        finally:
            recorder.close()

    def _run_start_config(self, backend: Backend, config: EngineConfig) -> RunStartConfig:
        """The agent's ``run_start`` config; ``transcript_config`` adds or overrides fields
        (batch: ``producer`` and ``task``), checked against the producer's model."""
        fields = run_config_fields(config, self.config.enforcement, backend)
        recorded = AgentRunConfig(**fields, max_steps=self.config.max_steps, result_max_chars=self.config.result_max_chars)
        if not self.transcript_config:
            return recorded
        return run_config({**recorded.model_dump(), **self.transcript_config})


def _kind(value: Any) -> str:
    text = repr(value)
    return f"{text[:57] + '...' if len(text) > 60 else text} ({type(value).__name__})"


def _registry(tools: Any) -> ToolRegistry:
    """``tools`` as a registry: a ToolRegistry, or a list of tools (None: no tools)."""
    if isinstance(tools, ToolRegistry):
        return tools
    if tools is None:
        return ToolRegistry()
    if callable(tools) or isinstance(tools, str | bytes | Mapping) or not isinstance(tools, Iterable):
        raise UsageError(f"tools must be a list of tools (functions, RegisteredTools) or a ToolRegistry, "
                         f"got {_kind(tools)}; one tool goes in a list: tools=[fn]")
    return ToolRegistry(tools)


def _event_types(types: Collection[str] | None) -> frozenset[str] | None:
    """The event types ``on_event`` wants, each one that transcripts know."""
    if types is None:
        return None
    if isinstance(types, str):
        raise UsageError(f"event_types must be a collection of event type names, got the string {types!r}")
    wanted = frozenset(types)
    unknown = sorted(str(t) for t in wanted - EVENT_MODELS.keys())
    if unknown:
        raise UsageError(f"unknown event type(s) {', '.join(unknown)}; event types: {', '.join(EVENT_MODELS)}")
    return wanted


def _messages(prompt: object) -> list[Message]:
    """The conversation a run starts from: message models, or dicts in agentfsm's own shape
    (plain ``{"role": ..., "content": ...}`` messages are the same in OpenAI's; a chat
    conversation with tool calls is read by :func:`agentfsm.protocols.read_conversation`)."""
    if isinstance(prompt, bytes | Mapping) or not isinstance(prompt, Iterable):
        raise UsageError(f"prompt must be a string or a list of messages, got {_kind(prompt)}")
    items = list(prompt)
    if not any(isinstance(item, Mapping) for item in items):
        return items  # message models (anything else is named by the engine's reader)
    raw = [item.model_dump() if isinstance(item, BaseModel) else item for item in items]
    try:
        return parse_messages(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = first["loc"]
        where = f"[{loc[0]}]" + "".join(f".{p}" for p in loc[1:]) if loc else ""
        raise UsageError(f"prompt: messages{where}: {first['msg']} (messages are Message models or dicts in "
                         "agentfsm's own shape; read an OpenAI chat-shaped conversation with "
                         "agentfsm.protocols.read_conversation(...) first)") from exc
