"""The engine's values: its configuration, the plan of a request, and its decisions.

Frozen dataclasses, re-exported by :mod:`agentfsm.engine.decide`, which makes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from agentfsm.core.backend import Capabilities
from agentfsm.core._types import DialectName, JSONObject, Level, PolicyName
from agentfsm.core.choice import ToolChoice
from agentfsm.core.config import DEFAULTS, RunConfig
from agentfsm.core.errors import RunError
from agentfsm.core.messages import AssistantMessage, ToolCall, ToolSpec, UserMessage
from agentfsm.core.states import State
from agentfsm.core.parsed import ParsedReply

__all__ = [
    "Answer",
    "CallTools",
    "Correct",
    "Decision",
    "EngineConfig",
    "Fail",
    "GuardRecord",
    "Plan",
    "TransitionRecord",
    "switch_on",
]


@dataclass(frozen=True)
class EngineConfig:
    """What the engine needs to know about the turn (defaults: :data:`~agentfsm.core.config.DEFAULTS`)."""

    tools: tuple[ToolSpec, ...] = ()
    dialect: DialectName = DEFAULTS.dialect
    tool_choice: ToolChoice = DEFAULTS.tool_choice
    parallel: bool = DEFAULTS.parallel
    max_corrections: int = DEFAULTS.max_corrections
    loop_threshold: int = DEFAULTS.loop_threshold
    #: the language policies consulted, in order (:mod:`agentfsm.policy`)
    policies: tuple[PolicyName, ...] = DEFAULTS.policies
    #: run the policies for small models (clauses, grounding, relevance, coverage;
    #: resolved from the run's ``grounding``)
    grounding: bool = False
    #: score the call-or-answer choice where the backend can (resolved from the run's ``choice``)
    choice: bool = False
    #: candidates drawn after a refused reply (0: none; resolved from the run's ``consensus``)
    consensus: int = 0
    strict: bool = False
    #: the agent's rule: ``tool_choice`` binds the first decision after each user
    #: message, and once results are in the model may answer (:func:`tool_choice_now`)
    relax_after_results: bool = False
    #: the JSON Schema a final answer must match (a client's output schema), if any
    answer_schema: JSONObject | None = None

    def __post_init__(self) -> None:
        # a spelling ("required", a tool's name) reads as the value
        object.__setattr__(self, "tool_choice", ToolChoice.parse(self.tool_choice))

    @classmethod
    def of(
        cls,
        run: RunConfig,
        tools: tuple[ToolSpec, ...] = (),
        *,
        tool_choice: ToolChoice | None = None,
        parallel: bool | None = None,
        relax_after_results: bool = False,
        capabilities: Capabilities | None = None,
        answer_schema: JSONObject | None = None,
    ) -> EngineConfig:
        """The engine's view of ``run`` for ``tools``; the proxy passes the request's own
        ``tool_choice`` and ``parallel``. ``grounding`` and ``consensus`` at ``auto`` are
        on when ``capabilities`` say the model is small."""
        return cls(
            tools=tools,
            dialect=run.dialect,
            tool_choice=run.tool_choice if tool_choice is None else tool_choice,
            parallel=run.parallel if parallel is None else parallel,
            max_corrections=run.max_corrections,
            loop_threshold=run.loop_threshold,
            policies=run.policies,
            grounding=switch_on(run.grounding, capabilities),
            consensus=run.consensus_samples if switch_on(run.consensus, capabilities) else 0,
            choice=run.choice == "on" or (run.choice == "auto" and capabilities is not None and not capabilities.small_model),
            relax_after_results=relax_after_results,
            answer_schema=answer_schema,
        )


def switch_on(setting: str, capabilities: Capabilities | None) -> bool:
    """An ``auto | on | off`` setting that ``auto`` turns on for a small model."""
    return setting == "on" or (setting == "auto" and capabilities is not None and capabilities.small_model)


@dataclass(frozen=True)
class TransitionRecord:
    """One fired machine event."""

    source: State
    event: str
    dest: State


@dataclass(frozen=True)
class GuardRecord:
    """One guard verdict, for transcripts and logs."""

    guard: str
    verdict: Literal["accept", "correct", "stop"]
    reason: str
    detail: str


@dataclass(frozen=True)
class _Base:
    parsed: ParsedReply
    transitions: tuple[TransitionRecord, ...]
    guards: tuple[GuardRecord, ...] = field(default=())


@dataclass(frozen=True)
class CallTools(_Base):
    """Dispatch these calls; ``assistant`` is the message to append to the history."""

    calls: tuple[ToolCall, ...] = ()
    assistant: AssistantMessage = field(default_factory=AssistantMessage)


@dataclass(frozen=True)
class Correct(_Base):
    """Re-ask the model: append ``assistant`` (the rejected reply) and ``message``."""

    message: UserMessage = field(default_factory=lambda: UserMessage(content=""))
    assistant: AssistantMessage = field(default_factory=AssistantMessage)
    reason: str = ""
    attempt: int = 1


@dataclass(frozen=True)
class Answer(_Base):
    """A final answer; ``exhausted`` when the correction budget ran out and this is the
    model's best acceptable reply rather than one the guards accepted."""

    content: str = ""
    assistant: AssistantMessage = field(default_factory=AssistantMessage)
    exhausted: bool = False


@dataclass(frozen=True)
class Fail(_Base):
    """The turn ends without an answer."""

    error: RunError = field(default_factory=lambda: RunError("failed"))


Decision: TypeAlias = CallTools | Correct | Answer | Fail



@dataclass(frozen=True)
class Plan:
    """What the next model request offers."""

    #: the tool_choice that binds the reply (:func:`tool_choice_now`)
    tool_choice: ToolChoice
    #: the enforcement level, and the dialect the contract teaches at that level
    level: Level
    dialect: DialectName
    #: the tools the grammar offers (constrained); every tool when a call is required
    tools: tuple[ToolSpec, ...]
    #: bound every argument list (the retry after an action was cut off)
    compact: bool = False
    #: bound every free string of the arguments to this many characters (the retry after
    #: an action cut off in a loop: :func:`~agentfsm.engine.plan.plan`)
    max_length: int | None = None
    #: hold every free number of the arguments to one of these (the retry after a number
    #: misread from the conversation: :meth:`~agentfsm.policy.base.Policies.retry_numbers`)
    numbers: tuple[float, ...] | None = None
    #: the grammar allows a list of calls in the reply itself
    listed: bool = False
    #: after a reply that is one clean call, run the extension step (parallel calls)
    extend: bool = False
    #: start the assistant turn with the dialect's opener
    prefill: bool = False
    #: the grammar allows an answer where ``tool_choice`` does (false once the model chose
    #: a call, :func:`~agentfsm.engine.choice.narrow`)
    answers: bool = True
    #: an answer was refused in this round for being a copied ``<slot>`` of the contract:
    #: the grammar's answer may not begin with ``<`` (:data:`~agentfsm.prompt.enforcement.NO_SLOT`)
    no_slot: bool = False
    #: the reply refused last repeats one refused earlier in this round: greedy decoding
    #: would write it again, so the retry is drawn at a temperature (:func:`~agentfsm.engine.plan.plan`)
    resample: bool = False
    #: which of the turn's corrections the prompt shows: ``all``; ``none`` where the
    #: grammar offers the answer alone after a refused call (the grammar asks, for an
    #: answer that is not empty: ``no_slot``); ``last`` where it does so after a refused
    #: answer (what was wrong with it is the correction's to say).
    #: :func:`~agentfsm.engine.plan.unasked`
    corrections: Literal["all", "none", "last"] = "all"
