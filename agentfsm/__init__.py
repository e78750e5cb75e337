"""agentfsm: tool calling for chat models that have none.

The public API is the sorted ``__all__`` below; a test checks it.
"""

from __future__ import annotations

from agentfsm.errors import (
    AgentFSMError,
    BackendError,
    InvalidTransition,
    LoopDetected,
    MaxStepsExceeded,
    RetryBudgetExceeded,
    UsageError,
)
from agentfsm.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolResult,
    ToolSpec,
    UserMessage,
)

__version__ = "0.1.0"

__all__ = [
    "AgentFSMError",
    "AssistantMessage",
    "BackendError",
    "InvalidTransition",
    "LoopDetected",
    "MaxStepsExceeded",
    "Message",
    "RetryBudgetExceeded",
    "SystemMessage",
    "ToolCall",
    "ToolMessage",
    "ToolResult",
    "ToolSpec",
    "UsageError",
    "UserMessage",
]
