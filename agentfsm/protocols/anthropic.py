"""Anthropic messages: request normalization, response encoding, error bodies.

Streaming is in :mod:`agentfsm.protocols.anthropic_stream`.

``role: "system"`` messages, wherever they stand in ``messages``, are folded in order
into the one system prompt after the top-level ``system``. ``cache_control`` on any
block is a caching hint and is passed over.

Content blocks, exhaustively: ``text`` is read; ``tool_use`` (assistant) and
``tool_result`` (user; string or text-block content, ``is_error``) become calls and
results; a ``document`` of plain text or text content and a ``search_result`` are
read as the text they hold, in a user's turn or a tool result
(:mod:`agentfsm.protocols.anthropic_text`); an ``image`` or another ``document`` block
inside a ``tool_result`` (Claude Code's Read of a picture or a PDF) becomes a text placeholder naming it, reported as
``tool_result.image`` / ``tool_result.document`` in :attr:`NormalizedRequest.ignored`
(the model reads text only; the conversation goes on); ``thinking`` and
``redacted_thinking`` blocks in an assistant turn are dropped, as Anthropic itself drops
an earlier turn's thinking from what the model sees (another model's private reasoning,
never the assistant's answer); so are the blocks of Anthropic's own
server tools in an assistant turn (``server_tool_use``, ``web_search_tool_result``, any
``*_tool_result``, ``mcp_tool_use``: a search that Anthropic ran for an earlier turn,
whose results are encrypted); each kind dropped is reported as ``messages.TYPE`` in
:attr:`NormalizedRequest.ignored` (the assistant's own text beside them stays); every
other block (``image`` or a PDF ``document`` in a user's own turn ...) is an
:class:`UnsupportedContent` naming its type and position.

Tools: custom tools (``input_schema``) are offered; Anthropic's own tool types
(``web_search_20250305``, ``bash_20250124``, ``text_editor_*`` ...) are left out and
reported as ``tools.TYPE``, as ``/v1/responses`` does with hosted tools.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentfsm.core._types import JSONObject
from agentfsm.core.choice import ToolChoice
from agentfsm.core.backend import Usage
from agentfsm.core.errors import AgentFSMError, RequestError, UnsupportedContent
from agentfsm.core.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolSpec,
    UserMessage,
)
from agentfsm.protocols._calls import CallLedger
from agentfsm.protocols._fields import (
    chosen_tool,
    join_texts,
    opt_bool,
    opt_int,
    opt_str,
    req_list,
    req_mapping,
    req_str,
    stop_sequences,
    text_of_parts,
    tool_specs,
)
from agentfsm.protocols.anthropic_text import unwrap_text_blocks
from agentfsm.protocols.common import NormalizedRequest, client_message, error_status, tools_or_recovered
from agentfsm.protocols.sampling import anthropic_builtin, anthropic_settings

__all__ = [
    "ANTHROPIC_STOP_REASONS",
    "anthropic_error",
    "anthropic_error_for",
    "anthropic_stop_reason",
    "anthropic_usage",
    "encode_anthropic_response",
    "normalize_anthropic",
]

_TEXT = {"text": "text"}
_DROPPED = frozenset({"thinking", "redacted_thinking"})
#: media inside a tool result, read as a placeholder naming it
_RESULT_MEDIA = {"image": "image", "document": "document"}

#: our finish reasons -> Anthropic's ``stop_reason``
ANTHROPIC_STOP_REASONS: Mapping[str, str] = {
    "stop": "end_turn",
    "length": "max_tokens",
    "stop_sequence": "stop_sequence",
    "tool_calls": "tool_use",
}


def normalize_anthropic(body: Mapping[str, Any]) -> NormalizedRequest:
    """A messages-API request body as a :class:`NormalizedRequest`.

    Raises :class:`RequestError` (``param`` set) for a malformed request and
    :class:`UnsupportedContent` for blocks we do not handle.
    """
    body = req_mapping(body, "body")
    media: list[str] = []
    dropped: list[str] = []
    messages = _messages(body.get("messages"), _system(body.get("system")), media, dropped)
    tools, recovered = tools_or_recovered(tool_specs(body.get("tools"), _tool), messages)
    tool_choice, parallel = _tool_choice(body.get("tool_choice"), tools)
    settings = anthropic_settings(body)
    settings["ignored"] = (
        *settings["ignored"],
        *(f"tool_result.{kind}" for kind in dict.fromkeys(media)),
        *(f"messages.{kind}" for kind in dict.fromkeys(dropped)),
    )
    return NormalizedRequest(
        messages=messages,
        tools=tools,
        tool_choice=tool_choice,
        parallel=parallel,
        tool_mode=bool(tools),
        tools_recovered=recovered,
        stream=opt_bool(body, "stream", False),
        model=opt_str(body, "model"),
        max_tokens=opt_int(body, "max_tokens"),
        stop=stop_sequences(body, "stop_sequences"),
        protocol="anthropic",
        **settings,
    )


def _system(raw: Any) -> list[str]:
    if raw is None:
        return []
    text = text_of_parts(raw, "system", text_types=_TEXT)
    return [text] if text else []


def _messages(raw: Any, system: list[str], media: list[str], dropped: list[str]) -> tuple[Message, ...]:
    """The conversation, led by one system message: the top-level ``system`` and every
    ``role: "system"`` message (Claude Code sends them mid-conversation), in order.
    The kinds of media found in tool results are appended to ``media``, those of the
    blocks dropped from assistant turns (thinking, server tools) to ``dropped``."""
    if raw is None:
        raise RequestError("'messages' is required", param="messages")
    out: list[Message] = []
    ledger = CallLedger()
    for i, item in enumerate(req_list(raw, "messages", non_empty=True)):
        where = f"messages[{i}]"
        msg = req_mapping(item, where)
        role = msg.get("role")
        if role == "user":
            out.extend(_user(msg.get("content"), f"{where}.content", ledger, media))
        elif role == "assistant":
            out.append(_assistant(msg.get("content"), f"{where}.content", ledger, dropped))
        elif role == "system":
            text = text_of_parts(msg.get("content"), f"{where}.content", text_types=_TEXT)
            if text:
                system.append(text)
        else:
            raise RequestError(
                f"{where}.role must be 'user', 'assistant' or 'system'; got {role!r}",
                param=f"{where}.role",
            )
    if not out:
        raise RequestError("'messages' must hold a user or assistant message", param="messages")
    lead: list[Message] = [SystemMessage(content="\n\n".join(system))] if system else []
    return tuple(lead + out)


def _blocks(content: Any, where: str) -> Sequence[tuple[str, str, Mapping[str, Any]]]:
    """(type, where, block) for each block of a block array."""
    out = []
    for j, raw in enumerate(req_list(content, where)):
        block_where = f"{where}[{j}]"
        block = req_mapping(raw, block_where)
        kind = block.get("type")
        if not isinstance(kind, str):
            raise RequestError(f"{block_where}.type must be a string", param=f"{block_where}.type")
        out.append((kind, block_where, block))
    return out


def _user(content: Any, where: str, ledger: CallLedger, media: list[str]) -> list[Message]:
    if isinstance(content, str):
        return [UserMessage(content=content)]
    if content is None:
        raise RequestError(f"{where} is required", param=where)
    results: list[Message] = []
    texts: list[str] = []
    for kind, block_where, block in _blocks(unwrap_text_blocks(content, where), where):
        if kind == "text":
            texts.append(req_str(block.get("text"), f"{block_where}.text"))
        elif kind == "tool_result":
            results.append(_tool_result(block, block_where, ledger, media))
        elif kind == "tool_use":
            raise RequestError(
                f"{block_where}: tool_use blocks belong in assistant messages", param=block_where
            )
        else:
            raise UnsupportedContent(kind, block_where)
    # Results answer the previous assistant turn, so they come before any text of the
    # same message (the API itself requires tool_result blocks first).
    if texts or not results:
        results.append(UserMessage(content=join_texts(texts)))
    return results


def _tool_result(
    block: Mapping[str, Any], where: str, ledger: CallLedger, media: list[str]
) -> ToolMessage:
    call_id = block.get("tool_use_id")
    if not isinstance(call_id, str) or not call_id:
        raise RequestError(
            f"{where}: a tool_result needs a tool_use_id", param=f"{where}.tool_use_id"
        )
    raw = block.get("content")
    text = "" if raw is None else text_of_parts(
        unwrap_text_blocks(raw, f"{where}.content"), f"{where}.content", text_types=_TEXT, media_types=_RESULT_MEDIA, media_seen=media
    ) or ""
    is_error = opt_bool(block, "is_error", False, where=f"{where}.is_error")
    return ledger.answer(call_id, text, where=where, key="tool_use_id", answers="tool_use block", error=is_error)


def _server_tool_block(kind: str) -> bool:
    """A block of one of Anthropic's own server tools (run by Anthropic, not by a client)."""
    return kind in ("server_tool_use", "mcp_tool_use") or kind.endswith("_tool_result")


