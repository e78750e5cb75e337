"""agentfsm: tool calling for chat models that have none.

The public API is the sorted ``__all__`` below; a test checks it. The HTTP proxy is
``agentfsm.server.create_app`` (imported on its own, so library users do not load
FastAPI).
"""

from __future__ import annotations

from loguru import logger

from agentfsm.backends import (
    Backend,
    Capabilities,
    Completion,
    GenerationOptions,
    ListContinuation,
    OpenAICompatBackend,
    ReplayBackend,
    ScriptedBackend,
    create_backend,
)
from agentfsm.batch import TaskResult, run_batch, run_batch_sync
from agentfsm.contract import render_contract
from agentfsm.dialects import get_dialect
from agentfsm.dialects.base import ParsedReply, Problem
from agentfsm.engine import Answer, CallTools, Correct, EngineConfig, Fail, step
from agentfsm.errors import (
    AgentFSMError,
    BackendError,
    InvalidTransition,
    LoopDetected,
    MaxStepsExceeded,
    MissingExtraError,
    RequestError,
    RetryBudgetExceeded,
    RunError,
    UsageError,
)
from agentfsm.machine import AgentMachine
from agentfsm.messages import (
    AssistantMessage,
    Message,
    PromptMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolResult,
    ToolSpec,
    UserMessage,
)
from agentfsm.parser import parse_reply
from agentfsm.replay import ReplayReport, areplay, replay
from agentfsm.runtime import Agent, RunResult
from agentfsm.states import State, derive_state
from agentfsm.stream import StreamParser, TextDelta, ToolCallDelta
from agentfsm.tools import ToolRegistry
from agentfsm.transcript import read_transcript

__version__ = "0.1.0"

# A library adds no log sinks and is silent by default (loguru's advice); the CLI
# enables it, and users can with ``logger.enable("agentfsm")``.
logger.disable("agentfsm")

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
    "Problem",
    "PromptMessage",
    "ReplayBackend",
    "ReplayReport",
    "RequestError",
    "RetryBudgetExceeded",
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
    "ToolMessage",
    "ToolRegistry",
    "ToolResult",
    "ToolSpec",
    "UsageError",
    "UserMessage",
    "areplay",
    "create_backend",
    "derive_state",
    "get_dialect",
    "parse_reply",
    "read_transcript",
    "render_contract",
    "replay",
    "run_batch",
    "run_batch_sync",
    "step",
]
