"""The agentfsm error tree.

Every error raised by agentfsm derives from :class:`AgentFSMError`. Foreign errors
(httpx, tenacity, json, llama.cpp) are mapped to these at the edge with
``raise ... from exc``. A guard asking the model again is *not* an error: it is a
:class:`~agentfsm.engine.decide.Correction` value returned by the engine.

::

    AgentFSMError
    ├── UsageError                  misuse of the library (bad argument, bad config)
    │   ├── ToolSpecError           a tool definition that cannot be turned into a ToolSpec
    │   ├── MissingExtraError       an optional extra is not installed (names it)
    │   ├── InvalidTransition       an event fired from a state that does not allow it
    │   └── GraphvizMissing         SVG/PNG asked for without graphviz's ``dot``
    ├── RequestError                a client request that cannot be served (proxy: 4xx)
    │   ├── UnsupportedContent      a content type / block we do not handle (names it)
    │   ├── BodyTooLarge            the body is over the proxy's limit (413)
    │   ├── BodyTimeout             the body did not arrive in time (408)
    │   ├── PromptTooLong           the prompt does not fit the model's context (400)
    │   │   └── MaxTokensTooLarge   it fits, but not with the completion asked for (400)
    │   ├── ModelNotFound           the request names a model the proxy does not serve (404)
    │   ├── AuthError               no API key, or a wrong one (401)
    │   ├── NotAllowedOrigin        a Host or Origin not on the proxy's allow-list (403)
    │   ├── UnsupportedMediaType    a body not sent as JSON (415)
    │   └── TooManyTools            more tools in one request than the proxy takes (400)
    ├── RunError                    an agent run that ended without an answer
    │   ├── RetryBudgetExceeded     corrections exhausted (attempts, last reply, reason)
    │   ├── LoopDetected            the same call after the same result, N times
    │   └── MaxStepsExceeded        the agent loop hit max_steps
    ├── BackendError                the model could not be reached or answered badly
    │   ├── BackendTimeout
    │   ├── BackendConnectionError
    │   ├── BackendHTTPError        non-2xx after transport retries (status, body excerpt)
    │   ├── BackendProtocolError    garbage, or a stream that ended without its terminator
    │   └── ScriptExhausted         a scripted or replay backend ran out of replies
    ├── ToolExecutionError          raised by the tool registry for an unknown tool
    │   └── MCPToolError            an MCP tool reported an error
    └── TranscriptError             unreadable or malformed transcript, or an event
                                    that does not fit its schema when written

    ClientGone                      control flow, not a failure: the proxy's client
                                    disconnected before the answer was ready
"""

from __future__ import annotations

from collections.abc import Mapping

from agentfsm.core.redaction import upstream_message

