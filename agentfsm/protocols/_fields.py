"""Typed reads of a client's JSON body; each failure is a RequestError naming the field.

Besides the scalar reads, the parts every protocol reads alike: the offered tools and a
``tool_choice`` keyword or named tool (the calls and results of a history are read by
:class:`~agentfsm.protocols._calls.CallLedger`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson

from agentfsm.core._memo import JSON_OBJECT_FACTOR, Memo
from agentfsm.core._types import JSONObject
from agentfsm.core.choice import ToolChoice
from agentfsm.core.errors import RequestError, ToolSpecError, UnsupportedContent
from agentfsm.core.messages import ToolSpec
from agentfsm.core.client_json import NotJSON, load_client_json

__all__ = [
    "IMAGE_PLACEHOLDER",
    "INT64_MAX",
    "choice_keyword",
    "chosen_tool",
    "join_texts",
    "media_placeholder",
    "opt_bool",
    "opt_int",
    "opt_number",
    "opt_str",
    "parse_arguments",
    "req_list",
    "req_mapping",
    "req_str",
    "stop_sequences",
    "text_of_parts",
    "tool_spec",
    "tool_specs",
]


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    return type(value).__name__


def req_mapping(value: Any, where: str) -> Mapping[str, Any]:
    """``value`` as a JSON object, or a 400 naming ``where``."""
    if not isinstance(value, Mapping):
        raise RequestError(f"{where} must be an object, got {_kind(value)}", param=where)
    return value


def req_list(value: Any, where: str, *, non_empty: bool = False) -> Sequence[Any]:
    """``value`` as a JSON array (optionally non-empty), or a 400 naming ``where``."""
    if not isinstance(value, list | tuple):
        raise RequestError(f"{where} must be an array, got {_kind(value)}", param=where)
    if non_empty and not value:
        raise RequestError(f"{where} must not be empty", param=where)
    return value


def req_str(value: Any, where: str) -> str:
    """``value`` as a string, or a 400 naming ``where``."""
    if not isinstance(value, str):
        raise RequestError(f"{where} must be a string, got {_kind(value)}", param=where)
    return value


def opt_str(body: Mapping[str, Any], key: str, default: str = "") -> str:
    """An optional string field."""
    value = body.get(key)
    return default if value is None else req_str(value, key)


def opt_bool(body: Mapping[str, Any], key: str, default: bool, *, where: str | None = None) -> bool:
    """An optional boolean field; ``where`` is its full path when ``body`` is nested."""
    value = body.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        path = where or key
        raise RequestError(f"{path} must be a boolean, got {_kind(value)}", param=path)
    return value


#: the largest integer a field takes unless it names its own bound: what every upstream
#: (and the JSON encoder of its payload) reads as a signed 64-bit integer
INT64_MAX = 2**63 - 1


def _shown(value: int) -> str:
    """An integer for an error message: a 4,000-digit one is shown by its length."""
    text = str(value)
    return text if len(text) <= 24 else f"{text[:12]}... ({len(text)} digits)"


def opt_int(
    body: Mapping[str, Any], key: str, *, minimum: int = 1, maximum: int = INT64_MAX
) -> int | None:
    """An optional integer field of at least ``minimum`` and at most ``maximum`` (by
    default the 64-bit range: a larger one could not be sent upstream)."""
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(f"{key} must be an integer, got {_kind(value)}", param=key)
    if value < minimum:
        raise RequestError(f"{key} must be at least {minimum}, got {_shown(value)}", param=key)
    if value > maximum:
        raise RequestError(f"{key} must be at most {maximum}, got {_shown(value)}", param=key)
    return value


def opt_number(
    body: Mapping[str, Any], key: str, *, minimum: float | None = None, maximum: float | None = None
) -> float | None:
    """An optional number field, within ``minimum`` and ``maximum`` when given (the
    provider's documented range: a value outside it would only come back from the
    upstream as its 400, which the proxy could not tell from its own failure)."""
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RequestError(f"{key} must be a number, got {_kind(value)}", param=key)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        shown = _shown(value) if isinstance(value, int) else repr(value)
        if minimum is not None and maximum is not None:
            bounds = f"between {minimum:g} and {maximum:g}"
        else:
            bounds = f"at least {minimum:g}" if minimum is not None else f"at most {maximum:g}"
        raise RequestError(f"{key} must be {bounds}, got {shown}", param=key)
    return float(value)


def stop_sequences(body: Mapping[str, Any], key: str, *, most: int | None = None) -> tuple[str, ...]:
    """``stop`` / ``stop_sequences``: absent, one string, or an array of strings (at most
    ``most`` of them, where the provider sets a bound: OpenAI's chat ``stop`` takes 4)."""
    value = body.get(key)
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    items = req_list(value, key)
    if most is not None and len(items) > most:
        raise RequestError(f"{key} takes at most {most} sequences, got {len(items)}", param=key)
    return tuple(req_str(item, f"{key}[{i}]") for i, item in enumerate(items))


def join_texts(texts: Sequence[str]) -> str:
    """Several text parts of one message as one string (newline-separated)."""
    return "\n".join(texts)


#: what a text-only model reads where a tool result held an image
IMAGE_PLACEHOLDER = "[{kind} omitted: this model reads text only]"


def media_placeholder(part: Mapping[str, Any], kind: str) -> str:
    """The text that stands for an image (or other media) part, naming its media type
    when the part says it."""
    source = part.get("source")
    media = source.get("media_type") if isinstance(source, Mapping) else None
    label = f"{kind} ({media})" if isinstance(media, str) and media else kind
    return IMAGE_PLACEHOLDER.format(kind=label)


def text_of_parts(
    content: Any,
    where: str,
    *,
    text_types: Mapping[str, str],
    allow_null: bool = False,
    media_types: Mapping[str, str] | None = None,
    media_seen: list[str] | None = None,
) -> str | None:
    """The text of ``content``: a string, or an array of parts whose ``type`` is in ``text_types``.

    ``text_types`` maps each accepted part type to the key holding its text; a part type
    in ``media_types`` (an image in a tool result) becomes a placeholder naming it
    (:func:`media_placeholder`; the type is appended to ``media_seen``); any other part
    type is an :class:`UnsupportedContent` naming the type and where it was.
    """
    if content is None:
        if allow_null:
            return None
        raise RequestError(f"{where} must not be null", param=where)
    if isinstance(content, str):
        return content
    parts = req_list(content, where)
    texts: list[str] = []
    for j, part in enumerate(parts):
        part_where = f"{where}[{j}]"
        item = req_mapping(part, part_where)
        kind = item.get("type")
        if not isinstance(kind, str):
            raise RequestError(f"{part_where}.type must be a string", param=f"{part_where}.type")
        key = text_types.get(kind)
        if key is None and media_types is not None and kind in media_types:
            texts.append(media_placeholder(item, media_types[kind]))
            if media_seen is not None:
                media_seen.append(kind)
            continue
        if key is None:
            raise UnsupportedContent(kind, part_where)
        texts.append(req_str(item.get(key), f"{part_where}.{key}"))
    return join_texts(texts)


def parse_arguments(raw: Any, where: str) -> JSONObject | None:
    """An earlier call's arguments, sent as a JSON string (or, leniently, an object), as a
    dict; None when the string is not one JSON object (cut off at a token limit, or
    another value): the call the model wrote stays in the history, with no arguments
    (as OpenAI reads any string there, such a history is not refused; the caller names
    what it passed over). JSON past the decoding limits is a 400 naming ``where``."""
    if isinstance(raw, Mapping):
        return dict(raw)
    text = req_str(raw, where)
    if not text.strip():
        return {}
    try:
        value = load_client_json(text, where, int64=True)
    except NotJSON:
        return None
    except RequestError as exc:
        raise RequestError(str(exc), param=where) from None
    return value if isinstance(value, dict) else None


def tool_spec(
    item: Any, where: str, read: Callable[[Mapping[str, Any], str], ToolSpec | None]
) -> ToolSpec | None:
    """One tool entry made a ToolSpec by ``read(entry, where)`` (None: passed over); a
    ToolSpecError is a 400 naming the entry."""
    try:
        return read(req_mapping(item, where), where)
    except ToolSpecError as exc:
        raise RequestError(f"{where}: {exc}", param=where) from exc


def tool_specs(
    raw: Any, read: Callable[[Mapping[str, Any], str], ToolSpec | None], *, name_key: str = "name"
) -> tuple[ToolSpec, ...]:
    """The ``tools`` array, each entry made a ToolSpec by ``read(entry, where)`` (None: passed
    over). A ToolSpecError or a repeated name is a 400 naming the entry (``name_key`` is
    where the protocol keeps the name, for the duplicate's ``param``).

    Read once per tools array's content (``read`` is a pure function of the entry): the
    same specs (frozen, not to be changed) come back for every request that offers the
    same tools, so that what is memoised by a spec's identity (its digest, its schema's
    validator) is found again."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or not raw:
        return _read_specs(raw, read, name_key)
    try:
        text = orjson.dumps(raw)
    except TypeError:  # not plain JSON (an integer past 64 bits ...): read as it is
        return _read_specs(raw, read, name_key)
    key = (read, name_key, hashlib.blake2b(text, digest_size=16).digest(), len(text))

    def build() -> tuple[Any, tuple[ToolSpec, ...]]:
        copy = orjson.loads(text)  # the specs own their content: not the client's body
        return copy, _read_specs(copy, read, name_key)

    try:
        kept, specs = _SPECS.get(key, build, lambda _: 2 * len(text) * JSON_OBJECT_FACTOR)
    except Exception:  # noqa: BLE001 - refused: read again from the array itself, for its own error
        return _read_specs(raw, read, name_key)
    # the same content as the copy (orjson writes NaN as null; 1, 1.0 and true differ in the text)
    return specs if kept == raw else _read_specs(raw, read, name_key)


#: tools arrays read so far, by content: a copy of the array, and the specs read from it
_SPECS: Memo[tuple[Any, tuple[ToolSpec, ...]]] = Memo(64, max_bytes=8 << 20)


def _read_specs(
    raw: Any, read: Callable[[Mapping[str, Any], str], ToolSpec | None], name_key: str
) -> tuple[ToolSpec, ...]:
    specs: list[ToolSpec] = []
    seen: set[str] = set()
    for i, item in enumerate(req_list(raw, "tools")):
        where = f"tools[{i}]"
        spec = tool_spec(item, where, read)
        if spec is None:
            continue
        if spec.name in seen:
            raise RequestError(f"{where}: duplicate tool name {spec.name!r}", param=f"{where}.{name_key}")
        seen.add(spec.name)
        specs.append(spec)
    return tuple(specs)


def choice_keyword(raw: str, tools: Sequence[ToolSpec], *, needs: str = "tools") -> ToolChoice:
    """A ``tool_choice`` string: ``none``, ``auto``, or ``required`` (which ``needs`` tools)."""
    if raw not in ("none", "auto", "required"):
        raise RequestError(
            f"tool_choice must be 'none', 'auto', 'required' or an object; got {raw!r}",
            param="tool_choice",
        )
    if raw == "required" and not tools:
        raise RequestError(f"tool_choice 'required' needs {needs}", param="tool_choice")
    return ToolChoice.parse(raw)


def chosen_tool(
    name: str, tools: Sequence[ToolSpec], *, among: str = "tools", param: str = "tool_choice"
) -> ToolChoice:
    """The choice of the tool a ``tool_choice`` names, which must be one of ``tools``."""
    names = [t.name for t in tools]
    if name not in names:
        raise RequestError(
            f"tool_choice names {name!r}, which is not among the {among} ({', '.join(names) or 'none'})",
            param=param,
        )
    return ToolChoice.of_tool(name)
