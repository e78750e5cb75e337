"""OpenAI chat completions out: the whole ``chat.completion`` body, its ``finish_reason`` and ``usage``.

Requests are read and error bodies built in :mod:`agentfsm.protocols.openai`; the stream
encoder (:mod:`agentfsm.protocols.openai_stream`) takes its finish reasons and usage from here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from agentfsm.core._types import JSONObject
from agentfsm.core.backend import Usage
from agentfsm.core.messages import ToolCall
from agentfsm.protocols.common import dump_arguments

__all__ = [
    "OPENAI_FINISH_REASONS",
    "encode_openai_response",
    "openai_finish_reason",
    "openai_usage",
]

#: our finish reasons -> OpenAI's ``finish_reason``
OPENAI_FINISH_REASONS: Mapping[str, str] = {
    "stop": "stop",
    "stop_sequence": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "content_filter": "content_filter",
}


def openai_finish_reason(reason: str, has_calls: bool) -> str:
    """OpenAI's ``finish_reason`` for our reason; ``tool_calls`` whenever calls are present."""
    if has_calls:
        return "tool_calls"
    return OPENAI_FINISH_REASONS.get(reason, "stop")


def encode_openai_response(
    *,
    model: str,
    content: str | None,
    tool_calls: Sequence[ToolCall],
    usage: Usage,
    created: int,
    response_id: str,
    finish_reason: str = "stop",
) -> JSONObject:
    """A ``chat.completion`` body: prose in ``content``, calls in ``message.tool_calls``.

    ``tool_calls`` must already carry protocol-style ids (see ``remint_ids``).
    ``finish_reason`` is ``stop`` or ``length``; it becomes ``tool_calls`` when calls are present.
    """
    message: JSONObject = {"role": "assistant", "content": content or None, "refusal": None}
    if tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": dump_arguments(call)},
            }
            for call in tool_calls
        ]
    return {
        "id": response_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": openai_finish_reason(finish_reason, bool(tool_calls)),
                "logprobs": None,
            }
        ],
        "usage": openai_usage(usage),
    }


def openai_usage(usage: Usage) -> JSONObject:
    """OpenAI's ``usage`` object."""
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
    }