def _assistant(content: Any, where: str, ledger: CallLedger, dropped: list[str]) -> AssistantMessage:
    """One assistant turn; its calls join ``ledger``, the kinds of blocks dropped ``dropped``."""
    ledger.begin_turn()
    if isinstance(content, str):
        return AssistantMessage(content=content or None)
    if content is None:
        raise RequestError(f"{where} is required", param=where)
    texts: list[str] = []
    calls: list[ToolCall] = []
    for kind, block_where, block in _blocks(content, where):
        if kind == "text":
            texts.append(req_str(block.get("text"), f"{block_where}.text"))
        elif kind == "tool_use":
            tool_input = block.get("input", {})
            call = ToolCall(
                id=req_str(block.get("id"), f"{block_where}.id"),
                name=req_str(block.get("name"), f"{block_where}.name"),
                arguments=dict(req_mapping(tool_input, f"{block_where}.input")),
            )
            if ledger.add(call, f"{block_where}.id"):
                calls.append(call)
            else:
                dropped.append("repeated_tool_use")  # the same call written twice over
        elif kind in _DROPPED or _server_tool_block(kind):
            dropped.append(kind)
        else:
            raise UnsupportedContent(kind, block_where)
    text = join_texts(texts)
    return AssistantMessage(content=text or None, tool_calls=tuple(calls))


