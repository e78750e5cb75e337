"""One run configuration: every setting that decides how a run goes, declared once.

:class:`RunConfig` holds each setting with its default and its help text. The agent
(:class:`~agentfsm.runtime.agent.Agent`), the proxy
(:func:`~agentfsm.server.app.create_app`), batch (``run_batch``, ``run_batch_ray``),
eval and the CLI all take one, and the CLI's options are generated from its fields
(:mod:`agentfsm.cli._options`), so a new field is a new option of every command that
uses it. Settings of one edge only (the proxy's bind address, key, body limit and
timeouts; batch concurrency; eval's categories) live at that edge.

Values are checked when the config is built: a value outside a ``Literal`` or below a
field's minimum is a :class:`~agentfsm.core.errors.UsageError` naming what is allowed.

``max_corrections`` is 3: the correction wording escalates in three steps
(:func:`agentfsm.guards.budget.escalate`: the guard's message, then the procedural
wording, then the opener to start with), and a budget of 3 sends each once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args, get_origin, get_type_hints

from agentfsm.core._types import DEFAULT_POLICIES, POLICY_NAMES, DialectName, EnforcementLevel, PolicyName
from agentfsm.core.choice import ToolChoice
from agentfsm.core.errors import UsageError

__all__ = ["DEFAULTS", "RunConfig", "allowed_items", "allowed_values", "field_help"]


def _doc(help: str, *, minimum: int | None = None) -> Mapping[str, Any]:
    return {"help": help, "minimum": minimum}


@dataclass(frozen=True)
class RunConfig:
    """How a run decides: the settings every entry point shares, with their defaults."""

    #: the action format the contract asks for (every format is parsed whatever is asked)
    dialect: DialectName = field(
        default="json-action", metadata=_doc("The action format the contract asks the model for.")
    )
    #: how the action format is enforced; ``auto`` picks the strongest the backend has
    enforcement: EnforcementLevel = field(
        default="auto",
        metadata=_doc("How the format is enforced: auto picks the strongest the backend has (constrained, else prefill when a call is required, else prompt)."),
    )
    #: ``auto | none | required`` or the name of a tool that must be called
    tool_choice: ToolChoice = field(default=ToolChoice.AUTO, metadata=_doc("auto, none, required, or a tool name."))
    #: several calls in one reply are run (else only the first)
    parallel: bool = field(default=True, metadata=_doc("Run every call of a reply (else only the first)."))
    #: model calls allowed in one run (corrections and extension steps included)
    max_steps: int = field(default=10, metadata=_doc("Model calls allowed per run.", minimum=1))
    #: corrections sent in one deciding turn before the budget is spent
    max_corrections: int = field(
        default=3,
        metadata=_doc("Corrections per deciding turn; then under auto the best answer so far, under a required call an error.", minimum=0),
    )
    #: a call already made this many times in a row, each with the same result, is not run again
    loop_threshold: int = field(
        default=3, metadata=_doc("A call already made this many times in a row, each time with the same result, ends the turn (LoopDetected).", minimum=1)
    )
    #: the language policies the run consults, in order (:mod:`agentfsm.policy`): the
    #: rules that read the conversation's words; ``()`` is the pure protocol runtime
    policies: tuple[PolicyName, ...] = field(
        default=DEFAULT_POLICIES,
        metadata=_doc(
            "The language policies (rules that read the conversation's words), in order, comma-separated: "
            f"{', '.join(POLICY_NAMES)}; none: the pure protocol runtime. "
            f"Default: {', '.join(DEFAULT_POLICIES)}; clauses, relevance and coverage read English words to decide "
            "whether a request is about a tool and are opt-in. clauses, grounding, relevance and coverage run only where grounding is on."
        ),
    )
    #: whether the policies for small models run (clauses, grounding, relevance,
    #: coverage): under ``auto``, refuse calls with no value from the conversation or
    #: nothing new, and answers after results that state none of them
    #: (:mod:`agentfsm.policy.grounding`); ``auto`` turns them on for a backend that says
    #: its model is small (:attr:`~agentfsm.core.backend.Capabilities.small_model`): a
    #: capable model's call on a value it knows ("the weather where the Eiffel tower
    #: is") is not refused
    grounding: Literal["auto", "on", "off"] = field(
        default="auto",
        metadata=_doc("Run the policies for small models (clauses, grounding, relevance, coverage), under tool_choice auto: refuse a call with no value from the conversation (or, after results, nothing new) and an answer that states none of the latest results; the retry offers the answer only. auto: on for a small model (the embedded one), off otherwise."),
    )
    #: at the first decision of a user turn under ``auto``, the model scores how its reply
    #: begins (an answer, or a call of each tool) and the grammar allows only the branch it
    #: finds likeliest once the prompt's own lean is taken off (:mod:`agentfsm.engine.choice`);
    #: ``auto``: where the backend scores continuations and its model is not small (on
    #: SmolLM2-135M the scores do not tell a greeting from a tool request:
    #: ``bench/results/choice-smollm2.md``)
    choice: Literal["auto", "on", "off"] = field(
        default="auto",
        metadata=_doc("At the first decision of a user turn under tool_choice auto, let the model score whether its reply is an answer or a call (and of which tool), calibrated against a content-free request; the grammar then allows only that branch. Needs a backend that scores continuations and constrains decoding (the embedded one). auto: on unless the model is small (on the embedded SmolLM2-135M the scores carry no signal); on: wherever the backend scores; off: the model's free reply decides."),
    )
    #: after a refused first decision of a user turn, draw ``consensus_samples`` candidates of the same request at
    #: a sampling temperature and take the accepted decision most of them agree on, before
    #: correcting (:mod:`agentfsm.engine.consensus`); ``auto``: on for a small model. Off by
    #: default: on the embedded model the candidates doubled the model calls of a task
    #: and of an irrelevant request and moved no row of the quality table beyond its
    #: interval (``bench/results/quality-fast-cost.md``)
    consensus: Literal["auto", "on", "off"] = field(
        default="off",
        metadata=_doc("When the first decision of a user turn is refused, sample candidates of the same request and take the accepted call (or answer) most of them agree on, before sending a correction. auto: on for a small model (the embedded one), off otherwise. Off by default: on the embedded model it doubled the model calls for no gain beyond the quality table's intervals."),
    )
    #: how many candidates a consensus draws
    consensus_samples: int = field(
        default=6, metadata=_doc("Candidates drawn by consensus.", minimum=2)
    )
    #: a tool result longer than this is cut (and marked) before the model sees it
    result_max_chars: int = field(
        default=8000, metadata=_doc("Characters of a tool result the model sees; longer ones are cut and marked.", minimum=1)
    )

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, list) and allowed_items(f.name) is not None:
                object.__setattr__(self, f.name, value := tuple(value))  # a list reads as the tuple
            elif _HINTS[f.name] is ToolChoice:
                object.__setattr__(self, f.name, value := ToolChoice.parse(value))  # its spelling reads as the value
            _check(f.name, value)

    def replace(self, **changes: Any) -> RunConfig:
        """A copy with ``changes`` (field names), checked like a new config."""
        unknown = sorted(set(changes) - set(_HINTS))
        if unknown:
            raise UsageError(f"unknown setting(s) {', '.join(unknown)}; settings: {', '.join(_HINTS)}")
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        """The settings by name (for transcripts and reports)."""
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}


def _plain(value: Any) -> Any:
    return str(value) if isinstance(value, ToolChoice) else value


def allowed_values(name: str) -> tuple[str, ...] | None:
    """The values a ``Literal`` field accepts, in order (None for other fields)."""
    hint = _HINTS[name]
    return tuple(get_args(hint)) if get_origin(hint) is Literal else None


def allowed_items(name: str) -> tuple[str, ...] | None:
    """The values each item of a tuple-of-``Literal`` field takes, in order (None for other fields)."""
    hint = _HINTS[name]
    if get_origin(hint) is not tuple:
        return None
    item = get_args(hint)[0]
    return tuple(get_args(item)) if get_origin(item) is Literal else None


def field_help(name: str) -> str:
    """The help text of field ``name`` (the CLI's option help)."""
    return str(_FIELDS[name].metadata["help"])


def _check(name: str, value: Any) -> None:
    hint = _HINTS[name]
    allowed = allowed_values(name)
    items = allowed_items(name)
    if items is not None:
        if not isinstance(value, tuple) or any(v not in items for v in value):
            raise UsageError(f"{name} must list only {', '.join(items)} (or none); got {value!r}")
        if len(set(value)) != len(value):
            raise UsageError(f"{name} names an item twice: {value!r}")
    elif allowed is not None:
        if value not in allowed:
            raise UsageError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")
    elif hint is bool:
        if not isinstance(value, bool):
            raise UsageError(f"{name} must be true or false; got {value!r}")
    elif hint is ToolChoice:
        pass  # read by ToolChoice.parse in __post_init__, which names a bad spelling
    elif hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise UsageError(f"{name} must be an integer; got {value!r}")
        minimum = _FIELDS[name].metadata["minimum"]
        if minimum is not None and value < minimum:
            raise UsageError(f"{name} must be at least {minimum}; got {value}")
    elif not isinstance(value, str) or not value.strip():
        raise UsageError(f"{name} must be a non-empty string; got {value!r}")


_FIELDS = {f.name: f for f in dataclasses.fields(RunConfig)}
_HINTS: dict[str, Any] = {name: hint for name, hint in get_type_hints(RunConfig).items() if name in _FIELDS}

#: every setting at its default
DEFAULTS = RunConfig()
