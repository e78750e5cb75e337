"""OpenAI chat completions: request normalization and error bodies.

The response body is built in :mod:`agentfsm.protocols.openai_response` (its names are
re-exported here), streaming in :mod:`agentfsm.protocols.openai_stream`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from agentfsm.core._types import JSONObject
from agentfsm.core.choice import ToolChoice
from agentfsm.core.errors import AgentFSMError, ModelNotFound, PromptTooLong, RequestError, UnsupportedContent
from agentfsm.core.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolSpec,
    UserMessage,
    parse_messages,
)
from agentfsm.protocols._calls import CallLedger
from agentfsm.protocols._fields import (
    choice_keyword,
    chosen_tool,
    opt_bool,
    opt_int,
    opt_str,
    parse_arguments,
    req_list,
    req_mapping,
    req_str,
    stop_sequences,
    text_of_parts,
    tool_specs,
)
from agentfsm.protocols.common import (
    NormalizedRequest,
    client_message,
    error_status,
    tools_or_recovered,
)
from agentfsm.protocols.openai_response import (
    OPENAI_FINISH_REASONS,
    encode_openai_response,
    openai_finish_reason,
    openai_usage,
)
from agentfsm.protocols.sampling import message_extras, openai_settings

__all__ = [
    "OPENAI_FINISH_REASONS",
    "encode_openai_response",
    "normalize_openai",
    "openai_error",
    "openai_error_for",
    "openai_finish_reason",
    "openai_usage",
    "read_conversation",
]

# The deprecated function-calling API: named in a 400 rather than half-supported.
_LEGACY = ("functions", "function_call")

_USER_TEXT = {"text": "text"}
_ASSISTANT_TEXT = {"text": "text", "refusal": "refusal"}


def read_conversation(raw: Sequence[Mapping[str, Any]]) -> list[Message]:
    """A conversation given as dicts, in the OpenAI chat shape or agentfsm's own (a batch
    task's ``messages``, an ``Agent`` prompt): its messages. A list neither shape reads is
    the OpenAI reading's :class:`RequestError` (it names the message at fault)."""
    try:
        return list(normalize_openai({"messages": list(raw)}).messages)
    except AgentFSMError as exc:
        try:
            return parse_messages(raw)
        except ValidationError:
            if isinstance(exc, RequestError):
                raise exc from None
            raise RequestError(str(exc)) from exc


def normalize_openai(body: Mapping[str, Any]) -> NormalizedRequest:
    """A chat-completions request body as a :class:`NormalizedRequest`.

    Raises :class:`RequestError` (``param`` set) for a malformed request and
    :class:`UnsupportedContent` for content parts other than text.
    """
    body = req_mapping(body, "body")
    for key in _LEGACY:
        if body.get(key) is not None:  # a null one asks for nothing (SDKs may send one)
            raise RequestError(
                f"{key!r} belongs to the deprecated function-calling API; "
                "send 'tools' and 'tool_choice' instead",
                param=key,
            )
    if opt_int(body, "n") not in (None, 1):  # an integer (not true, not 1.0), and one choice
        raise RequestError("only n=1 is supported", param="n")

    passed_over: list[str] = []  # what the history holds that the model cannot be shown
    messages = _messages(body.get("messages"), passed_over)
    tools, recovered = tools_or_recovered(
        tool_specs(body.get("tools"), _tool, name_key="function.name"), messages
    )
    tool_choice, tools = _tool_choice(body.get("tool_choice"), tools)

    stream = opt_bool(body, "stream", False)
    options = body.get("stream_options")
    include_usage = False
    if options is not None:
        include_usage = opt_bool(
            req_mapping(options, "stream_options"),
            "include_usage",
            False,
            where="stream_options.include_usage",
        )
    max_tokens, shadowed = _max_tokens(body)

    return NormalizedRequest(
        messages=messages,
        tools=tools,
        tool_choice=tool_choice,
        parallel=opt_bool(body, "parallel_tool_calls", True),
        tool_mode=bool(tools),
        tools_recovered=recovered,
        stream=stream,
        stream_include_usage=include_usage,
        model=opt_str(body, "model"),
        max_tokens=max_tokens,
        stop=stop_sequences(body, "stop", most=4),
        protocol="openai",
        **_settings(body, ["max_tokens"] if shadowed else [], passed_over),
    )


