"""What both wire protocols share: the normalized request, ids, SSE framing, error status.

Pure code: ids are minted from a token or a :class:`random.Random` that the edge
passes in, so nothing here reads a clock or a random source of its own.
"""

from __future__ import annotations

import hashlib
import json
import random
import string
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field

from agentfsm.core._types import JSONObject
from agentfsm.core.choice import ToolChoice, ToolChoiceField
from agentfsm.core.backend import estimate_tokens
from agentfsm.core.errors import (
    AgentFSMError,
    BackendConnectionError,
    BackendError,
    BackendHTTPError,
    BackendProtocolError,
    BackendTimeout,
    RequestError,
    RunError,
    TranscriptError,
)
from agentfsm.core.messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolSpec,
)

__all__ = [
    "FinishReason",
    "NormalizedRequest",
    "RECOVERED_TOOL_SCHEMA",
    "WireProtocol",
    "client_message",
    "dump_arguments",
    "error_status",
    "estimate_tokens",
    "mint_call_id",
    "mint_response_id",
    "recover_tools",
    "remint_ids",
    "sse_event",
    "tools_or_recovered",
]

#: ``openai`` is chat completions, ``responses`` OpenAI's Responses API, ``anthropic`` messages
WireProtocol: TypeAlias = Literal["openai", "responses", "anthropic"]

#: Why a generation ended, in our own vocabulary; each encoder maps it to its protocol's.
FinishReason: TypeAlias = Literal["stop", "length", "tool_calls", "stop_sequence"]

#: The schema given to a tool recovered from history: its real schema is unknown.
RECOVERED_TOOL_SCHEMA: JSONObject = {"type": "object"}

_ALNUM = string.ascii_letters + string.digits
_ID_LENGTH = 24
_CALL_PREFIX: dict[WireProtocol, str] = {"openai": "call_", "responses": "call_", "anthropic": "toolu_"}
_RESPONSE_PREFIX: dict[WireProtocol, str] = {
    "openai": "chatcmpl-",
    "responses": "resp_",
    "anthropic": "msg_",
}


