"""One run's transcript events, written through one object by every producer.

A :class:`Recorder` is made per run (an agent run, a proxied request, an eval case) and
owns the events that frame it, the same way for each:

- :meth:`Recorder.start`: ``run_start`` (the producer's config) and ``request``;
- :meth:`Recorder.contract`: ``contract`` (the system prompt's hash and text);
- :meth:`Recorder.calls` (``tool_call`` per call) or :meth:`Recorder.answer` (``final``);
- :meth:`Recorder.end`: ``error`` when the run failed, and ``run_end`` (``final``, ``error``,
  or ``cancelled`` for a run cancelled or interrupted before it ended); then it closes.

In between, the turn runner and the agent write the run's own events through
:meth:`Recorder.emit`, which takes the event's model and its fields
(``recorder.emit(GuardEvent, guard=..., verdict=..., reason=..., detail=...)``): mypy
checks the fields against the model at every writer. An event is built (and
validated, the same for a file and a hook) only when something records it: a run that
records nothing builds no event at all. Building a proxied turn's dozen events costs
about 65 µs (measured on the bench machine), against the proxy's whole added ~0.85 ms.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal, ParamSpec, TypedDict, TypeVar

from pydantic import TypeAdapter, ValidationError

from agentfsm.core._types import DialectName, EnforcementLevel, JSONObject, PolicyName
from agentfsm.core.choice import ToolChoice
from agentfsm.core.backend import Backend
from agentfsm.core.errors import ClientGone, TranscriptError
from agentfsm.core.events import (
    ContractEvent,
    ErrorEvent,
    Event,
    FinalEvent,
    RequestEvent,
    RunEndEvent,
    RunStartConfig,
    RunStartEvent,
    ToolCallEvent,
    TranscriptEvent,
    TransitionEvent,
    build_event,
    event_type,
)
from agentfsm.core.messages import Message, ToolCall
from agentfsm.engine.decide import EngineConfig, TransitionRecord
from agentfsm.engine.plan import policies_of
from agentfsm.prompt.contract import contract_hash, render_contract
from agentfsm.prompt.enforcement import CONSTRAINED_DIALECT, choose_level
from agentfsm.runtime.tally import Tally
from agentfsm.runtime.transcript import TranscriptWriter

__all__ = [
    "NO_RECORDER",
    "EventHook",
    "Recorder",
    "RunConfigFields",
    "contract_for",
    "run_config",
    "run_config_fields",
]

EventHook = Callable[[TranscriptEvent], None]
_E = TypeVar("_E", bound=Event)
_P = ParamSpec("_P")
_CONFIG: TypeAdapter[RunStartConfig] = TypeAdapter(RunStartConfig)
#: what ends a run from outside it (a cancelled task, Ctrl-C, the proxy's client leaving):
#: ``run_end`` says ``cancelled``
_CANCELLATIONS = (asyncio.CancelledError, KeyboardInterrupt, ClientGone)


class RunConfigFields(TypedDict):
    """The ``run_start`` config fields every producer records, from its engine config."""

    dialect: DialectName
    tool_choice: ToolChoice
    enforcement: EnforcementLevel
    backend: str
    tools: tuple[str, ...]
    parallel: bool
    max_corrections: int
    loop_threshold: int
    grounding: bool
    policies: tuple[PolicyName, ...]
    consensus: int
    choice: bool


def run_config_fields(config: EngineConfig, enforcement: EnforcementLevel, backend: Backend) -> RunConfigFields:
    """What every producer's ``run_start`` says of how the run decides."""
    return RunConfigFields(
        dialect=config.dialect,
        tool_choice=config.tool_choice,
        enforcement=enforcement,
        backend=backend.name,
        tools=tuple(t.name for t in config.tools),
        parallel=config.parallel,
        max_corrections=config.max_corrections,
        loop_threshold=config.loop_threshold,
        grounding=config.grounding,
        policies=policies_of(config).names,
        consensus=config.consensus,
        choice=config.choice and backend.capabilities.scoring,
    )


