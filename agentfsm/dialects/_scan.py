"""The scanner behind ``parse_reply`` and ``StreamParser``: one pass, any chunking.

Prose is searched for action openers (every search a C-speed ``str.find`` or a regex
with bounded, non-nested quantifiers, resumed where it stopped); an opener hands the
text that follows to its format (``_registry``), whose reader (``_readers``) finds the
block's end; the format decodes the block. Fed in chunks, the scanner holds back only a
tail that could still grow into an opener, and decides nothing that later text could
change: the outcome is the same whatever the chunking. Nothing here names a format.
"""

from __future__ import annotations

from typing import Any, Final

from agentfsm.core.parsed import ParsedReply, Problem
from agentfsm.dialects._collect import Collected, DataScan
from agentfsm.dialects._decode import Block, Context
from agentfsm.dialects._format import Opened
from agentfsm.dialects._openers import BY_FIRST, FAMILIES, FIRST, GROUP_KIND, PRIORITY, WINDOW, Family
from agentfsm.dialects._readers import Reader
from agentfsm.dialects._registry import FORMAT_OF_BLOCK, FORMAT_OF_OPENER

__all__ = ["MAX_BLOCKS", "DataScan", "Scanner"]

#: after this many action blocks (or fences) in one reply, the rest is not parsed
MAX_BLOCKS: Final = 512
_NEED, _DONE = 0, 2