class NormalizedRequest(BaseModel):
    """One client request, OpenAI or Anthropic, in a single internal shape."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    #: which replies the request allows (parsed from the protocol's own spelling)
    tool_choice: ToolChoiceField = ToolChoice.NONE
    #: several calls allowed in one reply (OpenAI ``parallel_tool_calls``,
    #: Anthropic ``not disable_parallel_tool_use``)
    parallel: bool = True
    #: tools were given, or recovered from the history: the contract applies
    tool_mode: bool = False
    #: the offered tools that are custom (freeform: one raw text input), whose calls go
    #: back as ``custom_tool_call`` items (Responses)
    custom_tools: tuple[str, ...] = ()
    #: the tools were not in this request but rebuilt from the calls in its history
    tools_recovered: bool = False
    stream: bool = False
    #: OpenAI ``stream_options.include_usage``: send a usage chunk before ``[DONE]``
    stream_include_usage: bool = False
    model: str = ""
    max_tokens: int | None = None
    temperature: float | None = None
    stop: tuple[str, ...] = ()
    seed: int | None = None
    top_p: float | None = None
    top_k: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    #: OpenAI-shaped ``json_object`` / ``json_schema`` format for a reply without tools
    response_format: JSONObject | None = None
    #: the end user, for the upstream (OpenAI ``user``, Anthropic ``metadata.user_id``)
    user: str | None = None
    protocol: WireProtocol
    #: the client's fields that are not honoured, by their names in the client's request
    #: (sent back in ``x-agentfsm-ignored`` and kept in the transcript)
    ignored: tuple[str, ...] = ()
    #: what the response object repeats of the request, as the client sent it (the
    #: Responses API's ``instructions``, ``tools``, ``tool_choice`` ...); None: nothing.
    #: Not dumped: the transcript has the request itself
    response_echo: JSONObject | None = Field(default=None, exclude=True)


def recover_tools(messages: Iterable[Message]) -> tuple[ToolSpec, ...]:
    """ToolSpecs for every tool name called in the history, in order of first use.

    The client did not repeat ``tools``, so descriptions are empty and the schema is
    the permissive :data:`RECOVERED_TOOL_SCHEMA`.
    """
    names: dict[str, None] = {}
    for message in messages:
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls:
                names.setdefault(call.name, None)
    return tuple(
        ToolSpec(name=name, description="", parameters=dict(RECOVERED_TOOL_SCHEMA))
        for name in names
    )


def tools_or_recovered(
    tools: tuple[ToolSpec, ...], messages: Iterable[Message]
) -> tuple[tuple[ToolSpec, ...], bool]:
    """The request's tools, or, when it offers none, those its history called
    (:func:`recover_tools`); and whether they were recovered."""
    if tools:
        return tools, False
    recovered = recover_tools(messages)
    return recovered, bool(recovered)


def mint_call_id(protocol: WireProtocol, source: str | random.Random) -> str:
    """A tool-call id in the protocol's style: ``call_<24 alnum>`` or ``toolu_<24 alnum>``.

    ``source`` is a token from the edge (e.g. ``secrets.token_hex(12)``: used as is when
    it is at least 24 alphanumerics, otherwise hashed) or a seeded :class:`random.Random`.
    """
    return _CALL_PREFIX[protocol] + _id_body(source)


def mint_response_id(protocol: WireProtocol, source: str | random.Random) -> str:
    """A response id: ``chatcmpl-<24 alnum>``, ``resp_<24 alnum>`` or ``msg_<24 alnum>``."""
    return _RESPONSE_PREFIX[protocol] + _id_body(source)


def remint_ids(
    calls: Sequence[ToolCall], protocol: WireProtocol, make_token: Callable[[], str]
) -> tuple[ToolCall, ...]:
    """Give parser-numbered calls (``call_0``, ``call_1`` ...) fresh protocol-style ids."""
    return tuple(
        call.model_copy(update={"id": mint_call_id(protocol, make_token())}) for call in calls
    )


def _id_body(source: str | random.Random) -> str:
    if isinstance(source, random.Random):
        return "".join(source.choice(_ALNUM) for _ in range(_ID_LENGTH))
    if len(source) >= _ID_LENGTH and source.isascii() and source.isalnum():
        return source[:_ID_LENGTH]
    return hashlib.sha256(source.encode("utf-8")).hexdigest()[:_ID_LENGTH]


def sse_event(data: Mapping[str, Any] | str, event: str | None = None) -> str:
    """One server-sent event: optional ``event:`` line, a ``data:`` line, a blank line."""
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    head = f"event: {event}\n" if event is not None else ""
    return f"{head}data: {payload}\n\n"


#: upstream statuses passed on as they are: what the client can act on itself (send
#: less; wait as long as the upstream asks, its Retry-After passed on with them)
_PASSED_ON = frozenset({413, 429, 503})
#: upstream statuses that refuse the proxy, not its client: the proxy's own key (401,
#: 403), the model or path its entry names (404); the upstream's answer is the operator's
_REFUSED_THE_PROXY = {
    401: "refused the proxy's own credentials",
    403: "refused the proxy's own credentials",
    404: "does not have the model or endpoint that the proxy is set to ask for",
}


def error_status(exc: AgentFSMError) -> int:
    """The HTTP status the proxy answers with for one of our errors."""
    if isinstance(exc, RequestError):
        return exc.status_code
    if isinstance(exc, BackendTimeout):
        return 504
    if isinstance(exc, BackendHTTPError):
        # any other refusal by the upstream is the proxy's (its key, its model entry, the
        # request it built), never the client's: a 502, which names the model entry
        return exc.status_code if exc.status_code in _PASSED_ON else 502
    if isinstance(exc, BackendConnectionError | BackendProtocolError):
        return 502
    if isinstance(exc, RunError):
        # the model never produced an acceptable reply to a valid request: our failure,
        # answered as the provider's server-side error (never a 4xx that blames the client)
        return 500
    return 500


def client_message(exc: AgentFSMError, entry: str | None = None) -> str:
    """The error's message as the client reads it. A transcript the proxy cannot write is
    the proxy's own file (a full disk, a vanished mount): its path stays in the proxy's
    log (where the error is logged whole) and never reaches the client. An upstream's
    refusal of the proxy (401, 403, 404) names the model ``entry`` and not the upstream's
    answer; a transport failure, its kind and not the transport's detail (the upstream's
    host and port): both stay in the log and the transcript."""
    if isinstance(exc, TranscriptError):
        return "the proxy could not write this request's transcript (its log says why)"
    if isinstance(exc, BackendHTTPError) and exc.status_code in _REFUSED_THE_PROXY:
        upstream = f"the upstream of model {entry!r}" if entry else "the upstream"
        return (f"{upstream} {_REFUSED_THE_PROXY[exc.status_code]} (HTTP {exc.status_code}): the proxy's "
                "operator must fix its setup (its log says more); your request and your key are not in question")
    if isinstance(exc, BackendError) and exc.detail is not None:
        concerns = f"model {entry!r}; " if entry else ""
        return f"{exc.summary} ({concerns}the proxy's log says more)"
    return str(exc)


def dump_arguments(call: ToolCall) -> str:
    """A call's arguments as the compact JSON string OpenAI puts in ``function.arguments``."""
    return json.dumps(call.arguments, ensure_ascii=False, separators=(",", ":"))
