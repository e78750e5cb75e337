"""OpenAI Responses API (``POST /v1/responses``): request normalization and response encoding.

Input items understood: ``message`` (roles user, assistant, system, developer; a bare
``{"role", "content"}`` counts as one), ``function_call`` and ``function_call_output``;
a string ``input`` is one user message, ``instructions`` a leading system message.
``reasoning`` items are dropped (we never produce any; Codex may echo them back).
Tools: ``function`` tools are used; hosted and other tool types (``web_search``,
``namespace``, ``file_search`` ...) are ignored and reported as ``tools.TYPE`` in
:attr:`NormalizedRequest.ignored` (Codex CLI sends some with every request). Nothing is stored:
``previous_response_id`` and ``conversation`` are answered with a 400 asking for the
whole conversation in ``input``. Errors use OpenAI's error shape
(:func:`~agentfsm.protocols.openai.openai_error`). Streaming is in
:mod:`agentfsm.protocols.responses_stream`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentfsm.core._types import JSONObject
from agentfsm.core.choice import ToolChoice
from agentfsm.core.backend import Usage
from agentfsm.core.errors import RequestError, UnsupportedContent
from agentfsm.core.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolSpec,
    UserMessage,
)
from agentfsm.protocols._fields import (
    choice_keyword,
    chosen_tool,
    opt_bool,
    opt_int,
    opt_number,
    opt_str,
    parse_arguments,
    req_list,
    req_mapping,
    req_str,
    text_of_parts,
    tool_answer,
    tool_specs,
)
from agentfsm.protocols.common import NormalizedRequest, dump_arguments, tools_or_recovered
from agentfsm.protocols.sampling import responses_settings

__all__ = [
    "encode_responses_response",
    "function_call_item",
    "message_item",
    "normalize_responses",
    "responses_usage",
]

_INPUT_TEXT = {"input_text": "text", "text": "text"}
_OUTPUT_TEXT = {"output_text": "text", "refusal": "refusal", "input_text": "text", "text": "text"}
#: fields that need state this proxy does not keep
_STATEFUL = ("previous_response_id", "conversation")


def normalize_responses(body: Mapping[str, Any]) -> NormalizedRequest:
    """A Responses API request body as a :class:`NormalizedRequest` (protocol ``responses``).

    Raises :class:`RequestError` (``param`` set) for a malformed request or one that
    needs stored state, and :class:`UnsupportedContent` for non-text content.
    """
    body = req_mapping(body, "body")
    for key in _STATEFUL:
        if body.get(key) is not None:
            raise RequestError(
                f"{key} is not supported: this proxy stores no responses; "
                "send the whole conversation in 'input' (and store: false)",
                param=key,
            )
    if body.get("background"):
        raise RequestError("background responses are not supported", param="background")
    messages: list[Message] = []
    instructions = body.get("instructions")
    if instructions is not None:
        text = text_of_parts(instructions, "instructions", text_types=_INPUT_TEXT)
        if text:
            messages.append(SystemMessage(content=text))
    messages += _input(body.get("input"))
    if not messages:
        raise RequestError("'input' must hold at least one item", param="input")

    tools, recovered = tools_or_recovered(tool_specs(body.get("tools"), _tool), messages)
    tool_choice, tools = _tool_choice(body.get("tool_choice"), tools)
    return NormalizedRequest(
        messages=tuple(messages),
        tools=tools,
        tool_choice=tool_choice,
        parallel=opt_bool(body, "parallel_tool_calls", True),
        tool_mode=bool(tools),
        tools_recovered=recovered,
        stream=opt_bool(body, "stream", False),
        stream_include_usage=True,
        model=opt_str(body, "model"),
        max_tokens=opt_int(body, "max_output_tokens"),
        temperature=opt_number(body, "temperature"),
        protocol="responses",
        **responses_settings(body, _response_format(body.get("text"))),
    )


def _input(raw: Any) -> list[Message]:
    if raw is None:
        raise RequestError("'input' is required", param="input")
    if isinstance(raw, str):
        return [UserMessage(content=raw)]
    out: list[Message] = []
    calls: dict[str, ToolCall] = {}
    for i, item in enumerate(req_list(raw, "input")):
        where = f"input[{i}]"
        entry = req_mapping(item, where)
        kind = entry.get("type", "message")
        if kind == "message":
            out.append(_message(entry, where))
        elif kind == "function_call":
            call = ToolCall(
                id=req_str(entry.get("call_id"), f"{where}.call_id"),
                name=req_str(entry.get("name"), f"{where}.name"),
                arguments=parse_arguments(entry.get("arguments", ""), f"{where}.arguments"),
            )
            calls[call.id] = call
            last = out[-1] if out else None
            if isinstance(last, AssistantMessage):
                # one assistant turn: its text and every call that follows it
                out[-1] = last.model_copy(update={"tool_calls": (*last.tool_calls, call)})
            else:
                out.append(AssistantMessage(content=None, tool_calls=(call,)))
        elif kind == "function_call_output":
            out.append(_output(entry, where, calls))
        elif kind == "reasoning":
            continue
        elif kind == "item_reference":
            raise RequestError(
                f"{where}: item_reference needs stored items; this proxy stores none",
                param=f"{where}.type",
            )
        else:
            raise UnsupportedContent(str(kind), where)
    return out


def _message(entry: Mapping[str, Any], where: str) -> Message:
    role = entry.get("role")
    content = entry.get("content")
    if role in ("system", "developer"):
        return SystemMessage(content=_text(content, where, _INPUT_TEXT))
    if role == "user":
        return UserMessage(content=_text(content, where, _INPUT_TEXT))
    if role == "assistant":
        return AssistantMessage(content=_text(content, where, _OUTPUT_TEXT) or None)
    raise RequestError(
        f"{where}.role must be one of user, assistant, system, developer; got {role!r}",
        param=f"{where}.role",
    )


def _text(content: Any, where: str, types: Mapping[str, str]) -> str:
    return text_of_parts(content, f"{where}.content", text_types=types) or ""


def _output(entry: Mapping[str, Any], where: str, calls: Mapping[str, ToolCall]) -> ToolMessage:
    call_id = req_str(entry.get("call_id"), f"{where}.call_id")
    text = text_of_parts(entry.get("output"), f"{where}.output", text_types=_INPUT_TEXT) or ""
    return tool_answer(calls, call_id, text, where=where, key="call_id", answers="function_call item")


def _tool(tool: Mapping[str, Any], where: str) -> ToolSpec | None:
    if tool.get("type", "function") != "function":
        return None  # hosted tools (web_search, namespace ...): reported by responses_settings
    name = req_str(tool.get("name"), f"{where}.name")
    return ToolSpec.from_any(
        {"name": name, "description": tool.get("description"), "parameters": tool.get("parameters")}
    )


def _tool_choice(raw: Any, tools: tuple[ToolSpec, ...]) -> tuple[ToolChoice, tuple[ToolSpec, ...]]:
    if raw is None:
        return (ToolChoice.AUTO if tools else ToolChoice.NONE), tools
    if isinstance(raw, str):
        keyword = choice_keyword(raw, tools, needs="function tools")
        return (keyword if tools else ToolChoice.NONE), tools
    choice = req_mapping(raw, "tool_choice")
    kind = choice.get("type")
    if kind == "function":
        name = req_str(choice.get("name"), "tool_choice.name")
        return chosen_tool(name, tools, among="function tools"), tools
    if kind == "allowed_tools":
        mode = choice.get("mode", "auto")
        if mode not in ("auto", "required"):
            raise RequestError(
                f"tool_choice.mode must be 'auto' or 'required'; got {mode!r}", param="tool_choice"
            )
        wanted = [
            req_str(req_mapping(t, f"tool_choice.tools[{i}]").get("name"), f"tool_choice.tools[{i}].name")
            for i, t in enumerate(req_list(choice.get("tools"), "tool_choice.tools"))
        ]
        kept = tuple(t for t in tools if t.name in wanted)
        return (ToolChoice.parse(mode), kept) if kept else (ToolChoice.NONE, tools)
    raise RequestError(
        f"tool_choice type {kind!r} is not supported (only function tools)", param="tool_choice"
    )


def _response_format(raw: Any) -> JSONObject | None:
    """``text.format`` as a chat-completions ``response_format`` (None for plain text)."""
    if raw is None:
        return None
    fmt = req_mapping(raw, "text").get("format")
    if fmt is None:
        return None
    fmt = req_mapping(fmt, "text.format")
    kind = fmt.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "json_object"}
    if kind == "json_schema":
        schema: JSONObject = {
            "name": req_str(fmt.get("name", "output"), "text.format.name"),
            "schema": dict(req_mapping(fmt.get("schema"), "text.format.schema")),
        }
        if fmt.get("strict") is not None:
            schema["strict"] = bool(fmt["strict"])
        return {"type": "json_schema", "json_schema": schema}
    raise RequestError(f"text.format type {kind!r} is not supported", param="text.format.type")


def message_item(item_id: str, text: str, status: str = "completed") -> JSONObject:
    """An assistant ``message`` output item holding one ``output_text`` part."""
    content: list[JSONObject] = [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]
    return {"id": item_id, "type": "message", "role": "assistant", "status": status, "content": content}


def function_call_item(call: ToolCall, status: str = "completed", arguments: str | None = None) -> JSONObject:
    """A ``function_call`` output item; its item id is derived from the call id (``fc_...``)."""
    return {
        "id": "fc_" + call.id.removeprefix("call_"),
        "type": "function_call",
        "status": status,
        "call_id": call.id,
        "name": call.name,
        "arguments": dump_arguments(call) if arguments is None else arguments,
    }


def responses_usage(usage: Usage) -> JSONObject:
    """The Responses API ``usage`` object."""
    return {
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": usage.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.total_tokens,
    }


def encode_responses_response(
    *,
    model: str,
    content: str | None,
    tool_calls: Sequence[ToolCall],
    usage: Usage | None,
    created: int,
    response_id: str,
    finish_reason: str = "stop",
    status: str | None = None,
) -> JSONObject:
    """A ``response`` object: a ``message`` item for the prose, a ``function_call`` item per call.

    ``status`` defaults to ``completed`` (``incomplete`` when the reply was cut off by
    the token limit); the stream encoder passes ``in_progress`` with no usage for its
    opening events.
    """
    output: list[JSONObject] = []
    if status is None or status != "in_progress":
        if content:
            output.append(message_item("msg_" + response_id.removeprefix("resp_"), content))
        output += [function_call_item(call) for call in tool_calls]
    if status is None:
        status = "incomplete" if finish_reason == "length" and not tool_calls else "completed"
    return {
        "id": response_id,
        "object": "response",
        "created_at": created,
        "status": status,
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
        "instructions": None,
        "metadata": {},
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "temperature": None,
        "tool_choice": "auto",
        "tools": [],
        "top_p": None,
        "store": False,
        "text": {"format": {"type": "text"}},
        "usage": responses_usage(usage) if usage is not None else None,
    }