class Scanner:
    """Incremental reply scanner: ``feed`` text, then ``result``."""

    __slots__ = (
        "_base", "_blocks", "_buf", "_cache", "_ctx", "_dead", "_dropped", "_fed", "_last", "_next",
        "_pending", "_pos", "_prev", "_reader", "_until", "data", "out", "strict",
    )  # fmt: skip

    def __init__(
        self,
        known: frozenset[str] | None,
        protocol: bool,
        strict: bool,
        stream: bool = False,
        schemas: dict[str, Any] | None = None,
        data: bool = False,
    ) -> None:
        self._ctx = Context(known, protocol, schemas)
        #: reading data, not a reply (whole text only): see :class:`DataScan`
        self.data: DataScan | None = DataScan() if data else None
        #: json-protocol strict mode: calls are only known at the end
        self.strict = strict and protocol
        #: what the scan found, in order (``out.events``: a stream's, since last taken)
        self.out = Collected(self._ctx, self.data, stream, self.strict)
        self._buf = ""
        self._pos = 0
        self._base = 0
        #: absolute offset before which no position can grow into an opener any more
        self._dead = 0
        self._prev = ""
        self._last = ""
        self._fed = 0
        #: inside text that is prose up to and including this literal (a non-action fence)
        self._until = ""
        self._reader: Reader | None = None
        self._pending: Block | None = None
        self._cache: dict[int, tuple[int, int, int, str]] = {}
        self._next: list[int] = [-2] * len(FAMILIES)
        self._blocks = 0
        self._dropped = False

    # -- feeding -----------------------------------------------------------------

    def feed(self, chunk: str, final: bool = False) -> None:
        """Scan ``chunk``; ``final`` when it is the last (the reply ends after it)."""
        self._feed(chunk, final)
        if final:
            self.out.settle_xml()

    def _feed(self, chunk: str, final: bool) -> None:
        start = self._fed
        self._fed += len(chunk)
        if self._dropped:
            return
        if self._reader is not None:
            reader = self._reader
            end = reader.feed(chunk, 0, final)
            if end is None:
                if final:
                    self._finish_reader(final=True)
                self._last = chunk[-1:] or self._last
                return
            self._finish_reader(final=False)
            back = reader.given_back
            if back:  # the block ended in an earlier chunk: read what followed it again
                self._buf, self._base, self._pos, self._prev = back + chunk, start - len(back), 0, reader.raw[-1:]
            else:
                self._buf, self._base, self._pos, self._prev = chunk, start, end, self._last
        else:
            self._buf += chunk
        self._cache.clear()
        self._next = [-2] * len(FAMILIES)
        self._run(final)
        if not final:
            buf, pos = self._buf, self._pos
            if pos:
                self._prev = buf[pos - 1]
                self._buf = buf[pos:]
                self._base += pos
                self._pos = 0
        self._last = chunk[-1:] or self._last

    def _run(self, final: bool) -> None:
        buf = self._buf
        n = len(buf)
        while True:
            pos = self._pos
            until = self._until
            if until:
                q = buf.find(until, pos)
                if q >= 0:
                    self._prose(pos, q + len(until))
                    self._until = ""
                    continue
                keep = 0  # a tail that may be the start of ``until`` waits for more text
                if not final:
                    keep = next((k for k in range(len(until) - 1, 0, -1) if buf.endswith(until[:k])), 0)
                self._prose(pos, max(pos, n - keep))
                return
            if pos >= n:
                return
            cand = self._candidate(buf, pos, final)
            if not final:
                hold = self._hold(buf, pos, cand[0] if cand else n)
                if hold is None and cand is not None and self._outranked(buf, cand[0], cand[1]):
                    hold = cand[0]
                if hold is not None:
                    self._prose(pos, hold)
                    return
            if cand is None:
                self._prose(pos, n)
                return
            p, kind, end = cand
            self._prose(pos, p)
            if self._blocks >= MAX_BLOCKS and self.data is None:
                self._drop(p)
                return
            if self._open(buf, p, kind, end, final) == _NEED:
                return
            self._blocks += 1
            if self._reader is not None:
                return
            if self.data is not None:
                self._rescan(p)

    def _rescan(self, p: int) -> None:
        """Data: read the text of the block at ``p`` again, from just after its first
        character (an action inside it, or after a prefix that swallowed the rest, is
        still found), within the data's work budget."""
        data = self.data
        assert data is not None
        wasted = self._pos - (p + 1)
        if wasted <= 0:
            return
        if data.work + wasted > data.budget:
            if data.incomplete_from is None:
                data.incomplete_from = self._base + p
            return
        data.work += wasted
        self._pos = p + 1
        self._until = ""

    def _drop(self, p: int) -> None:
        message = (
            f"more than {MAX_BLOCKS} action blocks in one reply: "
            f"the rest of the reply, from offset {self._base + p}, was not parsed"
        )
        self.out.problems.append(
            Problem.model_construct(
                code="limit_exceeded", message=message, position=self._base + p, rejected=True
            )
        )
        self._dropped = True
        self._pos = len(self._buf)

    def _prose(self, i: int, j: int) -> None:
        if j <= i:
            self._pos = max(self._pos, j)
            return
        self._pos = j
        self.out.prose(self._buf[i:j], self._base + i)

    # -- finding openers -----------------------------------------------------------

    def _candidate(self, buf: str, pos: int, final: bool) -> tuple[int, str, int] | None:
        """``(start, opener kind, end)`` of the first opener from ``pos``."""
        best: tuple[int, str, int] | None = None
        best_p = len(buf) + 1
        nexts, cache = self._next, self._cache
        for f, family in enumerate(FAMILIES):
            literal = family.literal
            q = nexts[f]
            if q == -2 or 0 <= q < pos:
                # a one-character find first: memchr-fast, and most replies lack these
                q = buf.find(literal[0], pos)
                if q >= 0 and len(literal) > 1:
                    q = buf.find(literal, q)
                nexts[f] = q
            if q < 0 or q >= best_p:
                continue
            if family.regex is None and family.custom is None:  # the literal is the whole opener
                best_p, best = q, (q, family.defs[0].kind, q + len(literal))
                continue
            entry = cache.get(f)
            if entry is None or 0 <= entry[1] < pos:
                entry = cache[f] = self._search(family, buf, max(pos, q), final)
            p = entry[1]
            if 0 <= p < best_p:
                best_p, best = p, (p, entry[3], entry[2])
        return best

    def _search(self, family: Family, buf: str, i: int, final: bool) -> tuple[int, int, int, str]:
        """``(searched from, opener start or -1, opener end, kind)`` of ``family``'s next opener."""
        if family.custom is not None:
            found = family.custom.search(self, buf, i, final)
            return (i, -1, -1, "") if found is None else (i, *found)
        assert family.regex is not None
        m = family.regex.search(buf, i)
        if m is None:
            return (i, -1, -1, "")
        return (i, m.start(), m.end(), GROUP_KIND.get(m.lastgroup or "", family.defs[0].kind))

    def before(self, buf: str, i: int) -> str:
        """The character before ``buf[i]`` (from the previous chunk when ``i`` is 0)."""
        return buf[i - 1] if i > 0 else self._prev

    def _hold(self, buf: str, pos: int, limit: int) -> int | None:
        """The first position from which the tail could still grow into an opener.

        A position that cannot grow into an opener never will (more text only makes the
        tail longer), so each is tried once over the whole stream (``_dead``), each
        opener with one regex match (:attr:`~agentfsm.dialects._tokens.OpenerDef.prefix_regex`;
        a walk of the tokens in Python cost ~8 µs a character of text made of openers'
        first characters)."""
        n = len(buf)
        end = min(limit, n)
        for m in FIRST.finditer(buf, max(pos, n - WINDOW, self._dead - self._base), end):
            i = m.start()
            for d, fmt in BY_FIRST[m.group()]:
                # text longer than the opener would already have matched in full, or not at all
                if fmt.holds(self, buf, i, d):
                    self._dead = self._base + i
                    return i
        self._dead = max(self._dead, self._base + end)
        return None

    def _outranked(self, buf: str, p: int, kind: str) -> bool:
        """Whether an opener ranked above ``kind`` could still grow at ``p`` (and win there)."""
        rank = PRIORITY[kind]
        return any(PRIORITY[d.kind] < rank and fmt.holds(self, buf, p, d) for d, fmt in BY_FIRST[buf[p]])

    # -- opening blocks --------------------------------------------------------------

    def _open(self, buf: str, p: int, kind: str, end: int, final: bool) -> int:
        opened = FORMAT_OF_OPENER[kind].open(self, buf, p, kind, end, final)
        if opened is None:
            return _NEED
        if not isinstance(opened, Opened):
            self._prose(p, opened.end)
            self._until = opened.until
            return _DONE
        block = Block(opened.kind, self._base + p, "", body=opened.body - p, name=opened.name)
        reader = opened.reader
        if reader is None:
            block.raw, block.state = buf[p : opened.end], opened.state
            self.out.block(block)
            self._pos = opened.end
            return _DONE
        self._pending = block
        stop = reader.feed(buf, opened.body, final)
        self._reader = reader
        if stop is not None:
            self._finish_reader(final=False)
            self._pos = stop
        else:
            if final:
                self._finish_reader(final=True)
            self._pos = len(buf)
        return _DONE

    def _finish_reader(self, final: bool) -> None:
        reader, block = self._reader, self._pending
        assert reader is not None and block is not None
        self._reader = self._pending = None
        block.raw = reader.raw
        block.value = reader.value
        if reader.exceeded:
            block.state = "limit"
        elif final:
            block.state = "truncated"
        else:
            block.body_end = FORMAT_OF_BLOCK[block.kind].body_end(block)
        self.out.block(block)

    def result(self) -> ParsedReply:
        """The parsed reply (call after the final feed)."""
        return self.out.result()
