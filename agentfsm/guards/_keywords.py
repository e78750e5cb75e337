"""JSON Schema keywords whose ``jsonschema`` implementations are quadratic, made linear.

``uniqueItems`` compares every pair of items once they cannot be sorted (objects,
mixed types): a model's 51 KB array stalled every client of the proxy for 11 s, 213 KB
took 255 s. ``unevaluatedItems`` and ``unevaluatedProperties`` test each item or key for
membership in a *list* of the evaluated ones. Here each item is reduced to a hashable
canonical form that is equal exactly when ``jsonschema`` calls the items equal (``1``
and ``1.0`` are, ``true`` and ``1`` are not; key order does not count), and the
evaluated indexes and keys are sets: the same verdicts, in linear time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from jsonschema import _legacy_keywords, _utils
from jsonschema.exceptions import ValidationError

__all__ = ["LINEAR_KEYWORDS", "canonical", "linear", "unique"]

Keyword = Callable[[Any, Any, Any, Any], Iterator[ValidationError]]


def canonical(value: Any) -> Any:
    """A hashable form of a JSON value, equal for values JSON Schema calls equal."""
    if value is None:
        return (0,)
    if value is True or value is False:
        return (1, value)
    if isinstance(value, str):
        return (2, value)
    if isinstance(value, int | float):
        return (3, value)  # 1 == 1.0, and they hash alike
    if isinstance(value, Mapping):
        return (5, frozenset((key, canonical(item)) for key, item in value.items()))
    if isinstance(value, Sequence):
        return (4, tuple(canonical(item) for item in value))
    return (6, repr(value))


def unique(items: Sequence[Any]) -> bool:
    """Whether no two of ``items`` are equal (one pass, a set of canonical forms)."""
    seen: set[Any] = set()
    for item in items:
        key = canonical(item)
        if key in seen:
            return False
        seen.add(key)
    return True


def _unique_items(validator: Any, unique_items: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if unique_items and validator.is_type(instance, "array") and not unique(instance):
        yield ValidationError(f"the array of {len(instance)} items has non-unique elements")


def _unevaluated_items(find: Callable[[Any, Any, Any], list[int]]) -> Keyword:
    def keyword(validator: Any, unevaluated: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
        if not validator.is_type(instance, "array"):
            return
        evaluated = set(find(validator, instance, schema))
        extras = [item for index, item in enumerate(instance) if index not in evaluated]
        if extras:
            error = "Unevaluated items are not allowed (%s %s unexpected)"
            yield ValidationError(error % _utils.extras_msg(extras))

    return keyword


def _unevaluated_properties(find: Callable[[Any, Any, Any], list[str]]) -> Keyword:
    def keyword(validator: Any, unevaluated: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
        if not validator.is_type(instance, "object"):
            return
        evaluated = set(find(validator, instance, schema))
        extras = []
        for key in instance:
            if key not in evaluated:
                for _ in validator.descend(instance[key], unevaluated, path=key, schema_path=key):
                    extras.append(key)
        if not extras:
            return
        if unevaluated is False:
            error = "Unevaluated properties are not allowed (%s %s unexpected)"
            yield ValidationError(error % _utils.extras_msg(sorted(extras, key=str)))
        else:
            error = "Unevaluated properties are not valid under the given schema (%s %s unevaluated and invalid)"
            yield ValidationError(error % _utils.extras_msg(extras))

    return keyword


#: keyword -> {jsonschema's implementation: its linear replacement}
LINEAR_KEYWORDS: dict[str, dict[Any, Keyword]] = {
    "uniqueItems": {},
    "unevaluatedItems": {
        _legacy_keywords.unevaluatedItems_draft2019: _unevaluated_items(_legacy_keywords.find_evaluated_item_indexes_by_schema),
    },
    "unevaluatedProperties": {
        _legacy_keywords.unevaluatedProperties_draft2019: _unevaluated_properties(
            _legacy_keywords.find_evaluated_property_keys_by_schema
        ),
    },
}


def _install() -> None:
    from jsonschema import _keywords

    LINEAR_KEYWORDS["uniqueItems"][_keywords.uniqueItems] = _unique_items
    LINEAR_KEYWORDS["unevaluatedItems"][_keywords.unevaluatedItems] = _unevaluated_items(
        _utils.find_evaluated_item_indexes_by_schema
    )
    LINEAR_KEYWORDS["unevaluatedProperties"][_keywords.unevaluatedProperties] = _unevaluated_properties(
        _utils.find_evaluated_property_keys_by_schema
    )


_install()


def linear(validators: Mapping[str, Any]) -> dict[str, Keyword]:
    """The replacements for a validator class's ``VALIDATORS`` (only what it has)."""
    out: dict[str, Keyword] = {}
    for name, by_original in LINEAR_KEYWORDS.items():
        replacement = by_original.get(validators.get(name))
        if replacement is not None:
            out[name] = replacement
    return out
