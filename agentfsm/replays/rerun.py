"""Run one recorded run again the way its producer ran it, on the recorded model outputs.

The producer is read from the run's ``run_start`` config:

- ``agent`` and ``batch``: an :class:`~agentfsm.runtime.agent.Agent` with the recorded
  settings, whose tools answer with the recorded tool results, in order;
- ``proxy``: the proxy's own exchange (:mod:`agentfsm.server.exchange`) for the
  recorded normalized request: its tools, ``tool_choice`` and ``parallel``, no step
  limit, one deciding turn, streamed or not as the client asked;
- ``eval``: the benchmark's deciding turn (:func:`agentfsm.runtime.turn.recorded_turn`).

Each returns today's events for the run (recorded in memory, never through a file);
:mod:`agentfsm.replays.compare` compares them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import ValidationError

from agentfsm.replays.backend import ReplayBackend
from agentfsm.core.backend import Capabilities, GenerationOptions
from agentfsm.core.config import DEFAULTS, RunConfig
from agentfsm.engine.decide import EngineConfig
from agentfsm.core.errors import AgentFSMError, ToolExecutionError, TranscriptError
from agentfsm.core.events import (
    AgentRunConfig,
    BatchRunConfig,
    EvalRunConfig,
    ModelRequestEvent,
    ProxyRunConfig,
    RequestEvent,
    RunStartConfig,
    RunStartEvent,
    ToolResultEvent,
    TranscriptEvent,
)
from agentfsm.core.messages import ToolCall, ToolResult, ToolSpec
from agentfsm.runtime.tools import RegisteredTool, ToolRegistry
from agentfsm.runtime.recorder import Recorder
from agentfsm.runtime.turn import recorded_turn

__all__ = ["RecordedRun", "rerun"]

_E = TypeVar("_E")


def _first(events: Sequence[TranscriptEvent], kind: type[_E]) -> _E | None:
    return next((e for e in events if isinstance(e, kind)), None)


@dataclass(frozen=True)
class RecordedRun:
    """The events of one run (one run id) of a transcript."""

    run_id: str
    events: tuple[TranscriptEvent, ...]

    def _required(self, kind: type[_E]) -> _E:
        found = _first(self.events, kind)
        if found is None:
            raise TranscriptError(f"run {self.run_id!r} has no {kind.__name__}: cannot replay it")
        return found

    @property
    def config(self) -> RunStartConfig:
        """How the run was set up."""
        return self._required(RunStartEvent).config

    @property
    def request(self) -> RequestEvent:
        """The conversation and tools it started from."""
        return self._required(RequestEvent)

    @property
    def results(self) -> list[ToolResult]:
        """The recorded tool results, in order."""
        return [e.result for e in self.events if isinstance(e, ToolResultEvent)]

    def options(self) -> GenerationOptions:
        """The generation options the run was given (the first request's, less what each
        request adds: schema, prefill, list continuation)."""
        first = _first(self.events, ModelRequestEvent)
        if first is None:
            return GenerationOptions()
        return first.options.model_copy(update={"json_schema": None, "prefill": None, "list_continuation": None})

    def backend(self) -> ReplayBackend:
        """The recorded model outputs, served with the capabilities the run needed.

        Exactly what the recorded level needed is offered, so that today's ladder resolves
        to the same level (prefill changes the text the engine sees); list continuations
        only where the run recorded extension steps.
        """
        first = _first(self.events, ModelRequestEvent)
        level = first.enforcement if first is not None else "prompt"
        extended = any(isinstance(e, ModelRequestEvent) and e.extension for e in self.events)
        caps = Capabilities(
            prefill=level == "prefill", json_schema=level == "constrained", list_continuation=extended
        )
        return ReplayBackend(self.events, capabilities=caps)


class _RecordedTools(ToolRegistry):
    """A registry whose tools answer with the recorded results, in order."""

    def __init__(self, specs: Sequence[ToolSpec], results: Sequence[ToolResult]) -> None:
        super().__init__([RegisteredTool(spec, _never) for spec in specs])
        self._results = list(results)
        self._next = 0

    async def aexecute(self, call: ToolCall) -> ToolResult:
        if self._next >= len(self._results):
            raise ToolExecutionError(
                f"replay: no recorded tool result left for call {call.name!r} "
                f"(all {len(self._results)} were used)"
            )
        recorded = self._results[self._next]
        self._next += 1
        # The recorded content and status, addressed to today's call.
        return recorded.model_copy(update={"call_id": call.id, "name": call.name})


async def _never(_args: dict[str, Any]) -> Any:  # pragma: no cover - aexecute is overridden
    raise ToolExecutionError("replay tools are answered from the transcript")


def _decides_as(config: RunStartConfig) -> RunConfig:
    """The recorded run's deciding settings (dialect, enforcement, correction budget, loop
    threshold); the rest at their defaults."""
    return RunConfig(
        dialect=config.dialect,
        enforcement=config.enforcement,
        max_corrections=config.max_corrections,
        loop_threshold=config.loop_threshold,
        policies=config.policies,
        grounding="on" if config.grounding else "off",
        consensus="on" if config.consensus else "off",
        consensus_samples=config.consensus or DEFAULTS.consensus_samples,
        choice="on" if config.choice else "off",
    )


async def _rerun_agent(run: RecordedRun, config: AgentRunConfig | BatchRunConfig) -> list[TranscriptEvent]:
    from agentfsm.runtime.agent import Agent  # the agent imports the whole stack

    request = run.request
    results = run.results
    events: list[TranscriptEvent] = []
    run_config = dataclasses.replace(
        _decides_as(config),
        tool_choice=request.tool_choice,
        parallel=config.parallel,
        max_steps=config.max_steps,
        # the recorded results are already cut as the run cut them: nothing is cut again
        result_max_chars=max(DEFAULTS.result_max_chars, max((len(r.content) for r in results), default=0) + 1),
    )
    agent = Agent(
        run.backend(),
        _RecordedTools(request.tools, results),
        config=run_config,
        options=run.options(),
        on_event=events.append,
    )
    try:
        await agent.arun(list(request.messages))
    except AgentFSMError:
        pass  # the agent wrote it as an `error` event, which replay compares
    return events


async def _rerun_proxy(run: RecordedRun, config: ProxyRunConfig) -> list[TranscriptEvent]:
    from agentfsm.protocols.common import NormalizedRequest
    from agentfsm.server.exchange import Exchange, Settings
    from agentfsm.server.reply import complete
    from agentfsm.server.streaming import stream_events
    from agentfsm.server.wire import wire_for

    request = run.request
    if request.normalized is None:
        raise TranscriptError(f"run {run.run_id!r}: the proxy's request event has no normalized request")
    # fields this release no longer has (a version-1 'raw_extra') are left out
    known = {k: v for k, v in request.normalized.items() if k in NormalizedRequest.model_fields}
    try:
        normalized = NormalizedRequest.model_validate(
            {**known, "messages": request.messages, "tools": request.tools}
        )
    except ValidationError as exc:
        raise TranscriptError(f"run {run.run_id!r}: the proxy's normalized request does not read: {exc}") from exc
    events: list[TranscriptEvent] = []
    ex = Exchange(run.backend(), normalized, wire_for(normalized.protocol), Settings(run=_decides_as(config)))
    ex.record(Recorder(run_id=run.run_id, on_event=events.append))
    try:
        if normalized.stream:
            sink = ex.wire.sink(
                model=ex.model, response_id=ex.response_id, created=ex.created,
                include_usage=normalized.stream_include_usage, input_tokens=0,
            )
            async for _ in stream_events(ex, sink):
                pass
        else:
            ex.end(await complete(ex))
    except AgentFSMError as exc:
        ex.end(error=exc)  # as the proxy's handler records it (once: a stream already did)
    return events


async def _rerun_eval(run: RecordedRun, config: EvalRunConfig) -> list[TranscriptEvent]:
    request = run.request
    engine = EngineConfig.of(
        _decides_as(config), request.tools, tool_choice=request.tool_choice, parallel=config.parallel
    )
    events: list[TranscriptEvent] = []
    recorder = Recorder(run_id=run.run_id, on_event=events.append)
    await recorded_turn(run.backend(), list(request.messages), engine, config.enforcement, run.options(), recorder)
    return events


async def rerun(run: RecordedRun) -> list[TranscriptEvent]:
    """Today's events for ``run``, produced the way its producer produced them."""
    config = run.config
    if isinstance(config, ProxyRunConfig):
        return await _rerun_proxy(run, config)
    if isinstance(config, EvalRunConfig):
        return await _rerun_eval(run, config)
    return await _rerun_agent(run, config)
