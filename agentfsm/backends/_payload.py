"""OpenAI chat-completion request bodies (pure): messages and options to JSON."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeAlias

from agentfsm.core._types import JSONObject
from agentfsm.core.backend import GenerationOptions
from agentfsm.core.errors import BackendHTTPError, PromptTooLong, UsageError
from agentfsm.core.messages import PromptMessage

__all__ = [
    "JSONSchemaMode",
    "build_payload",
    "context_error",
    "rejects_json_schema",
    "response_format_schema",
]

# GenerationOptions fields sent under the same name when set
_SAMPLING_KEYS = ("top_p", "top_k", "presence_penalty", "frequency_penalty", "user")

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
    for key in _SAMPLING_KEYS:
        value = getattr(options, key)
        if value is not None:
            payload[key] = value
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
    elif options.response_format is not None:
        payload["response_format"] = _client_format(options.response_format, schema_form)
    payload.update(extra_body)
    return payload


def response_format_schema(response_format: Mapping[str, Any]) -> JSONObject | None:
    """The JSON schema a client's ``response_format`` asks for (``{"type": "object"}`` for
    ``json_object``); None for ``text``."""
    kind = response_format.get("type")
    if kind == "json_schema":
        spec = response_format.get("json_schema") or {}
        schema = spec.get("schema") if isinstance(spec, Mapping) else None
        return dict(schema) if isinstance(schema, Mapping) else {"type": "object"}
    if kind == "json_object":
        schema = response_format.get("schema")
        return dict(schema) if isinstance(schema, Mapping) else {"type": "object"}
    return None


def _client_format(response_format: JSONObject, schema_form: JSONSchemaMode) -> JSONObject:
    """The client's format as sent: unchanged, except a ``json_schema`` one for an upstream
    that takes schemas only as llama.cpp's ``json_object`` + ``schema``."""
    if schema_form == "json_object" and response_format.get("type") == "json_schema":
        return {"type": "json_object", "schema": response_format_schema(response_format)}
    return response_format


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


# how upstreams say that a prompt does not fit: OpenAI and vLLM, llama.cpp's server
# (old and new), llama-cpp-python's server, and the code OpenAI sends
_TOO_LONG_WORDS = (
    "context_length_exceeded",
    "maximum context length",
    "exceed context window",
    "exceed_context_size",
    "exceeds the available context size",
)
_TOO_LONG_NUMBERS = (
    (r"maximum context length is (\d+) tokens.*?(?:resulted in|requested) (\d+) tokens", 2, 1),
    (r"Requested tokens \((\d+)\) exceed context window of (\d+)", 1, 2),
    (r'"n_prompt_tokens":\s*(\d+).*?"n_ctx":\s*(\d+)', 1, 2),
)


def context_error(status_code: int, body: str) -> PromptTooLong | None:
    """The upstream's own "prompt too long" error as :class:`PromptTooLong` (the client's
    400, not a 502); None for any other error. The numbers are read where it gives them."""
    if status_code not in (400, 413, 422) or not any(w in body for w in _TOO_LONG_WORDS):
        return None
    for pattern, tokens, maximum in _TOO_LONG_NUMBERS:
        found = re.search(pattern, body, re.S)
        if found:
            return PromptTooLong(int(found[tokens]), int(found[maximum]))
    return PromptTooLong(None, None, f"prompt is too long for the upstream model: {body[:300]}")
