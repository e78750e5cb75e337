"""The transcript event models: the envelope every event carries (:class:`Event`), one
frozen model per event type, and their union discriminated on ``type`` (:data:`TranscriptEvent`).

What each type holds, and the schema's versions, are told in :mod:`agentfsm.core.events`,
which re-exports these names and reads, builds and dumps the events. No IO.
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
    field_validator,
    model_serializer,
    model_validator,
)

from agentfsm.core._types import JSONObject
from agentfsm.core.backend import GenerationOptions, Usage
from agentfsm.core.choice import ToolChoice, ToolChoiceField
from agentfsm.core.messages import Message, PromptMessage, ToolCall, ToolResult, ToolSpec
from agentfsm.core.parsed import Problem
from agentfsm.core.run_start import RunStartConfig

__all__ = [
    "ChoiceEvent",
    "ContractEvent",
    "DECISION_TYPES",
    "ENVELOPE",
    "EVENT_MODELS",
    "ErrorEvent",
    "Event",
    "FinalEvent",
    "GuardEvent",
    "ModelOutputEvent",
    "ModelRequestEvent",
    "ParseEvent",
    "READABLE_VERSIONS",
    "RequestEvent",
    "RetryEvent",
    "RunEndEvent",
    "RunStartEvent",
    "SCHEMA_VERSION",
    "ToolCallEvent",
    "ToolResultEvent",
    "TranscriptEvent",
    "TransitionEvent",
    "unreadable_version",
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
    writes. A transcript read back must carry the envelope (:func:`~agentfsm.core.events.parse_event`).
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
            raise ValueError(unreadable_version(value))
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

#: the event types whose content is a decision of the code (what replay compares)
DECISION_TYPES: frozenset[str] = frozenset(
    {"choice", "parse", "guard", "retry", "transition", "tool_call", "tool_result", "final", "error"}
)


def unreadable_version(version: object) -> str:
    """Why a transcript of ``version`` does not read here (the versions that do, named)."""
    return f"schema version {version} is not one this release reads ({', '.join(map(str, READABLE_VERSIONS))})"
