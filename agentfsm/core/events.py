"""Typed transcript events: one frozen model per event type, a union discriminated on ``type``.

A transcript is one JSON object per line. Every event carries the envelope ``v``
(schema version), ``run`` (run id), ``seq`` (its place in the run), ``t`` (UTC
ISO-8601 time) and ``type``; the rest of its fields depend on the type:

================  =============================================================
``run_start``     ``config``: how the run was set up (:data:`RunStartConfig`, by producer)
``request``       ``messages``, ``tools``, ``tool_choice``; the proxy adds ``normalized``
``contract``      ``hash`` and ``text`` of the system prompt sent
``model_request`` ``attempt``, ``messages``, ``options``, ``enforcement``; ``extension``
``model_output``  ``text`` (prefill included), ``usage``, ``finish_reason``; ``extension``
``parse``         ``content``, ``tool_calls``, ``problems``, ``truncated``
``guard``         ``guard``, ``verdict``, ``reason``, ``detail``
``retry``         ``reason``, ``attempt``, ``message`` (the correction sent)
``transition``    ``from``, ``event``, ``to``
``tool_call``     ``call``
``tool_result``   ``result``
``final``         ``content``; ``exhausted`` when the budget ran out under ``auto``
``error``         ``error`` (class name), ``message``
``run_end``       ``status``, ``steps``, ``corrections``
================  =============================================================

A ``model_request`` / ``model_output`` pair with ``extension: true`` is the extension
step of a parallel turn (:mod:`agentfsm.prompt.extension`); the field is written only
when true.

Versions: 2 added ``producer``, ``max_corrections`` and ``loop_threshold`` to the run's
config. Version-1 transcripts still read: their producer is inferred (the proxy's
config names a ``protocol``) and the two limits take their defaults. This module does no IO;
:mod:`agentfsm.runtime.transcript` writes and reads the files.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal, TypeAlias, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from agentfsm.core._types import DialectName, EnforcementLevel, JSONObject, ToolChoice
from agentfsm.core.config import DEFAULTS
from agentfsm.core.backend import GenerationOptions, Usage
from agentfsm.core.errors import TranscriptError
from agentfsm.core.messages import Message, PromptMessage, ToolCall, ToolResult, ToolSpec
from agentfsm.dialects.base import Problem

__all__ = [
    "AgentRunConfig",
    "BatchRunConfig",
    "ContractEvent",
    "DECISION_TYPES",
    "ENVELOPE",
    "ErrorEvent",
    "EVENT_MODELS",
    "EvalRunConfig",
    "FinalEvent",
    "GuardEvent",
    "ModelOutputEvent",
    "ModelRequestEvent",
    "ParseEvent",
    "Producer",
    "ProxyRunConfig",
    "READABLE_VERSIONS",
    "RequestEvent",
    "RetryEvent",
    "RunStartConfig",
    "RunEndEvent",
    "RunStartEvent",
    "SCHEMA_VERSION",
    "TranscriptEvent",
    "TransitionEvent",
    "ToolCallEvent",
    "ToolResultEvent",
    "event_fields",
    "parse_event",
]

#: the version this release writes
SCHEMA_VERSION = 2
#: the versions this release reads
READABLE_VERSIONS: tuple[int, ...] = (1, 2)
#: the envelope fields every event carries besides ``type``
ENVELOPE: tuple[str, ...] = ("v", "run", "seq", "t")

Producer: TypeAlias = Literal["agent", "proxy", "batch", "eval"]

_FROZEN = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


# -- the run's configuration, by producer ------------------------------------------


class _RunConfigBase(BaseModel):
    model_config = _FROZEN

    #: what wrote the transcript (each subclass fixes it)
    producer: Producer
    dialect: DialectName = DEFAULTS.dialect
    tool_choice: ToolChoice = DEFAULTS.tool_choice
    #: the enforcement asked for (``auto`` included); the level used is on each model_request
    enforcement: EnforcementLevel = DEFAULTS.enforcement
    #: the backend's name
    backend: str = ""
    #: the names of the tools offered
    tools: tuple[str, ...] = ()
    parallel: bool = DEFAULTS.parallel
    #: corrections allowed in one deciding turn
    max_corrections: int = DEFAULTS.max_corrections
    #: the same call this many times in a row stops the run
    loop_threshold: int = DEFAULTS.loop_threshold
    #: the grounding guard ran (absent in transcripts written before it existed: off)
    grounding: bool = False
    #: candidates drawn after a refused reply (0: none; absent in older transcripts)
    consensus: int = 0
    #: model calls allowed in the whole run (None: one deciding turn, no run limit)
    max_steps: int | None = None


class AgentRunConfig(_RunConfigBase):
    """An :class:`~agentfsm.runtime.agent.Agent` run (Python API, ``agentfsm run``)."""

    producer: Literal["agent"] = "agent"
    max_steps: int = DEFAULTS.max_steps


class BatchRunConfig(_RunConfigBase):
    """One task of ``agentfsm batch``: an agent run, with the task's id."""

    producer: Literal["batch"] = "batch"
    max_steps: int = DEFAULTS.max_steps
    task: str | None = None


