"""Typed transcript events: one frozen model per event type, a union discriminated on ``type``.

A transcript is one JSON object per line. Every event carries the envelope ``v``
(schema version), ``run`` (run id), ``seq`` (its place in the run), ``t`` (UTC
ISO-8601 time) and ``type``; the rest of its fields depend on the type:

================  =============================================================
``run_start``     ``config``: how the run was set up (:data:`RunStartConfig`, by producer)
``request``       ``messages``, ``tools``, ``tool_choice``; the proxy adds ``normalized``
``contract``      ``hash`` and ``text`` of the system prompt sent
``choice``        ``tools``, ``scores``, ``baseline``, ``tool``, ``margin``: the scored call-or-answer choice
``model_request`` ``attempt``, ``messages``, ``options``, ``enforcement``; ``extension``
``model_output``  ``text`` (prefill included), ``usage``, ``finish_reason``; ``extension``, ``cut``, ``max_tokens_sent``
``parse``         ``content``, ``tool_calls``, ``problems``, ``truncated``
``guard``         ``guard``, ``verdict``, ``reason``, ``detail``
``retry``         ``reason``, ``attempt``, ``message`` (the correction sent)
``transition``    ``from``, ``event``, ``to``
``tool_call``     ``call``
``tool_result``   ``result``
``final``         ``content``; ``exhausted`` when the budget ran out under ``auto``
``error``         ``error`` (class name), ``message``
``run_end``       ``status`` (``final``, ``error``, ``cancelled``), ``steps``, ``corrections``
================  =============================================================

A ``model_request`` / ``model_output`` pair with ``extension: true`` is the extension
step of a parallel turn (:mod:`agentfsm.prompt.extension`); the field is written only
when true. A ``model_output`` with ``cut: true`` is a streamed call that ended before the
model did (the proxy's client left mid-stream): the text that had arrived, as far as the
client could have seen it. A ``model_output`` with ``max_tokens_sent`` was written under
that limit, not the ``max_tokens`` of its ``model_request``: the backend lowered it to what
the context left after the upstream refused the one asked (written only then).

A ``model_request`` line whose prompt begins with messages of the run's previous one
writes ``messages_from`` (that event's ``seq``), ``messages_kept`` (how many of its leading
messages it shares) and as ``messages`` only the rest; the readers expand it (the models
here are the whole event, and never see the two fields). A reference to any other event
is a :class:`TranscriptError`.

Versions: 2 added ``producer``, ``max_corrections`` and ``loop_threshold`` to the run's
config; 3 added ``policies`` (the language policies that ran, in order); 4 added
``run_end`` status ``cancelled``, ``result_max_chars`` to an agent's or a batch task's
config and ``cut`` and ``max_tokens_sent`` to ``model_output``; 5 writes a ``model_request``'s
prompt as what it adds to the previous one (``messages_from``, ``messages_kept``). A reader refuses a version newer than its own by
name (a :class:`TranscriptError` saying which), before it reads any field. Version-1
transcripts still read: their producer is inferred (the proxy's config names a
``protocol``) and the two limits take their defaults; a config without ``policies``
ran the policies of version 2 (:data:`LEGACY_POLICIES`), those for small models where
``grounding`` was on. This module does no IO;
:mod:`agentfsm.runtime.transcript` writes and reads the files.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any, ClassVar, Literal, ParamSpec, TypeAlias, TypeVar, get_args

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

from agentfsm.core._types import JSONObject
from agentfsm.core.choice import ToolChoice, ToolChoiceField
from agentfsm.core.run_start import (
    LEGACY_POLICIES,
    AgentRunConfig,
    BatchRunConfig,
    EvalRunConfig,
    Producer,
    ProxyRunConfig,
    RunStartConfig,
)
from agentfsm.core.backend import GenerationOptions, Usage
from agentfsm.core.errors import TranscriptError
from agentfsm.core.messages import Message, PromptMessage, ToolCall, ToolResult, ToolSpec
from agentfsm.core.parsed import Problem

__all__ = [
    "AgentRunConfig",
    "BatchRunConfig",
    "ContractEvent",
    "DECISION_TYPES",
    "ENVELOPE",
    "ErrorEvent",
    "Event",
    "EVENT_MODELS",
    "EvalRunConfig",
    "FinalEvent",
    "GuardEvent",
    "LEGACY_POLICIES",
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
    "ChoiceEvent",
    "TranscriptEvent",
    "TransitionEvent",
    "ToolCallEvent",
    "ToolResultEvent",
    "build_event",
    "event_fields",
    "event_type",
    "parse_event",
]

#: the version this release writes
SCHEMA_VERSION = 5
#: the versions this release reads
READABLE_VERSIONS: tuple[int, ...] = (1, 2, 3, 4, 5)
#: the envelope fields every event carries besides ``type``
ENVELOPE: tuple[str, ...] = ("v", "run", "seq", "t")

_FROZEN = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


# -- events ------------------------------------------------------------------------


class Event(BaseModel):
    """What every event carries: the envelope (``v``, ``run``, ``seq``, ``t``) and ``type``.

    A writer builds an event from its own fields only (``GuardEvent(guard=..., ...)``);
    the :class:`~agentfsm.runtime.transcript.TranscriptWriter` stamps the envelope as it
    writes. A transcript read back must carry the envelope (:func:`parse_event`).
    """

    model_config = _FROZEN
    #: fields written only when they differ from their default (absent in most events)
    _sparse: ClassVar[frozenset[str]] = frozenset()

    v: int = SCHEMA_VERSION
    run: str = ""
    seq: int = 0
    t: str = ""

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
            raise ValueError(_unreadable(value))
        return value


class RunStartEvent(Event):
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


class RequestEvent(Event):
    """The conversation the run starts from, and the tools it offers."""

    type: Literal["request"] = "request"
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: ToolChoiceField = ToolChoice.AUTO
    _sparse = frozenset({"normalized"})
    #: the proxy's normalized request, less messages and tools (protocol, stream, sampling ...)
    normalized: JSONObject | None = None


class ContractEvent(Event):
    """The contract (system prompt) rendered for the run."""

    type: Literal["contract"] = "contract"
    hash: str
    text: str | None = None


class ChoiceEvent(Event):
    """The model's scored call-or-answer choice (:mod:`agentfsm.engine.choice`): the
    log-probabilities of each option (an answer, then each tool) after the prompt and
    after its content-free twin, and what was chosen (``tool``: ``None`` for an answer)."""

    type: Literal["choice"] = "choice"
    tools: tuple[str, ...]
    scores: tuple[float, ...]
    baseline: tuple[float, ...]
    tool: str | None = None
    margin: float = 0.0


class ModelRequestEvent(Event):
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


class ModelOutputEvent(Event):
    """What the model wrote (the prefill included)."""

    _sparse = frozenset({"extension", "candidate", "cut", "max_tokens_sent"})
    type: Literal["model_output"] = "model_output"
    text: str
    usage: Usage = Field(default_factory=Usage)
    finish_reason: str = "stop"
    #: the extension step of a parallel turn (written only when true)
    extension: bool = False
    #: a consensus candidate after a refused reply, numbered from 1 (written only then)
    candidate: int = 0
    #: a streamed call cut off before the model finished (its client left, the run was
    #: cancelled or failed): ``text`` is what had arrived, ``finish_reason`` is ``cut``, and
    #: nothing decided on it (written only when true; replay serves no cut output)
    cut: bool = False
    #: the ``max_tokens`` the backend sent when it lowered the one asked (``model_request``'s
    #: ``options.max_tokens``) to what the context left, after the upstream refused it with a
    #: context-length error (written only then; replay serves it back with the text)
    max_tokens_sent: int | None = None


class ParseEvent(Event):
    """The parser's reading of a reply."""

    type: Literal["parse"] = "parse"
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    problems: tuple[Problem, ...] = ()
    truncated: bool = False