def _max_tokens(body: Mapping[str, Any]) -> tuple[int | None, bool]:
    """The completion's limit: ``max_completion_tokens``, else the deprecated ``max_tokens``;
    and whether a ``max_tokens`` of another value was passed over for it (OpenAI refuses
    the two together; the proxy honours the newer one and names the other as ignored)."""
    newer, older = opt_int(body, "max_completion_tokens"), opt_int(body, "max_tokens")
    if newer is None:
        return older, False
    return newer, older is not None and older != newer


def _settings(body: Mapping[str, Any], *passed_over: list[str]) -> dict[str, Any]:
    """The sampling settings (:func:`openai_settings`), with what else was passed over named."""
    settings = openai_settings(body)
    names = [name for names in passed_over for name in names]
    settings["ignored"] = tuple(dict.fromkeys((*names, *settings["ignored"])))
    return settings


def _messages(raw: Any, passed_over: list[str]) -> tuple[Message, ...]:
    if raw is None:
        raise RequestError("'messages' is required", param="messages")
    items = req_list(raw, "messages", non_empty=True)
    out: list[Message] = []
    ledger = CallLedger()
    for i, item in enumerate(items):
        where = f"messages[{i}]"
        msg = req_mapping(item, where)
        passed_over.extend(message_extras(msg))
        role = msg.get("role")
        if role in ("system", "developer"):
            text = text_of_parts(msg.get("content"), f"{where}.content", text_types=_USER_TEXT)
            out.append(SystemMessage(content=text or ""))
        elif role == "user":
            text = text_of_parts(msg.get("content"), f"{where}.content", text_types=_USER_TEXT)
            out.append(UserMessage(content=text or ""))
        elif role == "assistant":
            assistant = _assistant(msg, where, passed_over)
            ledger.begin_turn()
            kept = tuple(call for j, call in enumerate(assistant.tool_calls)
                         if ledger.add(call, f"{where}.tool_calls[{j}].id"))
            if len(kept) < len(assistant.tool_calls):  # the same call written twice over
                passed_over.append("messages.repeated_tool_call")
                assistant = assistant.model_copy(update={"tool_calls": kept})
            out.append(assistant)
        elif role == "tool":
            out.append(_tool_message(msg, where, ledger))
        elif role == "function":
            raise RequestError(
                f"{where}: role 'function' belongs to the deprecated function-calling API; "
                "send role 'tool' with a tool_call_id",
                param=f"{where}.role",
            )
        else:
            raise RequestError(
                f"{where}.role must be one of system, developer, user, assistant, tool; "
                f"got {role!r}",
                param=f"{where}.role",
            )
    return tuple(out)


def _assistant(msg: Mapping[str, Any], where: str, passed_over: list[str]) -> AssistantMessage:
    if msg.get("function_call") is not None:
        raise RequestError(
            f"{where}.function_call belongs to the deprecated function-calling API; "
            "send tool_calls instead",
            param=f"{where}.function_call",
        )
    if msg.get("audio") is not None:
        raise UnsupportedContent("audio", f"{where}.audio")
    text = text_of_parts(
        msg.get("content"), f"{where}.content", text_types=_ASSISTANT_TEXT, allow_null=True
    )
    refusal = msg.get("refusal")
    if refusal is not None and not text:
        text = req_str(refusal, f"{where}.refusal")
    calls: list[ToolCall] = []
    raw_calls = msg.get("tool_calls")
    if raw_calls is not None:
        for j, raw in enumerate(req_list(raw_calls, f"{where}.tool_calls")):
            calls.append(_tool_call(raw, f"{where}.tool_calls[{j}]", passed_over))
    return AssistantMessage(content=text or None, tool_calls=tuple(calls))


def _tool_call(raw: Any, where: str, passed_over: list[str]) -> ToolCall:
    call = req_mapping(raw, where)
    kind = call.get("type", "function")
    if kind != "function":
        raise UnsupportedContent(f"{kind} tool call", where)
    fn = req_mapping(call.get("function"), f"{where}.function")
    arguments = parse_arguments(fn.get("arguments", ""), f"{where}.function.arguments")
    if arguments is None:  # not a JSON object (cut off ...): kept as a call of no arguments
        passed_over.append("tool_calls.arguments")
    return ToolCall(
        id=req_str(call.get("id"), f"{where}.id"),
        name=req_str(fn.get("name"), f"{where}.function.name"),
        arguments=arguments or {},
    )