class ProxyRunConfig(_RunConfigBase):
    """One request through ``agentfsm serve``: one deciding turn, no step limit."""

    producer: Literal["proxy"] = "proxy"
    max_steps: None = None
    #: the wire protocol the client spoke (as :data:`agentfsm.protocols.WireProtocol`)
    protocol: Literal["openai", "responses", "anthropic"]
    stream: bool = False
    #: the served model's client-visible name (absent in transcripts written before models files)
    model_entry: str | None = None
    #: where its settings came from: ``flags``, ``models file`` or ``profile FILE``
    settings_from: str | None = None


class EvalRunConfig(_RunConfigBase):
    """One benchmark case of ``agentfsm eval``: one deciding turn, calls scored, never run."""

    producer: Literal["eval"] = "eval"
    max_steps: None = None
    case: str
    category: str


#: a run's configuration, told apart by ``producer``
RunStartConfig: TypeAlias = Annotated[
    AgentRunConfig | BatchRunConfig | ProxyRunConfig | EvalRunConfig, Field(discriminator="producer")
]


# -- events ------------------------------------------------------------------------


class _Event(BaseModel):
    model_config = _FROZEN
    #: fields written only when they differ from their default (absent in most events)
    _sparse: ClassVar[frozenset[str]] = frozenset()

    v: int = SCHEMA_VERSION
    run: str
    seq: int
    t: str

    @model_serializer(mode="wrap")
    def _omit_sparse_defaults(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            for name in self._sparse:
                if getattr(self, name) == type(self).model_fields[name].get_default(call_default_factory=True):
                    data.pop(name, None)
        return data

    @field_validator("v")
    @classmethod
    def _readable(cls, value: int) -> int:
        if value not in READABLE_VERSIONS:
            raise ValueError(
                f"schema version {value} is not one this release reads ({', '.join(map(str, READABLE_VERSIONS))})"
            )
        return value


class RunStartEvent(_Event):
    """The run begins: how it was configured."""

    type: Literal["run_start"] = "run_start"
    config: RunStartConfig

    @model_validator(mode="before")
    @classmethod
    def _infer_producer(cls, data: Any) -> Any:
        # version 1 wrote no producer: the proxy's config is the one naming a protocol
        if isinstance(data, Mapping):
            config = data.get("config")
            if isinstance(config, Mapping) and "producer" not in config:
                producer = "proxy" if "protocol" in config else "agent"
                return {**data, "config": {**config, "producer": producer}}
        return data


class RequestEvent(_Event):
    """The conversation the run starts from, and the tools it offers."""

    type: Literal["request"] = "request"
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: ToolChoice = "auto"
    _sparse = frozenset({"normalized"})
    #: the proxy's normalized request, less messages and tools (protocol, stream, sampling ...)
    normalized: JSONObject | None = None


class ContractEvent(_Event):
    """The contract (system prompt) rendered for the run."""

    type: Literal["contract"] = "contract"
    hash: str
    text: str | None = None


class ModelRequestEvent(_Event):
    """One call of the model: the prompt, the options and the enforcement level used."""

    _sparse = frozenset({"extension", "candidate"})
    type: Literal["model_request"] = "model_request"
    attempt: int
    messages: tuple[PromptMessage, ...] = ()
    options: GenerationOptions = Field(default_factory=GenerationOptions)
    enforcement: str = "prompt"
    #: the extension step of a parallel turn (written only when true)
    extension: bool = False
    #: a consensus candidate after a refused reply, numbered from 1 (written only then)
    candidate: int = 0


class ModelOutputEvent(_Event):
    """What the model wrote (the prefill included)."""

    _sparse = frozenset({"extension", "candidate"})
    type: Literal["model_output"] = "model_output"
    text: str
    usage: Usage = Field(default_factory=Usage)
    finish_reason: str = "stop"
    #: the extension step of a parallel turn (written only when true)
    extension: bool = False
    #: a consensus candidate after a refused reply, numbered from 1 (written only then)
    candidate: int = 0


class ParseEvent(_Event):
    """The parser's reading of a reply."""

    type: Literal["parse"] = "parse"
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    problems: tuple[Problem, ...] = ()
    truncated: bool = False


class GuardEvent(_Event):
    """One guard verdict on a reply."""

    type: Literal["guard"] = "guard"
    guard: str
    verdict: Literal["accept", "correct", "stop"]
    reason: str
    detail: str


class RetryEvent(_Event):
    """A correction sent to the model."""

    type: Literal["retry"] = "retry"
    reason: str
    attempt: int
    message: str


class TransitionEvent(_Event):
    """One fired machine event (states as written in diagrams)."""

    type: Literal["transition"] = "transition"
    from_: str = Field(alias="from")
    event: str
    to: str


class ToolCallEvent(_Event):
    """A call decided (the agent runs it; the proxy hands it to the client)."""

    type: Literal["tool_call"] = "tool_call"
    call: ToolCall


class ToolResultEvent(_Event):
    """What a tool returned."""

    type: Literal["tool_result"] = "tool_result"
    result: ToolResult


class FinalEvent(_Event):
    """The final answer."""

    _sparse = frozenset({"exhausted"})
    type: Literal["final"] = "final"
    content: str
    #: the correction budget ran out and the model's best acceptable prose was kept
    #: (written only when true)
    exhausted: bool = False


class ErrorEvent(_Event):
    """The run ended in an error."""

    type: Literal["error"] = "error"
    error: str
    message: str


class RunEndEvent(_Event):
    """The run is over."""

    type: Literal["run_end"] = "run_end"
    status: Literal["final", "error"]
    steps: int
    corrections: int


#: any transcript event, told apart by ``type``
TranscriptEvent: TypeAlias = Annotated[
    RunStartEvent
    | RequestEvent
    | ContractEvent
    | ModelRequestEvent
    | ModelOutputEvent
    | ParseEvent
    | GuardEvent
    | RetryEvent
    | TransitionEvent
    | ToolCallEvent
    | ToolResultEvent
    | FinalEvent
    | ErrorEvent
    | RunEndEvent,
    Field(discriminator="type"),
]

#: event type -> its model, in the order a run writes them
EVENT_MODELS: dict[str, type[_Event]] = {
    model.model_fields["type"].default: model for model in get_args(get_args(TranscriptEvent)[0])
}

#: the event types whose content is a decision of the code (what replay compares)
DECISION_TYPES: frozenset[str] = frozenset(
    {"parse", "guard", "retry", "transition", "tool_call", "tool_result", "final", "error"}
)

_ADAPTER: TypeAdapter[TranscriptEvent] = TypeAdapter(TranscriptEvent)


def parse_event(data: Mapping[str, Any]) -> TranscriptEvent:
    """Validate one event (a JSON object) into its model; a misfit is a :class:`TranscriptError`."""
    try:
        return _ADAPTER.validate_python(data)
    except ValidationError as exc:
        kind = data.get("type") if isinstance(data, Mapping) else None
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"][1:]) or "event"
        raise TranscriptError(f"bad {kind or 'transcript'} event: {where}: {first['msg']}") from exc


def event_fields(event: TranscriptEvent, *, envelope: bool = False) -> dict[str, Any]:
    """The event as plain JSON (``from`` spelled as written); without the envelope unless asked."""
    exclude = None if envelope else set(ENVELOPE)
    return event.model_dump(mode="json", by_alias=True, exclude=exclude)
