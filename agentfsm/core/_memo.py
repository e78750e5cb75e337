"""What depends only on a tool set, built once per tool set's content.

The contract text and the action grammar's schema are the same for every request that
offers the same tools the same way; the proxy parses each request's tools anew, so the
key is the tools' content (name, description, parameters), not their identity. The
values are shared between callers and must not be mutated.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Generic, TypeVar

import orjson

from agentfsm.core.messages import ToolSpec

__all__ = ["ByIdentity", "Memo", "tools_key"]

T = TypeVar("T")
O = TypeVar("O")
_SORTED = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS


class ByIdentity(Generic[O, T]):
    """``build(obj)``, kept by ``obj``'s identity, for objects not changed in place (the
    latest ``size``; each entry holds its object, so an id is not reused while it lives)."""

    def __init__(self, build: Callable[[O], T], size: int = 256) -> None:
        self._build = build
        self._size = size
        self._store: OrderedDict[int, tuple[O, T]] = OrderedDict()

    def __call__(self, obj: O) -> T:
        hit = self._store.get(id(obj))
        if hit is not None and hit[0] is obj:
            return hit[1]
        value = self._build(obj)
        self._store[id(obj)] = (obj, value)
        if len(self._store) > self._size:
            self._store.popitem(last=False)
        return value


_Key = tuple[str, str, bytes]
#: a ToolSpec is frozen: one object's content is read once
_key: ByIdentity[ToolSpec, _Key] = ByIdentity(
    lambda t: (t.name, t.description, orjson.dumps(t.parameters, default=str, option=_SORTED))
)


def tools_key(tools: Sequence[ToolSpec]) -> tuple[_Key, ...]:
    """The content of ``tools`` as a hashable key (a ToolSpec is frozen: one object's
    content is read once)."""
    return tuple(map(_key, tools))


class Memo(Generic[T]):
    """A bounded map from key to value, least recently used out first."""

    def __init__(self, size: int = 64) -> None:
        self._size = size
        self._store: OrderedDict[Hashable, T] = OrderedDict()

    def get(self, key: Hashable, build: Callable[[], T]) -> T:
        """The value kept for ``key``, built (and kept) on a miss."""
        try:
            value = self._store[key]
        except KeyError:
            value = self._store[key] = build()
            if len(self._store) > self._size:
                self._store.popitem(last=False)
        else:
            self._store.move_to_end(key)
        return value
