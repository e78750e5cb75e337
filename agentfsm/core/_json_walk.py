"""Walks over a decoded JSON value: one shared by the readers that fix its strings in place,
and the fix they share: a lone UTF-16 surrogate (``"\\ud800"`` decoded), which no UTF-8 text
can hold, made U+FFFD; one that measures how deep it nests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["map_strings", "nests_deeper", "without_lone_surrogates"]


def map_strings(value: Any, fix: Callable[[str], str]) -> Any:
    """``value`` with ``fix`` applied to every string in it, object keys included; lists and
    objects are changed in place. Iterative: no nesting depth exhausts the stack."""
    root: list[Any] = [value]
    stack: list[tuple[Any, Any]] = [(root, 0)]
    while stack:
        holder, key = stack.pop()
        item = holder[key]
        if isinstance(item, str):
            holder[key] = fix(item)
        elif isinstance(item, list):
            stack.extend((item, i) for i in range(len(item)))
        elif isinstance(item, dict):
            fixed = {fix(k) if isinstance(k, str) else k: v for k, v in item.items()}
            item.clear()
            item.update(fixed)
            stack.extend((item, k) for k in item)
    return root[0]


def nests_deeper(value: Any, limit: int, text: Callable[[str], object] | None = None) -> bool:
    """Whether ``value`` nests lists and objects more than ``limit`` deep; ``text``, when
    given, sees each string on the way (object keys included), in the order walked, and may
    raise to stop the walk. Iterative: no nesting depth exhausts the stack."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
            if text is not None:
                for key in item:
                    text(key)
        elif isinstance(item, list):
            children = item
        else:
            if text is not None and isinstance(item, str):
                text(item)
            continue
        if depth > limit:
            return True
        # without ``text`` only lists and objects can matter: leaves are not pushed
        stack.extend((c, depth + 1) for c in children if text is not None or isinstance(c, (dict, list)))
    return False


def without_lone_surrogates(text: str) -> str:
    """``text`` with each lone UTF-16 surrogate replaced by U+FFFD (pairs were joined when
    the JSON was decoded, so any left is alone)."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
