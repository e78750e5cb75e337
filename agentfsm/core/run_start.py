"""What a transcript's ``run_start`` event says of its run: the configuration, by producer.

One model per producer (agent, batch, proxy, eval), told apart by ``producer``
(:data:`RunStartConfig`); :mod:`agentfsm.core.events` holds the event that carries it.
Replay reads the settings back from it (:mod:`agentfsm.replays.rerun`).
"""

from __future__ import annotations

from typing import Annotated, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field

from agentfsm.core._types import DialectName, EnforcementLevel, PolicyName
from agentfsm.core.choice import ToolChoiceField
from agentfsm.core.config import DEFAULTS

__all__ = [
    "AgentRunConfig",
    "BatchRunConfig",
    "EvalRunConfig",
    "LEGACY_POLICIES",
    "Producer",
    "ProxyRunConfig",
    "RunStartConfig",
]

Producer: TypeAlias = Literal["agent", "proxy", "batch", "eval"]

#: the language policies a run consulted before version 3 recorded them (in this order;
#: clauses, grounding, relevance and coverage only where ``grounding`` was on)
LEGACY_POLICIES: tuple[PolicyName, ...] = ("refusal", "answers", "clauses", "grounding", "relevance", "coverage")

_FROZEN = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class _RunConfigBase(BaseModel):
    model_config = _FROZEN

    #: what wrote the transcript (each subclass fixes it)
    producer: Producer
    dialect: DialectName = DEFAULTS.dialect
    tool_choice: ToolChoiceField = DEFAULTS.tool_choice
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
    #: the policies for small models were on (absent in transcripts written before it existed: off)
    grounding: bool = False
    #: the language policies that ran, in order (absent before version 3: :data:`LEGACY_POLICIES`)
    policies: tuple[PolicyName, ...] = LEGACY_POLICIES
    #: candidates drawn after a refused reply (0: none; absent in older transcripts)
    consensus: int = 0
    #: the model scored the call-or-answer choice (absent in older transcripts: off)
    choice: bool = False
    #: model calls allowed in the whole run (None: one deciding turn, no run limit)
    max_steps: int | None = None


class AgentRunConfig(_RunConfigBase):
    """An :class:`~agentfsm.runtime.agent.Agent` run (Python API, ``agentfsm run``)."""

    producer: Literal["agent"] = "agent"
    max_steps: int = DEFAULTS.max_steps
    #: characters of a tool result the model saw (absent in older transcripts)
    result_max_chars: int | None = None


class BatchRunConfig(_RunConfigBase):
    """One task of ``agentfsm batch``: an agent run, with the task's id."""

    producer: Literal["batch"] = "batch"
    max_steps: int = DEFAULTS.max_steps
    #: characters of a tool result the model saw (absent in older transcripts)
    result_max_chars: int | None = None
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
