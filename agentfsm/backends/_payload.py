"""OpenAI chat-completion request bodies (pure): messages and options to JSON."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeAlias

from agentfsm._types import JSONObject
from agentfsm.backends.base import GenerationOptions
from agentfsm.errors import BackendHTTPError, UsageError
from agentfsm.messages import PromptMessage

__all__ = ["JSONSchemaMode", "build_payload", "rejects_json_schema"]

#: how a JSON schema is sent: OpenAI's json_schema, llama.cpp's json_object+schema, or never;
#: ``auto`` tries json_schema and falls back to json_object+schema once if it is rejected
JSONSchemaMode: TypeAlias = Literal["auto", "json_schema", "json_object", "off"]


def build_payload(
    model: str,
    messages: Sequence[PromptMessage],
    options: GenerationOptions,
    *,
    stream: bool,
    schema_form: JSONSchemaMode,
    prefill: bool,
    extra_body: Mapping[str, Any],
) -> JSONObject:
    """The ``/chat/completions`` body. ``max_tokens`` is always sent: every generation is bounded."""
    wire: list[JSONObject] = [{"role": m.role, "content": m.content} for m in messages]
    if options.prefill:
        if not prefill:
            raise UsageError("this upstream was not declared to support prefill (prefill=True)")
        wire.append({"role": "assistant", "content": options.prefill})
    payload: JSONObject = {
        "model": model,
        "messages": wire,
        "max_tokens": options.max_tokens,
        "temperature": options.temperature,
        "stream": stream,
    }
    if options.seed is not None:
        payload["seed"] = options.seed
    if options.stop:
        payload["stop"] = list(options.stop)
    if options.json_schema is not None:
        if schema_form == "off":
            raise UsageError("json_schema_mode='off': this backend does not constrain output")
        if schema_form == "json_object":
            payload["response_format"] = {"type": "json_object", "schema": options.json_schema}
        else:
            payload["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "response", "schema": options.json_schema, "strict": True},
            }
    payload.update(extra_body)
    return payload


def rejects_json_schema(error: BackendHTTPError, payload: JSONObject) -> bool:
    """Whether ``error`` answers a json_schema ``response_format`` by refusing it."""
    sent = payload.get("response_format") or {}
    body = error.body.lower()
    return (
        sent.get("type") == "json_schema"
        and error.status_code >= 400
        and error.status_code not in (408, 429)
        and any(word in body for word in ("json_schema", "response_format", "schema"))
    )
