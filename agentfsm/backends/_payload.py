"""OpenAI chat-completion request bodies (pure): messages and options to JSON."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeAlias

from agentfsm.core._types import JSONObject
from agentfsm.core.backend import GenerationOptions
from agentfsm.core.errors import BackendHTTPError, MaxTokensTooLarge, PromptTooLong, UsageError
from agentfsm.core.messages import PromptMessage
from agentfsm.protocols.sampling import format_schema as response_format_schema

__all__ = [
    "JSONSchemaMode",
    "build_payload",
    "context_error",
    "rejects_json_schema",
    "rejects_stream_options",
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
    stream_usage: bool = True,
) -> JSONObject:
    """The ``/chat/completions`` body. ``max_tokens`` is sent when the options set one (else
    the upstream's own bound applies: its default, or what its context leaves). A streamed
    request asks for the usage chunk (``stream_options.include_usage``), so that the
    usage reported is the upstream's count, not an estimate."""
    wire: list[JSONObject] = [{"role": m.role, "content": m.content} for m in messages]
    if options.prefill:
        if not prefill:
            raise UsageError("this upstream was not declared to support prefill (prefill=True)")
        wire.append({"role": "assistant", "content": options.prefill})
    payload: JSONObject = {"model": model, "messages": wire}
    if options.max_tokens is not None:
        payload["max_tokens"] = options.max_tokens
    payload["temperature"] = options.temperature
    payload["stream"] = stream
    if stream and stream_usage:
        payload["stream_options"] = {"include_usage": True}
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


# how upstreams say that a request does not fit: OpenAI and vLLM, llama.cpp's server
# (old and new), llama-cpp-python's server, and the code OpenAI sends
_TOO_LONG_WORDS = (
    "context_length_exceeded",
    "maximum context length",
    "exceed context window",
    "exceed_context_size",
    "exceeds the available context size",
)
#: where they give the numbers: (pattern, then the group of the prompt's tokens, of the
#: completion asked for (0: not given), of the context); a count has at most 12 digits (a
#: longer one, from a hostile or broken upstream, is not read as one)
_TOO_LONG_NUMBERS = (
    # OpenAI, older vLLM: "... is 32768 tokens. However, you requested 134758 tokens
    # (6758 in the messages, 128000 in the completion)"
    (r"maximum context length is (\d{1,12})(?!\d) tokens.*?\((\d{1,12})(?!\d) in the messages, (\d{1,12})(?!\d) in the completion\)", 2, 3, 1),
    # vLLM: "'max_tokens' ... is too large: 128000. This model's maximum context length is
    # 32768 tokens and your request has 6758 input tokens"
    (r"too large: (\d{1,12})(?!\d)\. This model's maximum context length is (\d{1,12})(?!\d) tokens and your request has (\d{1,12})(?!\d) input", 3, 1, 2),
    (r"maximum context length is (\d{1,12})(?!\d) tokens.*?(?:resulted in|requested|has) (\d{1,12})(?!\d) (?:input )?tokens", 2, 0, 1),
    (r"Requested tokens \((\d{1,12})(?!\d)\) exceed context window of (\d{1,12})(?!\d)", 1, 0, 2),
    (r'"n_prompt_tokens":\s*(\d{1,12})(?!\d).*?"n_ctx":\s*(\d{1,12})(?!\d)', 1, 0, 2),
)


#: how much of an error body the numbers are looked for in
_TOO_LONG_SCAN = 4096


def context_error(status_code: int, body: str) -> PromptTooLong | None:
    """The upstream's own "does not fit" error, with its real cause: :class:`PromptTooLong`
    when the prompt alone does not fit (or the upstream does not say),
    :class:`MaxTokensTooLarge` when the prompt fits and the completion asked for does
    not (the client's 400, not a 502); None for any other error."""
    if status_code not in (400, 413, 422) or not any(w in body for w in _TOO_LONG_WORDS):
        return None
    head = body[:_TOO_LONG_SCAN]  # the message is near the start; a long body is not searched
    for pattern, prompt, completion, maximum in _TOO_LONG_NUMBERS:
        found = re.search(pattern, head, re.S)
        if found:
            tokens, context = int(found[prompt]), int(found[maximum])
            if completion and tokens < context:
                return MaxTokensTooLarge(tokens, int(found[completion]), context)
            return PromptTooLong(tokens, context)
    return PromptTooLong(None, None, f"prompt is too long for the upstream model: {body[:300]}")


def rejects_stream_options(error: BackendHTTPError, payload: JSONObject) -> bool:
    """Whether ``error`` refuses the ``stream_options`` the payload asked usage with."""
    return (
        "stream_options" in payload
        and error.status_code in (400, 422)
        and "stream_options" in error.body
    )
