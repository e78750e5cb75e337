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
``grounding`` was on.

The models are :mod:`agentfsm.core.event_models` (re-exported here, with the ``run_start``
configs of :mod:`agentfsm.core.run_start`); this module validates one read back
(:func:`parse_event`), builds one to write (:func:`build_event`) and dumps one
(:func:`event_fields`). It does no IO: :mod:`agentfsm.runtime.transcript` writes and reads
the files.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ParamSpec, TypeVar

from pydantic import TypeAdapter, ValidationError

from agentfsm.core.errors import TranscriptError
from agentfsm.core.event_models import (
    DECISION_TYPES,
    ENVELOPE,
    EVENT_MODELS,
    READABLE_VERSIONS,
    SCHEMA_VERSION,
    ChoiceEvent,
    ContractEvent,
    ErrorEvent,
    Event,
    FinalEvent,
    GuardEvent,
    ModelOutputEvent,
    ModelRequestEvent,
    ParseEvent,
    RequestEvent,
    RetryEvent,
    RunEndEvent,
    RunStartEvent,
    ToolCallEvent,
    ToolResultEvent,
    TranscriptEvent,
    TransitionEvent,
    unreadable_version,
)
from agentfsm.core.run_start import (
    LEGACY_POLICIES,
    AgentRunConfig,
    BatchRunConfig,
    EvalRunConfig,
    Producer,
    ProxyRunConfig,
    RunStartConfig,
)

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

_TYPE_OF: dict[object, str] = {model: name for name, model in EVENT_MODELS.items()}

_ADAPTER: TypeAdapter[TranscriptEvent] = TypeAdapter(TranscriptEvent)


def _misfit(kind: object, exc: ValidationError, skip: int) -> TranscriptError:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"][skip:]) or "event"
    return TranscriptError(f"bad {kind or 'transcript'} event: {where}: {first['msg']}")


def parse_event(data: Mapping[str, Any]) -> TranscriptEvent:
    """Validate one event (a JSON object, envelope included) into its model; a misfit is a
    :class:`TranscriptError`. A version this release does not read is said first, whatever
    else the event holds (a newer version's fields and types are not misfits of this one)."""
    kind = data.get("type") if isinstance(data, Mapping) else None
    version = data.get("v") if isinstance(data, Mapping) else None
    if type(version) is int and version not in READABLE_VERSIONS:
        raise TranscriptError(f"bad {kind or 'transcript'} event: v: {unreadable_version(version)}")
    if isinstance(kind, str) and kind not in EVENT_MODELS:  # not pydantic's list of every tag
        of = f" of schema version {version}" if type(version) is int else ""
        raise TranscriptError(f"bad {kind} event: type: {kind!r} is not an event type{of}")
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