class GuardEvent(Event):
    """One guard verdict on a reply."""

    type: Literal["guard"] = "guard"
    guard: str
    verdict: Literal["accept", "correct", "stop"]
    reason: str
    detail: str


class RetryEvent(Event):
    """A correction sent to the model."""

    type: Literal["retry"] = "retry"
    reason: str
    attempt: int
    message: str


class TransitionEvent(Event):
    """One fired machine event (states as written in diagrams)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)
    type: Literal["transition"] = "transition"
    from_: str = Field(alias="from")
    event: str
    to: str


class ToolCallEvent(Event):
    """A call decided (the agent runs it; the proxy hands it to the client)."""

    type: Literal["tool_call"] = "tool_call"
    call: ToolCall


class ToolResultEvent(Event):
    """What a tool returned."""

    type: Literal["tool_result"] = "tool_result"
    result: ToolResult


class FinalEvent(Event):
    """The final answer."""

    _sparse = frozenset({"exhausted"})
    type: Literal["final"] = "final"
    content: str
    #: the correction budget ran out and the model's best acceptable prose was kept
    #: (written only when true)
    exhausted: bool = False


class ErrorEvent(Event):
    """The run ended in an error."""

    type: Literal["error"] = "error"
    error: str
    message: str


class RunEndEvent(Event):
    """The run is over."""

    type: Literal["run_end"] = "run_end"
    #: ``final`` (an answer or calls), ``error`` (after its ``error`` event), or ``cancelled``:
    #: stopped from outside before it ended (a cancelled task, Ctrl-C), cut off where it was
    status: Literal["final", "error", "cancelled"]
    steps: int
    corrections: int


#: any transcript event, told apart by ``type``
TranscriptEvent: TypeAlias = Annotated[
    RunStartEvent
    | RequestEvent
    | ContractEvent
    | ChoiceEvent
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
EVENT_MODELS: dict[str, type[Event]] = {
    model.model_fields["type"].default: model for model in get_args(get_args(TranscriptEvent)[0])
}
_TYPE_OF: dict[object, str] = {model: name for name, model in EVENT_MODELS.items()}

#: the event types whose content is a decision of the code (what replay compares)
DECISION_TYPES: frozenset[str] = frozenset(
    {"choice", "parse", "guard", "retry", "transition", "tool_call", "tool_result", "final", "error"}
)

_ADAPTER: TypeAdapter[TranscriptEvent] = TypeAdapter(TranscriptEvent)


def _misfit(kind: object, exc: ValidationError, skip: int) -> TranscriptError:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"][skip:]) or "event"
    return TranscriptError(f"bad {kind or 'transcript'} event: {where}: {first['msg']}")


def _unreadable(version: object) -> str:
    return f"schema version {version} is not one this release reads ({', '.join(map(str, READABLE_VERSIONS))})"


def parse_event(data: Mapping[str, Any]) -> TranscriptEvent:
    """Validate one event (a JSON object, envelope included) into its model; a misfit is a
    :class:`TranscriptError`. A version this release does not read is said first, whatever
    else the event holds (a newer version's fields and types are not misfits of this one)."""
    kind = data.get("type") if isinstance(data, Mapping) else None
    version = data.get("v") if isinstance(data, Mapping) else None
    if type(version) is int and version not in READABLE_VERSIONS:
        raise TranscriptError(f"bad {kind or 'transcript'} event: v: {_unreadable(version)}")
    missing = [name for name in ENVELOPE[1:] if isinstance(data, Mapping) and name not in data]
    if missing:
        raise TranscriptError(f"bad {kind or 'transcript'} event: {missing[0]}: Field required")
    try:
        return _ADAPTER.validate_python(data)
    except ValidationError as exc:
        raise _misfit(kind, exc, 1) from exc


def event_type(kind: object) -> str:
    """The ``type`` an event model writes (``GuardEvent`` -> ``guard``)."""
    return _TYPE_OF[kind]


_E = TypeVar("_E", bound=Event)
_P = ParamSpec("_P")


def build_event(kind: Callable[_P, _E], /, *args: _P.args, **fields: _P.kwargs) -> _E:
    """``kind(**fields)``, the envelope left to the writer; a field that does not fit is a
    :class:`TranscriptError` naming it (mypy checks the fields where they are written)."""
    try:
        return kind(*args, **fields)
    except ValidationError as exc:
        raise _misfit(_TYPE_OF.get(kind), exc, 0) from exc


def event_fields(event: TranscriptEvent, *, envelope: bool = False) -> dict[str, Any]:
    """The event as plain JSON (``from`` spelled as written); without the envelope unless asked."""
    exclude = None if envelope else set(ENVELOPE)
    return event.model_dump(mode="json", by_alias=True, exclude=exclude)