def run_config(data: JSONObject) -> RunStartConfig:
    """A producer's ``run_start`` config from plain fields (told apart by ``producer``);
    a misfit is a :class:`~agentfsm.core.errors.TranscriptError`."""
    try:
        return _CONFIG.validate_python(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"][1:]) or "config"
        raise TranscriptError(f"bad run_start event: config.{where}: {first['msg']}") from exc


def contract_for(backend: Backend, config: EngineConfig, enforcement: EnforcementLevel) -> str | None:
    """The contract the model is given for ``config`` on ``backend`` (None without tools)."""
    if not config.tools:
        return None
    level = choose_level(enforcement, backend.capabilities, config.tool_choice)
    dialect = CONSTRAINED_DIALECT if level == "constrained" else config.dialect
    return render_contract(
        config.tools, dialect, config.tool_choice, config.parallel, constrained=level == "constrained",
        answer_schema=config.answer_schema,
    )


class Recorder:
    """Where one run's events go: a transcript file (``path``, every event), an
    ``on_event`` hook (the types ``wants`` says; default all), both, or nowhere."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        run_id: str | None = None,
        on_event: EventHook | None = None,
        wants: Callable[[str], bool] | None = None,
    ) -> None:
        records = path is not None or on_event is not None
        self._writer = TranscriptWriter(path, run_id) if records else None
        self._file = path is not None
        self._hook = on_event
        self._hook_wants = wants
        self._ended = False

    @property
    def recording(self) -> bool:
        """Whether any event is recorded (so worth building)."""
        return self._writer is not None

    @property
    def run_id(self) -> str | None:
        """The run's id in its events (None when nothing is recorded)."""
        return self._writer.run_id if self._writer is not None else None

    @property
    def path(self) -> Path | None:
        """The transcript file, when there is one."""
        return self._writer.path if self._writer is not None else None

    def wants(self, type_: str) -> bool:
        """Whether an event of ``type_`` is recorded (a file holds every type)."""
        return self._file or self._hooked(type_)

    def _hooked(self, type_: str) -> bool:
        return self._hook is not None and (self._hook_wants is None or self._hook_wants(type_))

    def emit(self, kind: Callable[_P, _E], /, *args: _P.args, **fields: _P.kwargs) -> None:
        """Record one event of model ``kind`` with ``fields`` (built only when it is recorded;
        a field that does not fit is a :class:`~agentfsm.core.errors.TranscriptError`)."""
        written = self._write(kind, *args, **fields)
        if written is not None:
            self._call_hook(written)

    def _write(self, kind: Callable[_P, _E], /, *args: _P.args, **fields: _P.kwargs) -> TranscriptEvent | None:
        """Write one event; the event as written when the hook wants it, else None."""
        if self._writer is None:
            return None
        hooked = self._hooked(event_type(kind))
        if not (self._file or hooked):
            return None
        written = self._writer.write(build_event(kind, *args, **fields))
        return written if hooked else None

    def _call_hook(self, event: TranscriptEvent) -> None:
        assert self._hook is not None
        self._hook(event)

    # -- what frames a run -------------------------------------------------------
    def start(
        self,
        config: Callable[[], RunStartConfig],
        engine: EngineConfig,
        messages: Sequence[Message],
        normalized: Callable[[], JSONObject] | None = None,
    ) -> None:
        """``run_start`` (``config``, built when recorded) and ``request``: the conversation,
        the tools and ``tool_choice`` of ``engine``, and the proxy's ``normalized`` request."""
        if self.wants("run_start"):
            self.emit(RunStartEvent, config=config())
        if self.wants("request"):
            self.emit(
                RequestEvent, messages=tuple(messages), tools=engine.tools, tool_choice=engine.tool_choice,
                normalized=normalized() if normalized is not None else None,
            )

    def contract(self, backend: Backend, engine: EngineConfig, enforcement: EnforcementLevel) -> None:
        """``contract``: what the model is told (nothing without tools)."""
        text = contract_for(backend, engine, enforcement) if self.wants("contract") else None
        if text is not None:
            self.emit(ContractEvent, hash=contract_hash(text), text=text)

    def transition(self, record: TransitionRecord) -> None:
        """One fired machine event."""
        self.emit(TransitionEvent, from_=record.source.value, event=record.event, to=record.dest.value)

    def calls(self, calls: Sequence[ToolCall]) -> None:
        """The calls the run decided (the agent runs them; the proxy hands them over)."""
        for call in calls:
            self.emit(ToolCallEvent, call=call)

    def answer(self, content: str, exhausted: bool = False) -> None:
        """The final answer (``exhausted``: the budget ran out; the best reply so far)."""
        self.emit(FinalEvent, content=content, exhausted=exhausted)

    def end(self, tally: Tally, error: BaseException | None = None) -> None:
        """``error`` (when ``error``) and ``run_end`` with what ``tally`` counted; closes
        the transcript. Once: a second call does nothing.

        A cancellation (:class:`asyncio.CancelledError`, :class:`KeyboardInterrupt`, the
        proxy's :class:`~agentfsm.core.errors.ClientGone`) is not an error of the run: it writes no ``error`` event, only ``run_end`` with status
        ``cancelled``, so replay reads the run as cut off there rather than as a decision.

        Both lines are written before the ``on_event`` hook sees them: a hook that raises
        cannot leave the transcript without its end. The hook's first failure is then
        raised, as it is from any other event."""
        if self._ended or self._writer is None:
            return
        self._ended = True
        status: Literal["final", "error", "cancelled"] = "final"
        hooked: list[TranscriptEvent | None] = []
        try:
            if isinstance(error, _CANCELLATIONS):
                status = "cancelled"
            elif error is not None:
                status = "error"
                hooked.append(
                    self._write(ErrorEvent, error=type(error).__name__, message=str(error) or type(error).__name__)
                )
            hooked.append(self._write(RunEndEvent, status=status, steps=tally.attempts, corrections=tally.corrections))
        finally:
            self.close()
        failure: BaseException | None = None
        for event in hooked:
            if event is not None:
                try:
                    self._call_hook(event)
                except BaseException as exc:  # raised below, once the hook has seen the end
                    failure = failure or exc
        if failure is not None:
            raise failure

    def close(self) -> None:
        """Close the transcript file (further events are an error)."""
        if self._writer is not None:
            self._writer.close()


#: the recorder that records nothing (the turn runner then builds no event)
NO_RECORDER = Recorder()
