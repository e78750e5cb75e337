"""What depends only on a tool set, built once per tool set's content, in bounded memory.

The contract text and the action grammar's schema are the same for every request that
offers the same tools the same way; the proxy parses each request's tools anew, so the
key is the tools' content (name, description, parameters), not their identity. The
values are shared between callers and must not be mutated.

Every memo is bounded in bytes, not only in entries: any client may send a new tool
list with each request, and a memo of 64 entries of a 2 MB tool list each held GBs.
A key is a digest of the content (a few dozen bytes, whatever the tools' size), each
value is weighed when it is kept, and the least recently used go first once the
weights pass the memo's budget; a value heavier than a quarter of the budget is
built and returned, not kept.
"""

from __future__ import annotations

import hashlib
import sys
import threading
import weakref
from collections import OrderedDict
from functools import partial
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Generic, NamedTuple, TypeVar

import orjson

from agentfsm.core.messages import ToolSpec

__all__ = ["ByIdentity", "Memo", "ToolsKey", "json_digest", "json_weight", "tools_key"]

T = TypeVar("T")
O = TypeVar("O")
_SORTED = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS
#: bytes a decoded JSON value takes in memory per byte of its JSON text (dicts, lists and
#: small strings: measured 5 to 8 here); a value's weight is its JSON size times this
JSON_OBJECT_FACTOR = 8


def json_weight(value: Any) -> int:
    """The approximate memory of a plain JSON value (its compact JSON size, scaled)."""
    try:
        return len(orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS)) * JSON_OBJECT_FACTOR
    except TypeError:  # nesting past orjson's limit, an integer past 64 bits
        return sys.getsizeof(value) * 64


def json_digest(value: Any) -> bytes:
    """A JSON value's content as a small key (a client's schema, whatever its size)."""
    return hashlib.blake2b(orjson.dumps(value, default=str, option=_SORTED), digest_size=16).digest()


class ByIdentity(Generic[O, T]):
    """``build(obj)``, kept by ``obj``'s identity, for objects not changed in place.

    An object that takes weak references (a ToolSpec) keeps its entry exactly as long as
    it lives. Others (a schema dict) are held by their entry, so that an id is not
    reused while it lives: the latest ones, within ``max_bytes`` (``weigh(obj, value)``)
    and ``size`` entries.
    """

    def __init__(
        self,
        build: Callable[[O], T],
        size: int = 256,
        *,
        max_bytes: int = 8 << 20,
        weigh: Callable[[O, T], int] | None = None,
    ) -> None:
        self._build = build
        self._size = size
        self._max_bytes = max_bytes
        self._weigh = weigh
        self._weak: dict[int, tuple[weakref.ref[Any], T]] = {}
        self._strong: OrderedDict[int, tuple[O, T, int]] = OrderedDict()
        self._weight = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._weak) + len(self._strong)

    def __call__(self, obj: O) -> T:
        key = id(obj)
        weak = self._weak.get(key)
        if weak is not None and weak[0]() is obj:
            return weak[1]
        strong = self._strong.get(key)
        if strong is not None and strong[0] is obj:
            return strong[1]
        value = self._build(obj)
        try:
            ref = weakref.ref(obj, partial(self._forget, key))
        except TypeError:
            self._hold(key, obj, value)  # no weak references: held, and bounded
        else:
            with self._lock:
                self._weak[key] = (ref, value)
        return value

    def _forget(self, key: int, dead: weakref.ref[Any]) -> None:
        with self._lock:
            hit = self._weak.get(key)
            if hit is not None and hit[0] is dead:
                del self._weak[key]

    def _hold(self, key: int, obj: O, value: T) -> None:
        weight = self._weigh(obj, value) if self._weigh is not None else 0
        if weight > self._max_bytes // 4:
            return
        with self._lock:
            old = self._strong.pop(key, None)
            if old is not None:
                self._weight -= old[2]
            self._strong[key] = (obj, value, weight)
            self._weight += weight
            while self._strong and (self._weight > self._max_bytes or len(self._strong) > self._size):
                _, (_, _, dropped) = self._strong.popitem(last=False)
                self._weight -= dropped


class ToolsKey(NamedTuple):
    """A tool set's content as a key: a digest, and the content's size in bytes."""

    digest: bytes
    size: int


def _content(t: ToolSpec) -> bytes:
    """One tool's content as bytes (name, description and parameters, length-prefixed)."""
    parts = (t.name.encode(), t.description.encode(), orjson.dumps(t.parameters, default=str, option=_SORTED))
    return b"".join(len(p).to_bytes(8, "little") + p for p in parts)


def _digest(t: ToolSpec) -> bytes:
    """16 bytes of digest, then the content's size (8 bytes)."""
    content = _content(t)
    return hashlib.blake2b(content, digest_size=16).digest() + len(content).to_bytes(8, "little")


#: a ToolSpec is frozen: one object's content is read once, while it lives
_key: ByIdentity[ToolSpec, bytes] = ByIdentity(_digest)


def tools_key(tools: Sequence[ToolSpec]) -> ToolsKey:
    """The content of ``tools`` as a small hashable key (a ToolSpec is frozen: one
    object's content is read once)."""
    keys = list(map(_key, tools))
    size = sum(int.from_bytes(k[16:], "little") for k in keys)
    return ToolsKey(hashlib.blake2b(b"".join(k[:16] for k in keys), digest_size=16).digest(), size)


class Memo(Generic[T]):
    """A map from small keys to values, bounded by ``max_bytes`` of weighed values and by
    ``size`` entries; least recently used out first."""

    def __init__(self, size: int = 256, *, max_bytes: int = 8 << 20) -> None:
        self._size = size
        self._max_bytes = max_bytes
        self._store: OrderedDict[Hashable, tuple[T, int]] = OrderedDict()
        self._weight = 0
        self._lock = threading.Lock()

    @property
    def weight(self) -> int:
        """The weights of the values kept now, in bytes."""
        return self._weight

    def __len__(self) -> int:
        return len(self._store)

    def get(self, key: Hashable, build: Callable[[], T], weigh: Callable[[T], int] = sys.getsizeof) -> T:
        """The value kept for ``key``, built (and kept, weighed by ``weigh``) on a miss."""
        with self._lock:
            hit = self._store.get(key)
            if hit is not None:
                self._store.move_to_end(key)
                return hit[0]
        value = build()
        weight = weigh(value) + sys.getsizeof(key)
        if weight > self._max_bytes // 4:
            return value  # too heavy to keep: a client's one-off tool set should not evict the rest
        with self._lock:
            old = self._store.pop(key, None)
            if old is not None:
                self._weight -= old[1]
            self._store[key] = (value, weight)
            self._weight += weight
            while self._store and (self._weight > self._max_bytes or len(self._store) > self._size):
                _, (_, dropped) = self._store.popitem(last=False)
                self._weight -= dropped
        return value