def _tool(tool: Mapping[str, Any], where: str) -> ToolSpec | None:
    """A custom tool; None for one of Anthropic's own tools (``web_search_20250305``,
    ``bash_20250124``, ``text_editor_*`` ...), which only Anthropic can run: left out and
    reported as ``tools.TYPE`` (:func:`~agentfsm.protocols.sampling.anthropic_settings`),
    as the Responses API's hosted tools are."""
    if not isinstance(tool.get("type", "custom"), str):
        raise RequestError(f"{where}.type must be a string", param=f"{where}.type")
    if anthropic_builtin(tool) is not None:
        return None
    return ToolSpec.from_anthropic(tool)


def _tool_choice(raw: Any, tools: tuple[ToolSpec, ...]) -> tuple[ToolChoice, bool]:
    """The normalized choice and whether parallel calls are allowed."""
    if raw is None:
        return (ToolChoice.AUTO if tools else ToolChoice.NONE), True
    choice = req_mapping(raw, "tool_choice")
    parallel = not opt_bool(
        choice, "disable_parallel_tool_use", False, where="tool_choice.disable_parallel_tool_use"
    )
    kind = choice.get("type")
    if kind in ("auto", "none"):
        return ToolChoice.parse(str(kind)), parallel
    if kind in ("any", "tool") and not tools:
        raise RequestError(f"tool_choice {kind!r} needs tools", param="tool_choice")
    if kind == "any":
        return ToolChoice.REQUIRED, parallel
    if kind == "tool":
        name = req_str(choice.get("name"), "tool_choice.name")
        return chosen_tool(name, tools, param="tool_choice.name"), parallel
    raise RequestError(
        f"tool_choice.type must be 'auto', 'any', 'tool' or 'none'; got {kind!r}",
        param="tool_choice.type",
    )


def anthropic_stop_reason(reason: str, has_calls: bool) -> str:
    """Anthropic's ``stop_reason`` for our reason; ``tool_use`` whenever calls are present."""
    if has_calls:
        return "tool_use"
    return ANTHROPIC_STOP_REASONS.get(reason, "end_turn")


def anthropic_usage(usage: Usage) -> JSONObject:
    """Anthropic's ``usage`` object."""
    return {"input_tokens": usage.prompt_tokens, "output_tokens": usage.completion_tokens}


def encode_anthropic_response(
    *,
    model: str,
    content: str | None,
    tool_calls: Sequence[ToolCall],
    usage: Usage,
    message_id: str,
    finish_reason: str = "stop",
    stop_sequence: str | None = None,
) -> JSONObject:
    """A ``message`` body: a text block (when there is prose), then one ``tool_use`` per call.

    ``tool_calls`` must already carry ``toolu_`` ids (see ``remint_ids``). ``finish_reason``
    is ours (``stop``, ``length``, ``stop_sequence``); it becomes ``tool_use`` with calls.
    """
    blocks: list[JSONObject] = []
    if content:
        blocks.append({"type": "text", "text": content})
    blocks.extend(
        {"type": "tool_use", "id": call.id, "name": call.name, "input": dict(call.arguments)}
        for call in tool_calls
    )
    stop_reason = anthropic_stop_reason(finish_reason, bool(tool_calls))
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": stop_reason,
        "stop_sequence": stop_sequence if stop_reason == "stop_sequence" else None,
        "usage": anthropic_usage(usage),
    }


_DEFAULT_TYPES: Mapping[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    422: "invalid_request_error",
    429: "rate_limit_error",
    500: "api_error",
    502: "api_error",
    503: "overloaded_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def anthropic_error(status: int, message: str, type: str | None = None) -> JSONObject:
    """An error body in Anthropic's shape: ``{"type": "error", "error": {"type", "message"}}``.

    ``type`` defaults from the status (``invalid_request_error`` for 400,
    ``request_too_large`` for 413, ``timeout_error`` for 504 ...).
    """
    kind = type or _DEFAULT_TYPES.get(
        status, "api_error" if status >= 500 else "invalid_request_error"
    )
    return {"type": "error", "error": {"type": kind, "message": message}}


def anthropic_error_for(exc: AgentFSMError, entry: str | None = None) -> tuple[int, JSONObject]:
    """The HTTP status and Anthropic error body for one of our errors (``entry``: the served
    model it concerns, named in an upstream failure's message)."""
    status = error_status(exc)
    return status, anthropic_error(status, client_message(exc, entry))
