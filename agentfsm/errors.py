"""The agentfsm error tree.

Every error raised by agentfsm derives from :class:`AgentFSMError`. Foreign errors
(httpx, tenacity, json, llama.cpp) are mapped to these at the edge with
``raise ... from exc``. A guard asking the model again is *not* an error: it is a
:class:`~agentfsm.engine.Correction` value returned by the engine.

::

    AgentFSMError
    ├── UsageError                  misuse of the library (bad argument, bad config)
    │   ├── ToolSpecError           a tool definition that cannot be turned into a ToolSpec
    │   ├── MissingExtraError       an optional extra is not installed (names it)
    │   └── InvalidTransition       an event fired from a state that does not allow it
    ├── RequestError                a client request that cannot be served (proxy: 4xx)
    │   └── UnsupportedContent      a content type / block we do not handle (names it)
    ├── RunError                    an agent run that ended without an answer
    │   ├── RetryBudgetExceeded     corrections exhausted (attempts, last reply, reason)
    │   ├── LoopDetected            the same call after the same result, N times
    │   └── MaxStepsExceeded        the agent loop hit max_steps
    ├── BackendError                the model could not be reached or answered badly
    │   ├── BackendTimeout
    │   ├── BackendConnectionError
    │   ├── BackendHTTPError        non-2xx after transport retries (status, body excerpt)
    │   └── BackendProtocolError    garbage, or a stream that ended without its terminator
    ├── ToolExecutionError          raised by the tool registry for an unknown tool
    └── TranscriptError             unreadable or malformed transcript file
"""

from __future__ import annotations

__all__ = [
    "AgentFSMError",
    "BackendConnectionError",
    "BackendError",
    "BackendHTTPError",
    "BackendProtocolError",
    "BackendTimeout",
    "InvalidTransition",
    "LoopDetected",
    "MaxStepsExceeded",
    "MissingExtraError",
    "RequestError",
    "RetryBudgetExceeded",
    "RunError",
    "ToolExecutionError",
    "ToolSpecError",
    "TranscriptError",
    "UnsupportedContent",
    "UsageError",
]


class AgentFSMError(Exception):
    """Base of every agentfsm error."""


class UsageError(AgentFSMError):
    """The library was called in a way it does not support."""


class ToolSpecError(UsageError):
    """A tool definition could not be turned into a ToolSpec."""


class MissingExtraError(UsageError):
    """An optional dependency is missing; the message names the extra to install."""

    def __init__(self, extra: str, what: str) -> None:
        self.extra = extra
        self.what = what
        super().__init__(f"{what} needs the optional extra: pip install 'agentfsm[{extra}]'")


class InvalidTransition(UsageError):
    """An event was fired from a state where the machine does not allow it."""

    def __init__(self, event: str, state: str) -> None:
        self.event = event
        self.state = state
        super().__init__(f"event {event!r} is not allowed in state {state!r}")


class RequestError(AgentFSMError):
    """A client request that cannot be served as sent (maps to HTTP 400)."""

    status_code: int = 400

    def __init__(self, message: str, *, param: str | None = None) -> None:
        self.param = param
        super().__init__(message)


class UnsupportedContent(RequestError):
    """A message content type or block that agentfsm does not handle."""

    def __init__(self, kind: str, where: str) -> None:
        self.kind = kind
        super().__init__(f"unsupported content type {kind!r} in {where}", param=where)


class RunError(AgentFSMError):
    """An agent run ended without a final answer."""


class RetryBudgetExceeded(RunError):
    """The correction budget of one turn was spent without an acceptable reply."""

    def __init__(self, attempts: int, last_reply: str, reason: str) -> None:
        self.attempts = attempts
        self.last_reply = last_reply
        self.reason = reason
        super().__init__(f"no acceptable reply after {attempts} attempts (last problem: {reason})")


class LoopDetected(RunError):
    """The model repeated the same call with the same arguments after the same result."""

    def __init__(self, tool: str, repeats: int) -> None:
        self.tool = tool
        self.repeats = repeats
        super().__init__(f"call to {tool!r} repeated {repeats} times with the same result")


class MaxStepsExceeded(RunError):
    """The agent loop ran out of steps."""

    def __init__(self, max_steps: int) -> None:
        self.max_steps = max_steps
        super().__init__(f"no final answer within max_steps={max_steps}")


class BackendError(AgentFSMError):
    """The model backend failed."""


class BackendTimeout(BackendError):
    """The backend did not answer within the configured timeout."""


class BackendConnectionError(BackendError):
    """The backend could not be reached (after transport retries)."""


class BackendHTTPError(BackendError):
    """The backend answered with a non-success status (after transport retries)."""

    def __init__(self, status_code: int, body: str) -> None:
        self.status_code = status_code
        self.body = body[:500]
        super().__init__(f"upstream answered HTTP {status_code}: {self.body}")


class BackendProtocolError(BackendError):
    """The backend answered something that is not a valid chat completion."""


class ToolExecutionError(AgentFSMError):
    """A tool could not be executed (unknown to the registry)."""


class TranscriptError(AgentFSMError):
    """A transcript file could not be read."""
