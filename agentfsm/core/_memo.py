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

__all__ = ["Memo", "tools_key"]

T = TypeVar("T")
_SORTED = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS


_Key = tuple[str, str, bytes]
#: the latest ToolSpec objects' keys, by identity (each entry holds its ToolSpec, so an id
#: is never reused while its entry lives): the same objects are keyed once, not per lookup
_BY_ID: OrderedDict[int, tuple[ToolSpec, _Key]] = OrderedDict()
_BY_ID_SIZE = 256


def _key(tool: ToolSpec) -> _Key:
    hit = _BY_ID.get(id(tool))
    if hit is not None and hit[0] is tool:
        return hit[1]
    key = (tool.name, tool.description, orjson.dumps(tool.parameters, default=str, option=_SORTED))
    _BY_ID[id(tool)] = (tool, key)
    if len(_BY_ID) > _BY_ID_SIZE:
        _BY_ID.popitem(last=False)
    return key


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
