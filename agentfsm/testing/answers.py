"""Whether a proxy's 200 answer carries an assistant message: the check behind "never an
empty reply", for tests (ours: every proxy the test suite starts; the chaos run) and yours.

:func:`empty_answer` reads one answer as the client got it (a whole JSON body, or the
whole SSE text of a stream) from any of the three endpoints, and says what is missing:
an answer with neither text nor a call. A stream that ends with the protocol's error
event is a give-up the client can tell, not an empty answer; nor is an answer whose
finish reason says the token limit cut it (chat ``length``, Anthropic ``max_tokens``,
Responses ``incomplete``): the client's ``max_tokens`` left no room, as the provider says.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["ANSWER_PATHS", "empty_answer"]

#: the endpoints that answer with an assistant message
ANSWER_PATHS = ("/v1/chat/completions", "/v1/messages", "/v1/responses")


def _events(text: str) -> list[dict[str, Any]]:
    out = []
    for line in text.splitlines():
        if line.startswith("data: {"):
            try:
                value = json.loads(line[6:])
            except ValueError:
                continue
            if isinstance(value, dict):
                out.append(value)
    return out


def empty_answer(path: str, body: bytes | str) -> str | None:
    """Why the 200 answer ``body`` at ``path`` holds no assistant message (no text, no
    call), or None when it holds one, ended in an error event, or is no answer at all
    (another endpoint)."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    kind = next((p for p in ANSWER_PATHS if path.startswith(p)), None)
    if kind is None or path.startswith("/v1/messages/count_tokens"):
        return None
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except ValueError:
            return None
        return _whole(kind, data) if isinstance(data, dict) else None
    return _streamed(kind, _events(text))


def _whole(kind: str, data: dict[str, Any]) -> str | None:
    if _cut(data) or data.get("status") == "incomplete":
        return None
    if kind == "/v1/chat/completions":
        message = (data.get("choices") or [{}])[0].get("message") or {}
        if not (message.get("content") or "").strip() and not message.get("tool_calls"):
            return "chat completion with no content and no tool_calls"
    elif kind == "/v1/messages":
        blocks = data.get("content") or []
        if not any(b.get("type") != "text" or (b.get("text") or "").strip() for b in blocks):
            return "message with no text and no tool_use"
    else:
        output = data.get("output") or []
        said = any(
            item.get("type") != "message"
            or any((part.get("text") or "").strip() for part in item.get("content") or [])
            for item in output
        )
        if not said:
            return "response with no output text and no call"
    return None


def _cut(data: dict[str, Any]) -> bool:
    """Whether a whole answer, or a stream's event, says the token limit cut the reply."""
    choices = data.get("choices") or []
    raw = data.get("delta")
    delta: dict[str, Any] = raw if isinstance(raw, dict) else {}
    return (data.get("stop_reason") == "max_tokens" or delta.get("stop_reason") == "max_tokens"
            or any(isinstance(c, dict) and c.get("finish_reason") == "length" for c in choices))


def _streamed(kind: str, events: list[dict[str, Any]]) -> str | None:
    if not events or any("error" in e or e.get("type") in ("error", "response.failed") for e in events):
        return None  # no stream, or one that ended in the protocol's error event
    if any(_cut(e) for e in events):
        return None  # cut at the token limit, and said so
    if kind == "/v1/chat/completions":
        said = any(
            str((choice.get("delta") or {}).get("content") or "").strip() or (choice.get("delta") or {}).get("tool_calls")
            for e in events for choice in e.get("choices") or []
        )
        return None if said else "chat stream with no content and no tool_calls"
    if kind == "/v1/messages":
        said = any(
            (e.get("type") == "content_block_delta" and (e.get("delta") or {}).get("type") == "text_delta"
             and str((e.get("delta") or {}).get("text") or "").strip())
            or (e.get("type") == "content_block_start" and (e.get("content_block") or {}).get("type") == "tool_use")
            for e in events
        )
        return None if said else "message stream with no text and no tool_use"
    ended = next((e for e in reversed(events) if e.get("type") in ("response.completed", "response.incomplete")), None)
    if ended is None:
        return None
    return _whole(kind, ended.get("response") or {})
