"""OpenAI Responses API output: the items a response holds and the whole ``response`` object.

An assistant ``message`` item for prose; a ``function_call`` item per call, or a
``custom_tool_call`` item for a call of a custom (freeform) tool, whose one argument,
:data:`CUSTOM_INPUT`, is its raw text. A call of a tool offered inside a ``namespace``
tool carries that ``namespace`` (:func:`tool_namespaces`, read from the request's tools
as the response repeats them). Item ids derive from the call id (``fc_...``,
``ctc_...``). The whole (non-streamed) response is :func:`encode_responses_response`; the
stream encoder (:mod:`agentfsm.protocols.responses_stream`) builds its events from the
same items. Requests are read in :mod:`agentfsm.protocols.responses`.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from agentfsm.core._types import JSONObject
from agentfsm.core.backend import Usage
from agentfsm.core.messages import ToolCall
from agentfsm.protocols.common import dump_arguments

__all__ = [
    "CLIENT_TOOL_TYPES",
    "CUSTOM_INPUT",
    "ECHOED",
    "call_item",
    "custom_input",
    "custom_tool_call_item",
    "encode_responses_response",
    "function_call_item",
    "message_item",
    "responses_usage",
    "tool_namespaces",
]

#: the one string parameter a custom (freeform) tool is offered with: its raw text input
CUSTOM_INPUT = "input"

#: the request's settings a response object repeats, and what it says when the request
#: sets none (``store``: this proxy stores nothing; a client's own value is repeated)
ECHOED: Mapping[str, Any] = {
    "instructions": None,
    "metadata": {},
    "parallel_tool_calls": True,
    "temperature": None,
    "tool_choice": "auto",
    "tools": [],
    "top_p": None,
    "max_output_tokens": None,
    "store": False,
    "text": {"format": {"type": "text"}},
    "user": None,
}


#: the tool types a ``namespace`` tool may group, and the types offered to the model
CLIENT_TOOL_TYPES = ("function", "custom")


def tool_namespaces(tools: Any) -> dict[str, str]:
    """The tools offered inside ``namespace`` tools, each name with its namespace's name
    (``tools``: the request's ``tools`` as sent; what is malformed is left out).

    The model sees one flat list of tools, so a name offered at the top level, or in an
    earlier namespace, keeps that first meaning and is not listed here.
    """
    if not isinstance(tools, list):
        return {}
    entries = [t for t in tools if isinstance(t, Mapping)]
    taken = {
        t["name"] for t in entries if t.get("type", "function") in CLIENT_TOOL_TYPES and isinstance(t.get("name"), str)
    }
    found: dict[str, str] = {}
    for entry in entries:
        space, members = entry.get("name"), entry.get("tools")
        if entry.get("type") != "namespace" or not isinstance(space, str) or not isinstance(members, list):
            continue
        for member in members:
            if not isinstance(member, Mapping) or member.get("type", "function") not in CLIENT_TOOL_TYPES:
                continue
            name = member.get("name")
            if isinstance(name, str) and name not in taken and name not in found:
                found[name] = space
    return found


def message_item(item_id: str, text: str, status: str = "completed") -> JSONObject:
    """An assistant ``message`` output item holding one ``output_text`` part."""
    content: list[JSONObject] = [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]
    return {"id": item_id, "type": "message", "role": "assistant", "status": status, "content": content}


def _item(
    call: ToolCall, kind: str, prefix: str, status: str, key: str, value: str, namespace: str | None
) -> JSONObject:
    """A call's output item; its item id is derived from the call id (``PREFIX_...``)."""
    item: JSONObject = {
        "id": prefix + call.id.removeprefix("call_"),
        "type": kind,
        "status": status,
        "call_id": call.id,
        "name": call.name,
        key: value,
    }
    if namespace is not None:
        item["namespace"] = namespace
    return item


def function_call_item(
    call: ToolCall, status: str = "completed", arguments: str | None = None, namespace: str | None = None
) -> JSONObject:
    """A ``function_call`` output item (``fc_...``), naming its tool's ``namespace`` if it has one."""
    text = dump_arguments(call) if arguments is None else arguments
    return _item(call, "function_call", "fc_", status, "arguments", text, namespace)


def custom_input(call: ToolCall) -> str:
    """The raw text input of a call to a custom tool (its one argument; other JSON as is)."""
    value = call.arguments.get(CUSTOM_INPUT)
    if isinstance(value, str) and set(call.arguments) == {CUSTOM_INPUT}:
        return value
    return dump_arguments(call)


def custom_tool_call_item(
    call: ToolCall, status: str = "completed", text: str | None = None, namespace: str | None = None
) -> JSONObject:
    """A ``custom_tool_call`` output item (``ctc_...``): the call of a freeform tool, its raw text input."""
    raw = custom_input(call) if text is None else text
    return _item(call, "custom_tool_call", "ctc_", status, "input", raw, namespace)


def call_item(
    call: ToolCall, custom: Collection[str], status: str = "completed", namespaces: Mapping[str, str] | None = None
) -> JSONObject:
    """The output item of ``call``: ``custom_tool_call`` for a tool named in ``custom``, else
    ``function_call``; with the ``namespace`` that ``namespaces`` gives its tool."""
    namespace = (namespaces or {}).get(call.name)
    if call.name in custom:
        return custom_tool_call_item(call, status, namespace=namespace)
    return function_call_item(call, status, namespace=namespace)


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
    custom_tools: Collection[str] = (),
    echo: Mapping[str, Any] | None = None,
) -> JSONObject:
    """A ``response`` object: a ``message`` item for the prose, a ``function_call`` item per
    call (``custom_tool_call`` for a tool named in ``custom_tools``; a tool of a ``namespace``
    tool in ``echo``'s ``tools`` gives its call that ``namespace``).

    ``status`` defaults to ``completed`` (``incomplete``, its message item too, when the
    reply was cut off by the token limit); the stream encoder passes ``in_progress`` with
    no usage for its opening events. ``echo``: the request's settings as it sent them
    (:data:`ECHOED` names them and what is said of one not sent), repeated as OpenAI does.
    """
    if status is None:
        status = "incomplete" if finish_reason == "length" and not tool_calls else "completed"
    given = echo or {}
    output: list[JSONObject] = []
    if status != "in_progress":
        if content:
            item_status = "incomplete" if status == "incomplete" else "completed"
            output.append(message_item("msg_" + response_id.removeprefix("resp_"), content, item_status))
        namespaces = tool_namespaces(given.get("tools"))
        output += [call_item(call, custom_tools, namespaces=namespaces) for call in tool_calls]
    # a fresh copy of each default: a caller that edits one response never edits the next
    sent = {key: given[key] if key in given else copy.deepcopy(default) for key, default in ECHOED.items()}
    return {
        "id": response_id,
        "object": "response",
        "created_at": created,
        "status": status,
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
        "instructions": sent["instructions"],
        "max_output_tokens": sent["max_output_tokens"],
        "metadata": sent["metadata"],
        "model": model,
        "output": output,
        "parallel_tool_calls": sent["parallel_tool_calls"],
        "temperature": sent["temperature"],
        "tool_choice": sent["tool_choice"],
        "tools": sent["tools"],
        "top_p": sent["top_p"],
        "store": sent["store"],
        "text": sent["text"],
        "user": sent["user"],
        "usage": responses_usage(usage) if usage is not None else None,
    }
