"""The scanner behind ``parse_reply`` and ``StreamParser``: one pass, any chunking.

Prose is searched for action openers (every search a C-speed ``str.find`` or a regex
with bounded, non-nested quantifiers, resumed where it stopped); an opener hands the
text that follows to its format (``_registry``), whose reader (``_readers``) finds the
block's end; the format decodes the block. Fed in chunks, the scanner holds back only a
tail that could still grow into an opener, and decides nothing that later text could
change: the outcome is the same whatever the chunking. Nothing here names a format.
"""

from __future__ import annotations

from typing import Any, Final, TypeVar

from pydantic import BaseModel

from agentfsm.dialects._decode import Block, Context, Outcome, problem
from agentfsm.dialects._format import Opened
from agentfsm.dialects._json import MAX_REPAIR_CHARS, MISSING, RepairBudget
from agentfsm.dialects._openers import BY_FIRST, FAMILIES, FIRST, GROUP_KIND, PRIORITY, WINDOW, Family
from agentfsm.dialects._readers import Reader
from agentfsm.dialects._registry import FORMAT_OF_BLOCK, FORMAT_OF_OPENER
from agentfsm.core.parsed import ParsedReply, Problem
from agentfsm.dialects.xml_function import STRAY_CLOSER
from agentfsm.core.messages import ToolCall

__all__ = ["MAX_BLOCKS", "DataScan", "Scanner"]

#: after this many action blocks (or fences) in one reply, the rest is not parsed
MAX_BLOCKS: Final = 512
_NEED, _DONE = 0, 2
_M = TypeVar("_M", bound=BaseModel)
_set = object.__setattr__
TEXT, CALL = 0, 1


class DataScan:
    """How a scan of data (a tool result, a user's pasted text) went.

    Data is read for every action a model could copy out of it: no block suppresses the
    ones after it (a broken one, a 513th), each block gets a repair budget of its own,
    and each block's text is read again from just after its opener, so that an unclosed
    fence or ``<tool_call>`` that swallows the rest of the text hides nothing. That
    rereading is bounded by :attr:`budget` characters (four times the text, plus 64 KB);
    past it, :attr:`incomplete_from` says from where the text was not read in full.
    """

    __slots__ = ("budget", "incomplete_from", "repaired", "work")

    def __init__(self) -> None:
        self.work = 0
        self.repaired = 0
        self.budget = 65_536
        self.incomplete_from: int | None = None


