"""agentfsm: tool calling for chat models that have none.

The public API is the sorted ``__all__`` below; a test checks it. Names are imported
lazily, on first use, so ``import agentfsm`` stays fast and loads no HTTP client,
server or CLI library until one is needed. The HTTP proxy is
``agentfsm.server.create_app`` (imported on its own, so library users do not load
Starlette).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loguru import logger

from agentfsm.core._lazy import lazy_exports

if TYPE_CHECKING:
    from agentfsm.backends import Backend, Capabilities, Completion, GenerationOptions, ListContinuation, OpenAICompatBackend, ScriptedBackend, create_backend
    from agentfsm.replays.backend import ReplayBackend
    from agentfsm.batch.controller import TaskResult, run_batch, run_batch_sync
    from agentfsm.core.choice import ToolChoice
    from agentfsm.core.config import RunConfig
    from agentfsm.engine.decide import Answer, CallTools, Correct, EngineConfig, Fail, step
    from agentfsm.core.errors import AgentFSMError, BackendError, InvalidTransition, LoopDetected, MaxStepsExceeded, MissingExtraError, RequestError, RetryBudgetExceeded, RunError, ToolSpecError, TranscriptError, UsageError
    from agentfsm.core.machine import AgentMachine
    from agentfsm.core.messages import AssistantMessage, Message, PromptMessage, SystemMessage, ToolCall, ToolMessage, ToolResult, ToolSpec, UserMessage
    from agentfsm.core.states import State, derive_state
    from agentfsm.dialects import get_dialect
    from agentfsm.core.parsed import ParsedReply, Problem
    from agentfsm.dialects.parse import parse_reply
    from agentfsm.dialects.stream import StreamParser, TextDelta, ToolCallDelta
    from agentfsm.prompt.contract import render_contract
    from agentfsm.policy import Policy, get_policy
    from agentfsm.report import write_report
    from agentfsm.runtime.agent import Agent, RunResult
    from agentfsm.runtime.recorder import Recorder
    from agentfsm.replays.compare import ReplayReport, areplay, replay
    from agentfsm.runtime.tools import ToolRegistry
    from agentfsm.core.events import TranscriptEvent
    from agentfsm.runtime.transcript import read_events, read_transcript

__version__ = "0.1.0"

# A library adds no log sinks and is silent by default (loguru's advice); the CLI
# enables it, and users can with ``logger.enable("agentfsm")``.
logger.disable("agentfsm")

#: public name -> the module that defines it (imported on first access)
_EXPORTS: dict[str, str] = {
    "Agent": "agentfsm.runtime.agent",
    "AgentFSMError": "agentfsm.core.errors",
    "AgentMachine": "agentfsm.core.machine",
    "Answer": "agentfsm.engine.decide",
    "areplay": "agentfsm.replays.compare",
    "AssistantMessage": "agentfsm.core.messages",
    "Backend": "agentfsm.backends",
    "BackendError": "agentfsm.core.errors",
    "CallTools": "agentfsm.engine.decide",
    "Capabilities": "agentfsm.backends",
    "Completion": "agentfsm.backends",
    "Correct": "agentfsm.engine.decide",
    "create_backend": "agentfsm.backends",
    "derive_state": "agentfsm.core.states",
    "EngineConfig": "agentfsm.engine.decide",
    "Fail": "agentfsm.engine.decide",
    "GenerationOptions": "agentfsm.backends",
    "get_dialect": "agentfsm.dialects",
    "InvalidTransition": "agentfsm.core.errors",
    "ListContinuation": "agentfsm.backends",
    "LoopDetected": "agentfsm.core.errors",
    "MaxStepsExceeded": "agentfsm.core.errors",
    "Message": "agentfsm.core.messages",
    "MissingExtraError": "agentfsm.core.errors",
    "OpenAICompatBackend": "agentfsm.backends",
    "parse_reply": "agentfsm.dialects.parse",
    "get_policy": "agentfsm.policy",
    "Policy": "agentfsm.policy",
    "Recorder": "agentfsm.runtime.recorder",
    "ToolChoice": "agentfsm.core.choice",
    "ParsedReply": "agentfsm.core.parsed",
    "Problem": "agentfsm.core.parsed",
    "PromptMessage": "agentfsm.core.messages",
    "read_events": "agentfsm.runtime.transcript",
    "read_transcript": "agentfsm.runtime.transcript",
    "render_contract": "agentfsm.prompt.contract",
    "write_report": "agentfsm.report",
    "replay": "agentfsm.replays.compare",
    "ReplayBackend": "agentfsm.replays.backend",
    "ReplayReport": "agentfsm.replays.compare",
    "RequestError": "agentfsm.core.errors",
    "RetryBudgetExceeded": "agentfsm.core.errors",
    "run_batch": "agentfsm.batch.controller",
    "run_batch_sync": "agentfsm.batch.controller",
    "RunConfig": "agentfsm.core.config",
    "RunError": "agentfsm.core.errors",
    "RunResult": "agentfsm.runtime.agent",
    "ScriptedBackend": "agentfsm.backends",
    "State": "agentfsm.core.states",
    "step": "agentfsm.engine.decide",
    "StreamParser": "agentfsm.dialects.stream",
    "SystemMessage": "agentfsm.core.messages",
    "TaskResult": "agentfsm.batch.controller",
    "TextDelta": "agentfsm.dialects.stream",
    "ToolCall": "agentfsm.core.messages",
    "ToolCallDelta": "agentfsm.dialects.stream",
    "ToolMessage": "agentfsm.core.messages",
    "ToolRegistry": "agentfsm.runtime.tools",
    "ToolResult": "agentfsm.core.messages",
    "ToolSpec": "agentfsm.core.messages",
    "ToolSpecError": "agentfsm.core.errors",
    "TranscriptError": "agentfsm.core.errors",
    "TranscriptEvent": "agentfsm.core.events",
    "UsageError": "agentfsm.core.errors",
    "UserMessage": "agentfsm.core.messages",
}

__all__ = [
    "Agent",
    "AgentFSMError",
    "AgentMachine",
    "Answer",
    "AssistantMessage",
    "Backend",
    "BackendError",
    "CallTools",
    "Capabilities",
    "Completion",
    "Correct",
    "EngineConfig",
    "Fail",
    "GenerationOptions",
    "InvalidTransition",
    "ListContinuation",
    "LoopDetected",
    "MaxStepsExceeded",
    "Message",
    "MissingExtraError",
    "OpenAICompatBackend",
    "ParsedReply",
    "Policy",
    "Problem",
    "PromptMessage",
    "Recorder",
    "ReplayBackend",
    "ReplayReport",
    "RequestError",
    "RetryBudgetExceeded",
    "RunConfig",
    "RunError",
    "RunResult",
    "ScriptedBackend",
    "State",
    "StreamParser",
    "SystemMessage",
    "TaskResult",
    "TextDelta",
    "ToolCall",
    "ToolCallDelta",
    "ToolChoice",
    "ToolMessage",
    "ToolRegistry",
    "ToolResult",
    "ToolSpec",
    "ToolSpecError",
    "TranscriptError",
    "TranscriptEvent",
    "UsageError",
    "UserMessage",
    "areplay",
    "create_backend",
    "derive_state",
    "get_dialect",
    "get_policy",
    "parse_reply",
    "read_events",
    "read_transcript",
    "render_contract",
    "replay",
    "run_batch",
    "run_batch_sync",
    "step",
    "write_report",
]


__getattr__ = lazy_exports(__name__, _EXPORTS, globals())


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