__all__ = [
    "AgentFSMError",
    "AuthError",
    "BackendConnectionError",
    "BackendError",
    "BackendHTTPError",
    "BackendProtocolError",
    "BackendTimeout",
    "BodyTimeout",
    "BodyTooLarge",
    "ClientGone",
    "GraphvizMissing",
    "InvalidTransition",
    "NothingToDecide",
    "LoopDetected",
    "MCPToolError",
    "MaxStepsExceeded",
    "MaxTokensTooLarge",
    "MissingExtraError",
    "ModelNotFound",
    "NotAllowedOrigin",
    "PromptTooLong",
    "RequestError",
    "RetryBudgetExceeded",
    "RunError",
    "ScriptExhausted",
    "TooManyTools",
    "ToolExecutionError",
    "ToolSpecError",
    "TranscriptError",
    "UnsupportedContent",
    "UnsupportedMediaType",
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


class NothingToDecide(InvalidTransition):
    """A turn asked of a history that leaves the model nothing to decide: the latest
    calls without their results (``pending``: their ids), or an assistant reply last."""

    def __init__(self, state: str, pending: tuple[str, ...] = (), shared: Mapping[str, int] | None = None) -> None:
        super().__init__("step", state)
        self.pending = pending
        if pending:
            ids = ", ".join(p or "(no id)" for p in pending)
            # ``shared``: ids that several calls of that reply carry, and how many: a result
            # under such an id answers one of them, so the others look unanswered
            twice = "".join(f"; {i!r} is the id of {n} calls of one reply" for i, n in (shared or {}).items())
            text = (f"the conversation ends with tool calls that have no result yet ({ids}{twice}): "
                    + ("give each call of a reply its own id, and " if twice else "")
                    + "send the result of each call before asking for the next step")
        else:
            text = ("the conversation ends with an assistant reply, so the model has nothing to decide "
                    "(an assistant message last, a prefill, is not supported with tools): end it with a "
                    "user message or tool results")
        self.args = (text,)


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


class BodyTooLarge(RequestError):
    """The request body is larger than the proxy accepts (HTTP 413)."""

    status_code = 413

    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(f"request body exceeds the limit of {limit} bytes")


class BodyTimeout(RequestError):
    """The client did not send its whole body in time (HTTP 408)."""

    status_code = 408

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        super().__init__(f"the request body did not arrive within {timeout:g}s")


class PromptTooLong(RequestError):
    """The prompt (contract included) does not fit the model's context, even compacted
    (HTTP 400; OpenAI code ``context_length_exceeded``). ``tokens`` and ``maximum`` are
    None when an upstream said so without the numbers."""

    def __init__(self, tokens: int | None, maximum: int | None, message: str | None = None) -> None:
        self.tokens = tokens
        self.maximum = maximum
        super().__init__(message or f"prompt is too long: {tokens} tokens > {maximum} maximum")


class MaxTokensTooLarge(PromptTooLong):
    """The prompt fits the model's context, but not with the ``max_tokens`` asked for
    (HTTP 400): ``tokens`` is the prompt's, ``max_tokens`` the completion asked for,
    ``maximum`` the context. Worded as Anthropic words it (clients that read it lower
    their ``max_tokens`` and retry)."""

    def __init__(self, tokens: int, max_tokens: int, maximum: int) -> None:
        self.max_tokens = max_tokens
        super().__init__(
            tokens,
            maximum,
            f"input length and `max_tokens` exceed context limit: {tokens} + {max_tokens} > {maximum}, "
            "decrease input length or `max_tokens` and try again",
        )


class ModelNotFound(RequestError):
    """The request names a model that the proxy does not serve (HTTP 404; OpenAI code
    ``model_not_found``, Anthropic ``not_found_error``). ``served`` lists the names it does."""

    status_code = 404

    def __init__(self, model: str, served: tuple[str, ...]) -> None:
        self.model = model
        self.served = served
        super().__init__(
            f"The model `{model}` does not exist or you do not have access to it (served here: {', '.join(served)})",
            param="model",
        )


class AuthError(RequestError):
    """No API key, or a wrong one (HTTP 401)."""

    status_code = 401

    def __init__(self) -> None:
        super().__init__("invalid or missing API key (send 'Authorization: Bearer KEY' or 'x-api-key: KEY')")


class NotAllowedOrigin(RequestError):
    """A request whose ``Host`` or ``Origin`` is not on the proxy's allow-list (HTTP 403):
    a web page reaching a loopback proxy by DNS rebinding, or posting to it from another
    site, is refused before the body is read."""

    status_code = 403

    def __init__(self, header: str, value: str) -> None:
        self.header = header
        shown = value if len(value) <= 100 else value[:100] + "..."
        super().__init__(
            f"{header} {shown!r} is not allowed by this proxy (a request from a web page or "
            "through an unknown name); allow it with --allowed-hosts / --allowed-origins"
        )


class UnsupportedMediaType(RequestError):
    """A body not declared as JSON (HTTP 415): a form or ``text/plain`` body is what a web
    page can send to another site without asking first."""

    status_code = 415

    def __init__(self, content_type: str | None) -> None:
        self.content_type = content_type
        got = repr(content_type[:100]) if content_type else "none"
        super().__init__(f"the request body must be sent as JSON (Content-Type: application/json), got {got}")


class TooManyTools(RequestError):
    """A request offering more tools than the proxy takes (HTTP 400, param ``tools``)."""

    def __init__(self, count: int, limit: int) -> None:
        self.count = count
        self.limit = limit
        super().__init__(f"the request offers {count} tools; this proxy takes at most {limit}", param="tools")


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
    """The model backend failed. ``detail``: what the transport said (it may name the
    upstream's host and port), shown in logs and transcripts after :attr:`summary`; a
    proxy's client reads the summary alone."""

    def __init__(self, message: str = "", *, detail: str | None = None) -> None:
        #: the failure, without the transport's detail
        self.summary = message
        self.detail = detail
        super().__init__(f"{message}: {detail}" if detail else message)


class BackendTimeout(BackendError):
    """The backend did not answer within the configured timeout."""


class BackendConnectionError(BackendError):
    """The backend could not be reached (after transport retries)."""


class BackendHTTPError(BackendError):
    """The backend answered with a non-success status (after transport retries). A client
    reads the summary: the status, and of a JSON error body its message alone, every
    address in it hidden (:func:`~agentfsm.core.redaction.upstream_message`). The body is
    the error's ``detail`` (log and transcript): a server's or a reverse proxy's error page,
    or a JSON body's other fields, may name hosts, ports and versions."""

    def __init__(self, status_code: int, body: str, retry_after: float | None = None) -> None:
        self.status_code = status_code
        self.body = body[:500]
        #: seconds the upstream asked to wait (its Retry-After), passed on to the client
        self.retry_after = retry_after
        head = f"upstream answered HTTP {status_code}"
        said = upstream_message(body)
        if said is not None:
            head = f"{head}: {said[:500]}"
        super().__init__(head, detail=self.body or None)


class BackendProtocolError(BackendError):
    """The backend answered something that is not a valid chat completion."""


class ScriptExhausted(BackendError):
    """A scripted or replay backend was asked for more replies than it holds."""

    def __init__(self, served: int, source: str = "script") -> None:
        self.served = served
        super().__init__(f"{source} exhausted: all {served} replies were already served")


class ToolExecutionError(AgentFSMError):
    """A tool could not be executed (unknown to the registry)."""


class MCPToolError(ToolExecutionError):
    """An MCP tool reported an error (``isError``); the agent turns it into an error result."""


class TranscriptError(AgentFSMError):
    """A transcript file could not be read, or an event did not fit its type's schema."""


class GraphvizMissing(UsageError):
    """SVG or PNG was asked for, and graphviz's ``dot`` is not on ``PATH``."""

    def __init__(self, fmt: str) -> None:
        self.format = fmt
        super().__init__(
            f"--format {fmt} needs graphviz, and `dot` is not on PATH. Install it "
            "(Debian/Ubuntu: sudo apt-get install graphviz; macOS: brew install graphviz) "
            "or use --format mermaid, which needs nothing extra."
        )


class ClientGone(Exception):
    """The client closed its connection before the answer was ready."""
