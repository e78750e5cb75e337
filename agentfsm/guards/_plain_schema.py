"""A quick proof that arguments satisfy a plain schema, before ``jsonschema`` is asked.

Most tool schemas are objects of typed properties: ``type``, ``properties``,
``required``, ``additionalProperties`` (a boolean), ``items``, string ``enum``s, and
annotations. For such a schema, :func:`plain_check` gives a checker that answers True
only where ``jsonschema`` (:mod:`agentfsm.guards.schema`'s validator) would find no
error: each value of the exact Python type its ``type`` names (``1.0`` for an
``integer``, a listed value of another type ... are left to ``jsonschema``), within
:data:`MAX_VALUES` values and :data:`MAX_DEPTH` levels, so that no bound of the full
validation (keyword steps, depth) could have been reached. False means "not shown
here": the full validation then decides, and writes the error, as before. The
checker never decides a mismatch by itself, so the guard's verdicts are the same.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import lru_cache
from typing import Any

__all__ = ["MAX_DEPTH", "MAX_VALUES", "plain_check"]

#: values the quick check visits at most (each costs the full validation a few keyword steps)
MAX_VALUES = 1_000
#: nesting the quick check follows at most
MAX_DEPTH = 16

#: keywords that only annotate (no effect on validity)
_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$comment"})
_KEYWORDS = frozenset({"type", "properties", "required", "additionalProperties", "items", "enum"}) | _ANNOTATIONS


def _is(value: Any, kind: str) -> bool:
    """Whether ``value`` is of JSON Schema type ``kind`` by its exact Python type (a
    stricter test than ``jsonschema``'s, which also takes ``1.0`` as an integer)."""
    t = type(value)
    if kind == "string":
        return t is str
    if kind == "object":
        return t is dict
    if kind == "array":
        return t is list
    if kind == "boolean":
        return t is bool
    if kind == "integer":
        return t is int
    if kind == "number":
        return t is int or t is float
    if kind == "null":
        return value is None
    return False


def _plain(schema: Any, depth: int) -> bool:
    """Whether ``schema`` uses only what the quick check reads."""
    if type(schema) is not dict or depth > MAX_DEPTH or not _KEYWORDS.issuperset(schema):
        return False
    kind = schema.get("type")
    kinds = kind if type(kind) is list else [kind]
    if kind is not None and not all(type(k) is str for k in kinds):
        return False
    enum = schema.get("enum")
    if enum is not None and not (type(enum) is list and all(type(m) is str for m in enum)):
        return False
    if "additionalProperties" in schema and type(schema["additionalProperties"]) is not bool:
        return False
    required = schema.get("required")
    if required is not None and not (type(required) is list and all(type(r) is str for r in required)):
        return False
    properties = schema.get("properties")
    if properties is not None and not (
        type(properties) is dict and all(_plain(sub, depth + 1) for sub in properties.values())
    ):
        return False
    return "items" not in schema or _plain(schema["items"], depth + 1)


class _Walk:
    """One check's count of the values visited."""

    __slots__ = ("left",)

    def __init__(self) -> None:
        self.left = MAX_VALUES

    def ok(self, value: Any, schema: dict[str, Any], depth: int) -> bool:
        self.left -= 1
        if self.left < 0 or depth > MAX_DEPTH:
            return False
        kind = schema.get("type")
        if kind is not None:
            if type(kind) is list:
                if not any(_is(value, k) for k in kind):
                    return False
            elif not _is(value, kind):
                return False
        enum = schema.get("enum")
        if enum is not None and not (type(value) is str and value in enum):
            return False
        if type(value) is dict:
            properties = schema.get("properties") or {}
            required = schema.get("required")
            if required is not None and not all(name in value for name in required):
                return False
            if schema.get("additionalProperties") is False and not all(key in properties for key in value):
                return False
            for key, item in value.items():
                sub = properties.get(key)
                if sub is not None and not self.ok(item, sub, depth + 1):
                    return False
        elif type(value) is list:
            items = schema.get("items")
            if items is not None:
                return all(self.ok(item, items, depth + 1) for item in value)
        return True


@lru_cache(maxsize=256)
def plain_check(serialized: str) -> Callable[[Any], bool] | None:
    """For a plain schema (its JSON text, as the guard serialises it), a checker that is
    True only for arguments the full validation accepts without a note; None for a
    schema that uses anything else."""
    schema = json.loads(serialized)
    if not _plain(schema, 0):
        return None
    return lambda arguments: _Walk().ok(arguments, schema, 0)