def _tool_message(msg: Mapping[str, Any], where: str, ledger: CallLedger) -> ToolMessage:
    call_id = msg.get("tool_call_id")
    if not isinstance(call_id, str) or not call_id:
        raise RequestError(
            f"{where}: a tool message needs a tool_call_id", param=f"{where}.tool_call_id"
        )
    text = text_of_parts(msg.get("content"), f"{where}.content", text_types=_USER_TEXT) or ""
    return ledger.answer(call_id, text, where=where, key="tool_call_id", answers="assistant tool call")


def _tool(tool: Mapping[str, Any], where: str) -> ToolSpec:
    kind = tool.get("type", "function")
    if kind != "function":
        raise RequestError(
            f"{where}: tool type {kind!r} is not supported (only 'function')",
            param=f"{where}.type",
        )
    return ToolSpec.from_openai(tool)


def _tool_choice(raw: Any, tools: tuple[ToolSpec, ...]) -> tuple[ToolChoice, tuple[ToolSpec, ...]]:
    """The normalized choice, and the tools (narrowed by an ``allowed_tools`` choice)."""
    if raw is None:
        return (ToolChoice.AUTO if tools else ToolChoice.NONE), tools
    if isinstance(raw, str):
        return choice_keyword(raw, tools), tools
    names = [t.name for t in tools]
    choice = req_mapping(raw, "tool_choice")
    kind = choice.get("type")
    if kind == "function":
        fn = req_mapping(choice.get("function"), "tool_choice.function")
        return chosen_tool(req_str(fn.get("name"), "tool_choice.function.name"), tools), tools
    if kind == "allowed_tools":
        allowed = req_mapping(choice.get("allowed_tools"), "tool_choice.allowed_tools")
        mode = allowed.get("mode", "auto")
        if mode not in ("auto", "required"):
            raise RequestError(
                f"tool_choice.allowed_tools.mode must be 'auto' or 'required'; got {mode!r}",
                param="tool_choice",
            )
        wanted: list[str] = []
        for i, item in enumerate(req_list(allowed.get("tools"), "tool_choice.allowed_tools.tools")):
            where = f"tool_choice.allowed_tools.tools[{i}]"
            fn = req_mapping(req_mapping(item, where).get("function"), f"{where}.function")
            name = req_str(fn.get("name"), f"{where}.function.name")
            if name not in names:
                raise RequestError(
                    f"{where} names {name!r}, which is not among the tools", param="tool_choice"
                )
            wanted.append(name)
        kept = tuple(t for t in tools if t.name in wanted)
        if not kept:
            # nothing may be called now; the tools stay for reading the history
            return ToolChoice.NONE, tools
        return ToolChoice.parse(mode), kept
    raise RequestError(f"tool_choice type {kind!r} is not supported", param="tool_choice")


_DEFAULT_TYPES: Mapping[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
    502: "upstream_error",
    503: "server_error",
    504: "timeout_error",
}


def openai_error(
    status: int,
    message: str,
    type: str | None = None,
    param: str | None = None,
    code: str | None = None,
) -> JSONObject:
    """An error body in OpenAI's shape: ``{"error": {"message", "type", "param", "code"}}``.

    ``type`` defaults from the status (``invalid_request_error`` for 400 ...).
    """
    kind = type or _DEFAULT_TYPES.get(
        status, "server_error" if status >= 500 else "invalid_request_error"
    )
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def openai_error_for(exc: AgentFSMError, entry: str | None = None) -> tuple[int, JSONObject]:
    """The HTTP status and OpenAI error body for one of our errors (``entry``: the served
    model it concerns, named in an upstream failure's message)."""
    status = error_status(exc)
    param = exc.param if isinstance(exc, RequestError) else None
    code = "unsupported_content" if isinstance(exc, UnsupportedContent) else None
    if isinstance(exc, PromptTooLong):
        code = "context_length_exceeded"
    if isinstance(exc, ModelNotFound):  # as OpenAI answers it: a 404 typed as a request error
        return status, openai_error(status, client_message(exc, entry), "invalid_request_error", param, "model_not_found")
    return status, openai_error(status, client_message(exc, entry), param=param, code=code)
