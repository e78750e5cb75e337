"""What an action format declares, so that the scanner needs no branch per format.

A :class:`Format` owns its openers (token definitions, searched by the scanner), how a
block of its kinds starts (:meth:`Format.open`: a reader for the body, or prose), where
the payload ends, and how it is decoded (by default, as JSON holding a call). Formats
are listed once, in priority order, in :mod:`agentfsm.dialects._registry`; the scanner,
the opener tables and the decoder read that list.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from agentfsm.dialects._decode import Block, Context, Outcome, decode_json
from agentfsm.dialects._readers import Reader
from agentfsm.dialects._tokens import OpenerDef

__all__ = ["Format", "Opened", "Prose", "Scan"]


class Scan(Protocol):
    """What a format's hooks may ask of the scanner."""

    def before(self, buf: str, i: int) -> str:
        """The character before ``buf[i]`` (from the previous chunk when ``i`` is 0)."""
        ...


@dataclass(slots=True)
class Opened:
    """A block starts: its kind, where its payload starts, and the reader of its body.

    ``reader`` is ``None`` for a block complete at ``end`` (an ``@tool NAME`` line).
    """

    kind: str
    body: int
    reader: Reader | None = None
    end: int = 0
    #: the tool name written before the payload (command, Mistral, XML)
    name: str | None = None
    state: str = "closed"


@dataclass(slots=True)
class Prose:
    """The opener is text after all, up to ``end``; with ``until``, so is everything up to
    and including the next ``until`` (the body of a fence that is not an action)."""

    end: int
    until: str = ""


class Format:
    """An action format: its openers, how its blocks are read, and how they are decoded."""

    #: every block kind this format reads -> the source its problems carry
    sources: Mapping[str, str] = {}
    #: its openers, in priority order (earlier wins at the same position)
    openers: tuple[OpenerDef, ...] = ()
    #: kinds that are prose again when they hold no call; the others are always actions
    lenient: frozenset[str] = frozenset()
    #: kind -> what a cut-off block is, in the problem message
    cut: Mapping[str, str] = {}
    #: the text that ends a block of this format, when there is one (it does not end a
    #: JSON body inside a string: a body that holds it and still cannot be read was
    #: probably cut there, so the scanner trusts no later action)
    closer: str = ""

    def search(self, scan: Scan, buf: str, i: int, final: bool) -> tuple[int, int, str] | None:
        """``(start, end, kind)`` of the next opener from ``i``; ``None`` for the default
        search (the opener regexes). Override for openers a regex cannot settle alone."""
        return None

    #: set by formats that override :meth:`search`
    custom_search: bool = False

    def holds(self, scan: Scan, buf: str, i: int, opener: OpenerDef) -> bool:
        """Whether the tail ``buf[i:]`` could still grow into ``opener`` (stream hold-back)."""
        return len(buf) - i < opener.max_len and opener.could_grow(buf, i)

    def open(self, scan: Scan, buf: str, p: int, kind: str, end: int, final: bool) -> Opened | Prose | None:
        """Start a block whose opener ``kind`` spans ``buf[p:end]``; ``None``: more text needed."""
        raise NotImplementedError

    def body_end(self, block: Block) -> int | None:
        """Where the payload ends in ``block.raw`` once the block closed (``None``: its end)."""
        return None

    def decode(self, block: Block, ctx: Context) -> Outcome:
        """Calls, problems and text from one closed (or cut) block."""
        return decode_json(block, ctx, self)
