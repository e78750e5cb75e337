"""Client JSON schemas reduced to the subset a grammar compiler takes.

A client may send any JSON Schema; llama.cpp's JSON-schema-to-grammar converter (and
an upstream's ``response_format``) takes a subset and raises on much of the rest
(``AssertionError`` on a property whose schema is only a description, ``ValueError``
on a remote ``$ref``, a huge grammar for ``maxLength: 524288``). :func:`grammar_schema`
rewrites any schema into that subset and never raises. Where a part cannot be
expressed it becomes *looser*, never stricter (the guards still check every call
against the client's own schema):

=============================================================  ===========================
client schema                                                  grammar schema
=============================================================  ===========================
``{}``, ``true``, only annotations (``{"description": ...}``),  any JSON value
``false``, not an object
``type`` list (``["string", "null"]``)                          ``anyOf``, one branch a type
type names from other languages (``float``, ``dict``, ...)      the JSON type; unknown: any
``$ref`` to ``#...`` in the same schema (``$defs`` ...)         the target, inlined
``$ref`` elsewhere (a URL)                                      any value
``allOf``                                                       the parts merged into one
``anyOf`` / ``oneOf`` beside other keywords                     each branch merged with them
``additionalProperties`` (bool or schema)                       kept (schema reduced);
                                                                absent beside ``properties``:
                                                                ``false``, as before
``enum`` / ``const`` (mixed types too)                          kept; an empty enum dropped
``pattern``, ``format``, ``minLength``/``maxLength``,          dropped
``minimum``..., ``not``, ``if``/``then``, ``patternProperties``
``minItems`` / ``maxItems`` above :data:`MAX_REPEAT`            dropped
deeper than :data:`MAX_DEPTH`, or past :data:`MAX_NODES`        any value
=============================================================  ===========================

Pure code: values in, values out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

from agentfsm.core._types import JSONObject

__all__ = ["ANY_TYPES", "MAX_DEPTH", "MAX_NODES", "MAX_REPEAT", "any_value", "grammar_schema"]

#: nesting past this depth (``$ref`` resolutions count) becomes any value
MAX_DEPTH = 12
#: schema nodes one reduction visits before the rest becomes any value (bounds the grammar)
MAX_NODES = 2000
#: the largest ``minItems`` / ``maxItems`` kept (a grammar grows with the count)
MAX_REPEAT = 64
#: the JSON types, as the type list that means "any value"
ANY_TYPES: tuple[str, ...] = ("string", "number", "boolean", "object", "array", "null")

_JSON_TYPES = frozenset({*ANY_TYPES, "integer"})
_TYPE_ALIASES = {
    "float": "number",
    "double": "number",
    "int": "integer",
    "long": "integer",
    "bool": "boolean",
    "str": "string",
    "dict": "object",
    "list": "array",
    "tuple": "array",
}
_OBJECT_HINTS = ("properties", "additionalProperties", "required")
_ARRAY_HINTS = ("items", "prefixItems", "minItems", "maxItems")
_STRING_HINTS = ("pattern", "format", "minLength", "maxLength")
_NUMBER_HINTS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
# keywords that only annotate: a schema with nothing else accepts any value
_ANNOTATIONS = frozenset(
    {"description", "title", "default", "examples", "$comment", "$schema", "$id"}
    | {"deprecated", "readOnly", "writeOnly", "$defs", "definitions"}
)


def any_value() -> JSONObject:
    """The grammar schema of any JSON value."""
    return {"type": list(ANY_TYPES)}


def grammar_schema(
    schema: Any, max_items: int | None = None, max_length: int | None = None, numbers: tuple[float, ...] | None = None
) -> JSONObject:
    """``schema`` reduced to what a JSON-schema grammar compiler takes (see the module
    docstring for each rewrite); never raises. ``$ref`` pointers resolve against
    ``schema`` itself. ``max_items`` caps every array's length (the compact retry grammar);
    ``max_length`` every free string's (the retry after an action cut off in a loop);
    ``numbers`` holds every free number to one of them (an integer to the whole ones;
    left free where none fits), the retry after a number misread from the conversation.
    """
    return _Reducer(schema, max_items, max_length, numbers).reduce(schema, 0)


class _Reducer:
    def __init__(
        self, root: Any, max_items: int | None, max_length: int | None = None, numbers: tuple[float, ...] | None = None
    ) -> None:
        self.root = root
        self.max_items = max_items
        self.max_length = max_length
        self.numbers = numbers
        self.nodes = 0

    def reduce(self, schema: Any, depth: int) -> JSONObject:
        self.nodes += 1
        if depth > MAX_DEPTH or self.nodes > MAX_NODES or not isinstance(schema, Mapping):
            return any_value()
        if "$ref" in schema:
            target = self._resolve(schema["$ref"])
            if target is None:
                return any_value()
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            return self.reduce(_merge(target, rest), depth + 1)
        if isinstance(schema.get("allOf"), list):
            merged: Mapping[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
            for part in schema["allOf"]:
                part = self._resolve(part["$ref"]) if isinstance(part, Mapping) and "$ref" in part else part
                if isinstance(part, Mapping):
                    merged = _merge(merged, part)
            return self.reduce(merged, depth + 1)
        for key in ("anyOf", "oneOf"):
            if isinstance(schema.get(key), list) and schema[key]:
                return self._union(schema, key, depth)
        kind = schema.get("type")
        if isinstance(kind, list):
            return self._type_list(schema, kind, depth)
        return self._typed(schema, depth)

    def _resolve(self, ref: Any) -> Any:
        """The target of a local ``#...`` pointer, or None (remote, malformed, missing)."""
        if not isinstance(ref, str) or not ref.startswith("#"):
            return None
        target = self.root
        for raw in ref[1:].split("/")[1:] if ref != "#" else []:
            step = unquote(raw).replace("~1", "/").replace("~0", "~")
            if isinstance(target, Mapping) and step in target:
                target = target[step]
            elif isinstance(target, list) and step.isdigit() and int(step) < len(target):
                target = target[int(step)]
            else:
                return None
        return target

    def _union(self, schema: Mapping[str, Any], key: str, depth: int) -> JSONObject:
        base = {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf")}
        structural = any(k not in _ANNOTATIONS for k in base)
        branches: list[JSONObject] = []
        for branch in schema[key]:
            merged = _merge(base, branch) if structural and isinstance(branch, Mapping) else branch
            reduced = self.reduce(merged, depth + 1)
            if _is_any(reduced):
                return reduced
            branches.append(reduced)
        return _described({"anyOf": branches}, schema)

    def _type_list(self, schema: Mapping[str, Any], kinds: list[Any], depth: int) -> JSONObject:
        names = list(dict.fromkeys(_type_name(k) for k in kinds))
        if not names or None in names:
            return _described(any_value(), schema)
        if len(names) == 1:
            return self._typed({**schema, "type": names[0]}, depth)
        return _described({"anyOf": [self._typed({**schema, "type": n}, depth + 1) for n in names]}, schema)

    def _typed(self, schema: Mapping[str, Any], depth: int) -> JSONObject:
        out: JSONObject = {}
        raw = schema.get("type")
        kind = _type_name(raw) if raw is not None else _inferred_type(schema)
        if kind is not None:
            out["type"] = kind
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            out["enum"] = list(schema["enum"])
        if "const" in schema:
            out["const"] = schema["const"]
        if kind is None and "enum" not in out and "const" not in out:
            return _described(any_value(), schema)
        if kind == "object":
            self._object(schema, out, depth)
        elif kind == "array":
            self._array(schema, out, depth)
        elif kind == "string" and self.max_length is not None and "enum" not in out and "const" not in out:
            out["maxLength"] = self.max_length
        elif kind in ("number", "integer") and self.numbers and "enum" not in out and "const" not in out:
            fits = [int(n) if n.is_integer() else n for n in self.numbers if kind == "number" or n.is_integer()]
            if fits:
                out["enum"] = fits
        return _described(out, schema)

    def _object(self, schema: Mapping[str, Any], out: JSONObject, depth: int) -> None:
        props = schema.get("properties")
        if isinstance(props, Mapping):
            out["properties"] = {str(k): self.reduce(v, depth + 1) for k, v in props.items()}
            required = schema.get("required")
            if isinstance(required, list):
                out["required"] = list(dict.fromkeys(r for r in required if isinstance(r, str) and r in props))
        extra = schema.get("additionalProperties")
        if isinstance(extra, bool):
            out["additionalProperties"] = extra
        elif isinstance(extra, Mapping):
            reduced = self.reduce(extra, depth + 1)
            out["additionalProperties"] = True if _is_any(reduced) else reduced
        if "properties" in out:
            # a small model given a free-form object invents keys: name them all
            out.setdefault("additionalProperties", False)

    def _array(self, schema: Mapping[str, Any], out: JSONObject, depth: int) -> None:
        items = schema.get("items")
        if not isinstance(items, Mapping | list) and isinstance(schema.get("prefixItems"), list):
            items = schema["prefixItems"]
        if isinstance(items, Mapping):
            out["items"] = self.reduce(items, depth + 1)
        elif isinstance(items, list) and items:
            out["items"] = [self.reduce(i, depth + 1) for i in items]
        for key in ("minItems", "maxItems"):
            value = schema.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_REPEAT:
                out[key] = value
        if self.max_items is not None:
            given = out.get("maxItems")
            out["maxItems"] = min(given, self.max_items) if isinstance(given, int) else self.max_items
        low, high = out.get("minItems"), out.get("maxItems")
        if isinstance(low, int) and isinstance(high, int) and low > high:
            out["maxItems"] = low


def _type_name(raw: Any) -> str | None:
    """A JSON type name for ``raw`` (aliases mapped); None for anything else."""
    if not isinstance(raw, str):
        return None
    name = _TYPE_ALIASES.get(raw, raw)
    return name if name in _JSON_TYPES else None


def _inferred_type(schema: Mapping[str, Any]) -> str | None:
    """The type an untyped schema's keywords imply (None: they imply none)."""
    for kind, hints in (
        ("object", _OBJECT_HINTS),
        ("array", _ARRAY_HINTS),
        ("string", _STRING_HINTS),
        ("number", _NUMBER_HINTS),
    ):
        if any(h in schema for h in hints):
            return kind
    return None


def _merge(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """Two schemas that must both hold, as one (properties and required united; for
    other keywords the first one's value wins)."""
    out = dict(a)
    for key, value in b.items():
        if key == "properties" and isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = {**out[key], **value}
        elif key == "required" and isinstance(value, list) and isinstance(out.get(key), list):
            out[key] = list(dict.fromkeys([*out[key], *value]))
        else:
            out.setdefault(key, value)
    return out


def _is_any(schema: JSONObject) -> bool:
    return schema.get("type") == list(ANY_TYPES)


def _described(out: JSONObject, schema: Mapping[str, Any]) -> JSONObject:
    description = schema.get("description")
    if isinstance(description, str) and description:
        out["description"] = description
    return out