class Scanner:
    """Incremental reply scanner: ``feed`` text, then ``result``."""

    __slots__ = (
        "_actions", "_base", "_blocks", "_broken", "_buf", "_cache", "_calls", "_ctx", "_dead", "_dropped",
        "_fed", "_final", "_held", "_last", "_next", "_pending", "_pos", "_prev", "_problems",
        "_prose_at", "_reader", "_stray", "_stream", "_tail", "_texts", "_truncated", "_until", "_xml_from",
        "data", "events", "strict",
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
        #: keep ``events`` (a whole-text parse only needs the result)
        self._stream = stream
        #: json-protocol strict mode: calls are only known at the end
        self.strict = strict and protocol
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
        #: ``(TEXT, str)`` and ``(CALL, ToolCall)`` in order, since last taken
        self.events: list[tuple[int, Any]] = []
        self._texts: list[str] = []
        self._calls: list[ToolCall] = []
        self._problems: list[Problem] = []
        self._truncated = False
        self._final: Any = MISSING
        self._prose_at: int | None = None
        self._actions: list[str] = []
        self._blocks = 0
        self._dropped = False
        #: an action could not be read: where its text ends (and what follows begins) is a
        #: guess, so no later action becomes a call
        self._broken = False
        #: the index of the first call from an XML block (None: none yet); from there on,
        #: a stream's call events wait for the end (``_held``), when a stray XML closer in
        #: the prose (``_stray``; ``_tail`` spans prose pieces) refuses them all
        self._xml_from: int | None = None
        self._held: list[tuple[int, Any]] = []
        self._stray = False
        self._tail = ""

    # -- feeding -----------------------------------------------------------------

    def feed(self, chunk: str, final: bool = False) -> None:
        """Scan ``chunk``; ``final`` when it is the last (the reply ends after it)."""
        self._feed(chunk, final)
        if final:
            self._settle_xml()

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
        self._problems.append(
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
        text = self._buf[i:j]
        self._pos = j
        self._watch(text)
        if self._prose_at is None and not text.isspace():
            self._prose_at = self._base + i + len(text) - len(text.lstrip())
        self._texts.append(text)
        if self._stream:
            self.events.append((TEXT, text))

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
            self._block(block)
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
        self._block(block)

    def _block(self, block: Block) -> None:
        fmt = FORMAT_OF_BLOCK[block.kind]
        data = self.data
        if data is not None:  # each block of data has the repair budget of a reply of its own
            self._ctx.budget = RepairBudget()
        out: Outcome = fmt.decode(block, self._ctx)
        if data is not None:
            data.repaired += MAX_REPAIR_CHARS - self._ctx.budget.remaining
            if data.repaired > data.budget and data.incomplete_from is None:
                data.incomplete_from = block.start  # no more repairs: what follows is unread
                self._ctx.budget = RepairBudget(remaining=0, calls=0)
        if out.prose and fmt.closer and block.state == "closed":
            body = block.raw[block.body : block.body_end]
            # a JSON body holding its own closer that cannot be read: cut there, probably
            self._broken = self._broken or (body.lstrip()[:1] in ("{", "[") and fmt.closer in body)
        if out.prose:
            self._texts.append(block.raw)
            self._watch(block.raw)
            if self._stream:
                self.events.append((TEXT, block.raw))
            if self._prose_at is None and not block.raw.isspace():
                self._prose_at = block.start
            return
        self._actions.append(block.kind)
        if out.text:
            self._texts.append(out.text)
            if self._stream:
                self.events.append((TEXT, out.text))
        if self._broken and out.calls and data is None:
            message = "an action after one that could not be read; it was not run"
            out.problems.append(problem("invalid_json", message, block.start, fmt.sources[block.kind]))
            out.calls = []
        self._broken = self._broken or any(p.code == "invalid_json" and p.rejected for p in out.problems)
        if block.kind == "xml" and self._xml_from is None:
            self._xml_from = len(self._calls)
        for name, args in out.calls:
            values = {"id": f"call_{len(self._calls)}", "name": name, "arguments": args}
            call = _construct(ToolCall, values)
            self._calls.append(call)
            if self._stream:
                (self.events if self._xml_from is None else self._held).append((CALL, call))
        self._problems.extend(out.problems)
        self._truncated = self._truncated or out.truncated
        if out.final is not MISSING and self._final is MISSING:
            self._final = out.final

    def _watch(self, prose: str) -> None:
        """Note a stray XML closer in prose (a piece may end inside one: keep a tail)."""
        if self._stray:
            return
        text = self._tail + prose
        if "</" in text and STRAY_CLOSER.search(text) is not None:
            self._stray = True
        self._tail = text[-12:]

    def _settle_xml(self) -> None:
        """At the end: the calls from the first XML block on, refused or released."""
        start = self._xml_from
        if start is None:
            return
        if self._stray and start < len(self._calls) and self.data is None:
            message = (
                "an XML parameter value held </parameter> or </function> (a closer followed in the "
                "text): no call from the first <tool_call> on was run; write such a value in a JSON "
                "object body, <function=NAME>{...}</function>"
            )
            self._problems.append(
                Problem.model_construct(
                    code="malformed_action", message=message, position=None, rejected=True, source="xml-function"
                )
            )
            del self._calls[start:]
        elif self._stream:
            self.events.extend(self._held)
        self._held = []
        self._xml_from = None

    # -- the result --------------------------------------------------------------------

    def result(self) -> ParsedReply:
        """The parsed reply (call after the final feed)."""
        calls, final, problems = self._calls, self._final, self._problems
        if self.strict:
            one_object = len(self._actions) == 1 and self._actions[0] == "object"
            if not one_object or self._prose_at is not None:
                what = "text outside the one JSON object" if self._actions else "no JSON object"
                problems = [
                    *problems,
                    Problem.model_construct(
                        code="extra_text",
                        message=f"json-protocol (strict): the reply must be one JSON object; found {what}",
                        position=self._prose_at if self._prose_at is not None else 0,
                        rejected=True,
                        source="json-protocol",
                    ),
                ]
                calls, final = [], MISSING
        content = "".join(self._texts).strip()
        values = {
            "content": content or None,
            "tool_calls": tuple(calls),
            "problems": tuple(problems),
            "truncated": self._truncated,
            "final": None if final is MISSING else final,
        }
        return _construct(ParsedReply, values)


def _construct(cls: type[_M], values: dict[str, Any]) -> _M:
    """``cls.model_construct(**values)`` for models given every field, without its overhead.

    This is what pydantic's ``model_construct`` stores (the values were checked by
    the parser itself); ``tests/test_parser.py`` checks the result equals a validated
    model.
    """
    obj = cls.__new__(cls)
    _set(obj, "__dict__", values)
    _set(obj, "__pydantic_fields_set__", set(values))
    _set(obj, "__pydantic_extra__", None)
    _set(obj, "__pydantic_private__", None)
    return obj
