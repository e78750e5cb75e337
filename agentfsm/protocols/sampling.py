"""A client's sampling and reply settings: read from either protocol, settled against the
backend, and turned into :class:`~agentfsm.core.backend.GenerationOptions`.

Passed on unchanged, once checked against the provider's documented range (each
protocol in its own terms, :data:`RANGES`; outside it a 400 naming the field, as the
provider answers, rather than an upstream's 400 the proxy could only pass on as its own
502): ``temperature``, ``top_p``, ``top_k``, ``seed``, ``stop`` /
``stop_sequences``, ``max_tokens`` / ``max_completion_tokens``, the presence and
frequency penalties, ``response_format`` (Anthropic: ``output_config.format``,
Responses: ``text.format``) for a request without tools (with tools it is the schema of
the final answer: :func:`answer_schema`), and ``user`` (Anthropic: ``metadata.user_id``). What cannot be
honoured is never dropped silently: its name, as the client spelled it, goes into
:attr:`NormalizedRequest.ignored`, which the proxy returns in the
``x-agentfsm-ignored`` header and writes to the transcript. That covers fields this
proxy does not act on (``logit_bias``, ``thinking``, ``context_management`` ...),
and settings the backend does not take (:attr:`Capabilities.sampling`). The header's
value is made safe to send (:func:`ignored_header`): each name percent-encoded outside
printable ASCII, the whole cut at :data:`IGNORED_HEADER_CHARS` characters.

Pure code: no IO.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote

from agentfsm.core._types import JSONObject
from agentfsm.core.backend import SAMPLING_OPTIONS, Capabilities, GenerationOptions
from agentfsm.core.errors import RequestError
from agentfsm.protocols._fields import opt_int, opt_number, opt_str, req_mapping, req_str
from agentfsm.protocols.common import NormalizedRequest, WireProtocol

__all__ = [
    "IGNORED_HEADER",
    "IGNORED_HEADER_CHARS",
    "RANGES",
    "anthropic_builtin",
    "answer_schema",
    "anthropic_settings",
    "format_schema",
    "generation_options",
    "header_text",
    "ignored_header",
    "message_extras",
    "openai_settings",
    "responses_settings",
    "settle",
]

#: the response header naming what the proxy did not honour (comma-separated)
IGNORED_HEADER = "x-agentfsm-ignored"
#: the longest value of :data:`IGNORED_HEADER` (names past it are counted: ``+N more``)
IGNORED_HEADER_CHARS = 1000
#: the longest one name in it (a longer one is cut, ending ``...``)
_NAME_CHARS = 100
# printable ASCII that a header value carries as is: "%" starts an escape, "," separates
# names, and a space (which a header's ends lose) is escaped in names
_VALUE_SAFE = "".join(chr(c) for c in range(0x20, 0x7F) if chr(c) != "%")
_NAME_SAFE = "".join(c for c in _VALUE_SAFE if c not in " ,")

#: each number setting's documented range, per protocol, as (minimum, maximum)
RANGES: dict[WireProtocol, dict[str, tuple[float | None, float | None]]] = {
    "openai": {"temperature": (0, 2), "top_p": (0, 1), "presence_penalty": (-2, 2), "frequency_penalty": (-2, 2)},
    "responses": {"temperature": (0, 2), "top_p": (0, 1)},
    "anthropic": {"temperature": (0, 1), "top_p": (0, 1)},
}

# Top-level fields each normalizer acts on; any other field that is set is reported.
_OPENAI_FIELDS = frozenset(
    {
        "model", "messages", "tools", "tool_choice", "parallel_tool_calls", "stream",
        "stream_options", "max_tokens", "max_completion_tokens", "temperature", "stop", "n",
        "seed", "top_p", "top_k", "presence_penalty", "frequency_penalty", "response_format",
        "user",
    }
)
_ANTHROPIC_FIELDS = frozenset(
    {
        "model", "messages", "system", "tools", "tool_choice", "stream", "max_tokens",
        "temperature", "stop_sequences", "top_p", "top_k", "metadata", "output_config",
        "thinking",
    }
)
_RESPONSES_FIELDS = frozenset(
    {
        "model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls",
        "stream", "max_output_tokens", "temperature", "top_p", "text", "user",
        "previous_response_id", "conversation", "background",
        "metadata",  # echoed in the response, as OpenAI's is: kept, not ignored
    }
)
#: the keys of a chat-completions message that are read; any other that is set (``name``,
#: the speaker's name, which the model is not shown; ``annotations`` ...) is reported
_OPENAI_MESSAGE_FIELDS = frozenset(
    {"role", "content", "tool_calls", "tool_call_id", "refusal", "function_call", "audio"}
)
# where a setting came from, when the client's name differs from ours
_CLIENT_NAMES: dict[WireProtocol, dict[str, str]] = {
    "openai": {},
    "anthropic": {"user": "metadata.user_id", "response_format": "output_config.format"},
    "responses": {"response_format": "text.format"},
}
_INT64 = 2**63


def _is_set(value: Any) -> bool:
    """Whether a field asks for something (null, false and empty values ask for nothing)."""
    return value is not None and value is not False and value != {} and value != []


def _unhandled(body: Mapping[str, Any], handled: frozenset[str]) -> list[str]:
    return [key for key, value in body.items() if key not in handled and _is_set(value)]


def message_extras(message: Mapping[str, Any]) -> list[str]:
    """What one chat-completions message sets beyond what is read, as ``messages.KEY`` (a
    tool message's ``name`` is its call's, which the model is shown)."""
    read = _OPENAI_MESSAGE_FIELDS | ({"name"} if message.get("role") == "tool" else set())
    return [f"messages.{key}" for key, value in message.items() if key not in read and _is_set(value)]


def header_text(text: str, *, safe: str = _VALUE_SAFE) -> str:
    """``text`` as a header value can carry it: printable ASCII, every other character
    (and ``%``) percent-encoded as UTF-8 (:func:`urllib.parse.unquote` reads it back).
    A name of any script, or one holding a control character, can then never fail the
    response (a non-latin-1 value cannot be encoded; a newline or NUL breaks the head)."""
    return quote(text, safe=safe, errors="surrogatepass")


def ignored_header(ignored: Iterable[str]) -> str:
    """The value of :data:`IGNORED_HEADER`: each name once, in order, percent-encoded
    (:func:`header_text`, spaces and commas too), one longer than 100 characters cut
    (``...``), the whole at most :data:`IGNORED_HEADER_CHARS` characters: the names that
    do not fit are counted at its end (``+N more``; the transcript keeps them all)."""
    names = [_encoded_name(name) for name in dict.fromkeys(ignored)]
    value = ",".join(names)
    if len(value) <= IGNORED_HEADER_CHARS:
        return value
    room = IGNORED_HEADER_CHARS - len(f",+{len(names)} more")
    kept: list[str] = []
    used = 0
    for name in names:
        used += len(name) + (1 if kept else 0)
        if used > room:
            break
        kept.append(name)
    return ",".join([*kept, f"+{len(names) - len(kept)} more"])


def _encoded_name(name: str) -> str:
    """``name`` percent-encoded, in at most :data:`_NAME_CHARS` characters (a longer one cut
    between two characters, never inside one's escapes, and ending ``...``)."""
    text = header_text(name, safe=_NAME_SAFE)
    if len(text) <= _NAME_CHARS:
        return text
    pieces: list[str] = []
    used = 0
    for char in name:
        piece = header_text(char, safe=_NAME_SAFE)
        used += len(piece)
        if used > _NAME_CHARS - 3:
            break
        pieces.append(piece)
    return "".join(pieces) + "..."


def _number(body: Mapping[str, Any], key: str, protocol: WireProtocol) -> float | None:
    """A number setting, checked against its documented range in ``protocol``."""
    low, high = RANGES[protocol].get(key, (None, None))
    return opt_number(body, key, minimum=low, maximum=high)


def _response_format(raw: Any, where: str) -> JSONObject | None:
    """A validated OpenAI ``response_format``; None for absent or ``text``."""
    if raw is None:
        return None
    fmt = req_mapping(raw, where)
    kind = fmt.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return dict(fmt)
    if kind == "json_schema":
        spec = req_mapping(fmt.get("json_schema"), f"{where}.json_schema")
        if spec.get("schema") is not None:
            req_mapping(spec["schema"], f"{where}.json_schema.schema")
        return dict(fmt)
    raise RequestError(
        f"{where}.type must be 'text', 'json_object' or 'json_schema'; got {kind!r}",
        param=f"{where}.type",
    )


def _nucleus(body: Mapping[str, Any], protocol: WireProtocol) -> dict[str, Any]:
    """``temperature``, ``top_p`` and ``top_k``, which both chat protocols spell the same
    way (Anthropic documents ``top_k`` from 0)."""
    return {
        "temperature": _number(body, "temperature", protocol),
        "top_p": _number(body, "top_p", protocol),
        "top_k": opt_int(body, "top_k", minimum=0 if protocol == "anthropic" else 1),
    }


def openai_settings(body: Mapping[str, Any]) -> dict[str, Any]:
    """The sampling fields of a chat-completions body, and what it sets that is not acted on."""
    user = opt_str(body, "user")
    return {
        **_nucleus(body, "openai"),
        "seed": opt_int(body, "seed", minimum=-_INT64, maximum=_INT64 - 1),
        "presence_penalty": _number(body, "presence_penalty", "openai"),
        "frequency_penalty": _number(body, "frequency_penalty", "openai"),
        "response_format": _response_format(body.get("response_format"), "response_format"),
        "user": user or None,
        "ignored": tuple(_unhandled(body, _OPENAI_FIELDS)),
    }


def anthropic_settings(body: Mapping[str, Any]) -> dict[str, Any]:
    """The sampling fields of a messages body, and what it sets that is not acted on."""
    ignored = _unhandled(body, _ANTHROPIC_FIELDS)
    user: str | None = None
    metadata = body.get("metadata")
    if metadata is not None:
        meta = req_mapping(metadata, "metadata")
        if meta.get("user_id") is not None:
            user = req_str(meta["user_id"], "metadata.user_id") or None
        ignored += [f"metadata.{k}" for k, v in meta.items() if k != "user_id" and _is_set(v)]
    response_format: JSONObject | None = None
    config = body.get("output_config")
    if config is not None:
        conf = req_mapping(config, "output_config")
        fmt = conf.get("format")
        if fmt is not None:
            fmt = req_mapping(fmt, "output_config.format")
            if fmt.get("type") != "json_schema":
                raise RequestError(
                    "output_config.format.type must be 'json_schema'",
                    param="output_config.format.type",
                )
            schema = req_mapping(fmt.get("schema"), "output_config.format.schema")
            response_format = {
                "type": "json_schema",
                "json_schema": {"name": "output", "schema": dict(schema)},
            }
        ignored += [f"output_config.{k}" for k, v in conf.items() if k != "format" and _is_set(v)]
    tools = body.get("tools")
    if isinstance(tools, list):
        if any(isinstance(t, Mapping) and t.get("defer_loading") for t in tools):
            ignored.append("tools.defer_loading")  # every tool is offered at once
        # Anthropic's own tools (web_search_20250305, bash_20250124 ...): left out, as the
        # Responses API's hosted tools are
        kinds = (anthropic_builtin(t) for t in tools if isinstance(t, Mapping))
        ignored += [f"tools.{kind}" for kind in dict.fromkeys(kinds) if kind is not None]
    thinking = body.get("thinking")
    if thinking is not None and req_mapping(thinking, "thinking").get("type") != "disabled":
        ignored.append("thinking")
    return {
        **_nucleus(body, "anthropic"),
        "response_format": response_format,
        "user": user,
        "ignored": tuple(ignored),
    }


def responses_settings(
    body: Mapping[str, Any], response_format: JSONObject | None
) -> dict[str, Any]:
    """The sampling fields of a Responses body (its ``text.format`` already read as
    ``response_format``), and what it sets that is not acted on: other fields, other
    ``text`` settings, and tools that are not functions (as ``tools.TYPE``)."""
    ignored = _unhandled(body, _RESPONSES_FIELDS)
    if body.get("metadata") is not None:
        req_mapping(body["metadata"], "metadata")  # repeated in the response: an object, or the client's 400
    text = body.get("text")
    if isinstance(text, Mapping):
        ignored += [f"text.{k}" for k, v in text.items() if k != "format" and _is_set(v)]
    tools = body.get("tools")
    if isinstance(tools, list):
        kinds = (t.get("type", "function") for t in tools if isinstance(t, Mapping))
        ignored += [f"tools.{kind}" for kind in dict.fromkeys(kinds) if kind != "function"]
    user = opt_str(body, "user")
    return {
        "temperature": _number(body, "temperature", "responses"),
        "top_p": _number(body, "top_p", "responses"),
        "response_format": response_format,
        "user": user or None,
        "ignored": tuple(ignored),
    }


def _client_name(protocol: WireProtocol, field: str) -> str:
    return _CLIENT_NAMES[protocol].get(field, field)


def settle(request: NormalizedRequest, capabilities: Capabilities) -> NormalizedRequest:
    """``request`` with the settings the backend cannot honour moved into ``ignored``.

    A ``response_format`` on a request with tools is kept whatever the backend: it is
    not sent as such (the model's replies there are actions) but becomes the schema the
    final answer must match, described in the contract, enforced by the grammar's
    final-answer branch under constrained decoding, and checked by the engine
    (:func:`answer_schema`).
    """
    ignored = list(request.ignored)
    cleared: dict[str, Any] = {}
    for field in SAMPLING_OPTIONS:
        if getattr(request, field) is None or (field == "response_format" and request.tool_mode):
            continue
        if field not in capabilities.sampling:
            ignored.append(_client_name(request.protocol, field))
            cleared[field] = None
    if not cleared:
        return request
    return request.model_copy(update={**cleared, "ignored": tuple(ignored)})


def answer_schema(request: NormalizedRequest) -> JSONObject | None:
    """The JSON Schema a final answer must match: the client's ``response_format`` on a
    request with tools (``json_object``: any JSON object); None without one."""
    if not request.tool_mode or request.response_format is None:
        return None
    return format_schema(request.response_format)


def anthropic_builtin(tool: Mapping[str, Any]) -> str | None:
    """The type of one of Anthropic's own tools (``web_search_20250305``, ``bash_20250124``
    ...), which only Anthropic runs; None for a custom tool (``type`` absent or ``custom``)."""
    kind = tool.get("type", "custom")
    return kind if isinstance(kind, str) and kind != "custom" else None


def format_schema(response_format: Mapping[str, Any]) -> JSONObject | None:
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


#: the options' defaults (built once: the model is frozen)
_DEFAULTS = GenerationOptions()


def generation_options(request: NormalizedRequest) -> GenerationOptions:
    """The options for the model calls that answer ``request``: its own settings; where it
    names none, temperature 0 and (where its API has a ``seed``: OpenAI's chat completions)
    seed 0, so a proxied turn decides the same way each time; and no ``max_tokens`` (the
    backend's own bound). Where the client's API has no ``seed`` (Anthropic's, the
    Responses API), none is sent: the client could neither choose nor see it, and a
    temperature above 0 it asked for then samples afresh each time, as its provider does
    (a ``seed`` it sent anyway is named in ``ignored``)."""
    seed = request.seed if request.seed is not None else _DEFAULTS.seed if request.protocol == "openai" else None
    return GenerationOptions(
        max_tokens=request.max_tokens,
        temperature=request.temperature if request.temperature is not None else 0.0,
        seed=seed,
        stop=request.stop,
        top_p=request.top_p,
        top_k=request.top_k,
        presence_penalty=request.presence_penalty,
        frequency_penalty=request.frequency_penalty,
        # with tools the client's format binds the final answer (the engine's answer
        # schema), not the model's replies, which are actions
        response_format=None if request.tool_mode else request.response_format,
        user=request.user,
    )
