"""The scanner behind ``parse_reply`` and ``StreamParser``: one pass, any chunking.

Prose is searched for action openers (every search a C-speed ``str.find`` or a regex
with bounded, non-nested quantifiers, resumed where it stopped); an opener hands the
text that follows to a reader (``_readers``), which finds the block's end; the block is
decoded (``_decode``). Fed in chunks, the scanner holds back only a tail that could
still grow into an opener, and decides nothing that later text could change: the
outcome is the same whatever the chunking.
"""

from __future__ import annotations

import re
from typing import Any, Final, TypeVar

from pydantic import BaseModel

from agentfsm.dialects._decode import Block, Context, Outcome, decode_block
from agentfsm.dialects._json import MISSING
from agentfsm.dialects._readers import (
    MAX_BLOCK_CHARS,
    MAX_PYTHONIC_CHARS,
    BracketReader,
    CloserReader,
    Reader,
    SmileyReader,
)
from agentfsm.dialects._openers import (
    BY_FIRST,
    COMMAND_TAIL,
    FAMILIES,
    FIRST,
    GROUP_KIND,
    REGEX,
    WINDOW,
)
from agentfsm.dialects.base import ParsedReply, Problem
from agentfsm.dialects.command import COMMAND, COMMAND_AT_END, COMMAND_HEAD
from agentfsm.dialects.json_action import FENCE_CLOSER, FENCE_INFO, FENCE_INFO_MAX, classify_fence
from agentfsm.dialects.native import HERMES_CLOSER, MISTRAL_HEAD
from agentfsm.dialects.smiley import SMILEY, SMILEY_DELIMITER, SMILEY_RUN
from agentfsm.messages import ToolCall

__all__ = ["MAX_BLOCKS", "Scanner"]

#: after this many action blocks (or fences) in one reply, the rest is not parsed
MAX_BLOCKS: Final = 512
_RUN: Final = re.compile(SMILEY + "+")
_NEED, _DONE = 0, 2
_M = TypeVar("_M", bound=BaseModel)
_set = object.__setattr__
TEXT, CALL = 0, 1


class Scanner:
    """Incremental reply scanner: ``feed`` text, then ``result``."""

    __slots__ = (
        "_actions", "_base", "_blocks", "_buf", "_cache", "_calls", "_ctx", "_dropped",
        "_fed", "_final", "_last", "_next", "_other", "_pending", "_pos", "_prev",
        "_problems", "_prose_at", "_reader", "_stream", "_texts", "_truncated", "events",
        "strict",
    )  # fmt: skip

    def __init__(
        self, known: frozenset[str] | None, protocol: bool, strict: bool, stream: bool = False
    ) -> None:
        self._ctx = Context(known, protocol)
        #: keep ``events`` (a whole-text parse only needs the result)
        self._stream = stream
        #: json-protocol strict mode: calls are only known at the end
        self.strict = strict and protocol
        self._buf = ""
        self._pos = 0
        self._base = 0
        self._prev = ""
        self._last = ""
        self._fed = 0
        self._other = False
        self._reader: Reader | None = None
        self._pending: Block | None = None
        self._cache: dict[str, tuple[int, int, int, str]] = {}
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

    # -- feeding -----------------------------------------------------------------

    def feed(self, chunk: str, final: bool = False) -> None:
        """Scan ``chunk``; ``final`` when it is the last (the reply ends after it)."""
        start = self._fed
        self._fed += len(chunk)
        if self._dropped:
            return
        if self._reader is not None:
            end = self._reader.feed(chunk, 0, final)
            if end is None:
                if final:
                    self._finish_reader(final=True)
                self._last = chunk[-1:] or self._last
                return
            self._finish_reader(final=False)
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
            if self._other:
                q = buf.find(FENCE_CLOSER, pos)
                if q >= 0:
                    self._prose(pos, q + 3)
                    self._other = False
                    continue
                keep = 0
                while not final and keep < 2 and n - keep > pos and buf[n - keep - 1] == "`":
                    keep += 1
                self._prose(pos, n - keep)
                return
            if pos >= n:
                return
            cand = self._candidate(buf, pos, final)
            if not final:
                hold = self._hold(buf, pos, cand[0] if cand else n)
                if hold is not None:
                    self._prose(pos, hold)
                    return
            if cand is None:
                self._prose(pos, n)
                return
            p, kind, end = cand
            self._prose(pos, p)
            if self._blocks >= MAX_BLOCKS:
                self._drop(p)
                return
            if self._open(buf, p, kind, end, final) == _NEED:
                return
            self._blocks += 1
            if self._reader is not None:
                return

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
        if self._prose_at is None and not text.isspace():
            self._prose_at = self._base + i + len(text) - len(text.lstrip())
        self._texts.append(text)
        if self._stream:
            self.events.append((TEXT, text))

    # -- finding openers -----------------------------------------------------------

    def _candidate(self, buf: str, pos: int, final: bool) -> tuple[int, str, int] | None:
        best: tuple[int, str, int] | None = None
        best_p = len(buf) + 1
        nexts, cache = self._next, self._cache
        for f, (literal, units) in enumerate(FAMILIES):
            q = nexts[f]
            if q == -2 or 0 <= q < pos:
                # a one-character find first: memchr-fast, and most replies lack these
                q = buf.find(literal[0], pos)
                if q >= 0 and len(literal) > 1:
                    q = buf.find(literal, q)
                nexts[f] = q
            if q < 0 or q >= best_p:
                continue
            if units is None:  # the literal is the whole opener
                best_p, best = q, (q, literal, q + len(literal))
                continue
            for unit in units:
                entry = cache.get(unit)
                if entry is None or 0 <= entry[1] < pos:
                    entry = cache[unit] = self._search(unit, buf, max(pos, q), final)
                p = entry[1]
                if 0 <= p < best_p:
                    best_p, best = p, (p, entry[3], entry[2])
        return best

    def _search(self, unit: str, buf: str, i: int, final: bool) -> tuple[int, int, int, str]:
        """``(searched from, opener start or -1, opener end, kind)`` of ``unit``'s next opener."""
        if unit == "smiley":
            p, e = self._search_smiley(buf, i, final)
            return (i, p, e, unit)
        if unit == "command-eof":
            if not final:
                return (i, -1, -1, unit)
            regex, j = COMMAND_AT_END, max(i, len(buf) - COMMAND_TAIL)
        else:
            regex, j = REGEX[unit], i
        while True:
            m = regex.search(buf, j)
            if m is None:
                return (i, -1, -1, unit)
            if not unit.startswith("command") or self._word_boundary(buf, m.start()):
                return (i, m.start(), m.end(), GROUP_KIND.get(m.lastgroup or "", unit))
            j = m.start() + 1

    def _search_smiley(self, buf: str, i: int, final: bool) -> tuple[int, int]:
        j = i
        while True:
            q = buf.find(SMILEY_DELIMITER, j)
            if q < 0:
                return (-1, -1)
            e = _RUN.match(buf, q).end()  # type: ignore[union-attr]
            if e - q == SMILEY_RUN and self._before(buf, q) != SMILEY and (final or e < len(buf)):
                return (q, e)
            j = e

    def _before(self, buf: str, i: int) -> str:
        return buf[i - 1] if i > 0 else self._prev

    def _word_boundary(self, buf: str, i: int) -> bool:
        c = self._before(buf, i)
        return not c or not (c.isalnum() or c in "_@")

    def _hold(self, buf: str, pos: int, limit: int) -> int | None:
        """The first position from which the tail could still grow into an opener."""
        n = len(buf)
        for m in FIRST.finditer(buf, max(pos, n - WINDOW), min(limit, n)):
            i = m.start()
            c = m.group()
            if c == SMILEY:
                if self._before(buf, i) != SMILEY and n - i <= SMILEY_RUN:
                    if buf.count(SMILEY, i) == n - i:
                        return i
                continue
            for d in BY_FIRST[c]:
                # text longer than the opener would already have matched in full, or not at all
                if n - i < d.max_len and d.could_grow(buf, i):
                    if d is not COMMAND or self._word_boundary(buf, i):
                        return i
        return None

    # -- opening blocks --------------------------------------------------------------

    def _open(self, buf: str, p: int, kind: str, end: int, final: bool) -> int:
        n = len(buf)
        reader: Reader
        name: str | None = None
        if kind == FENCE_CLOSER:
            e = FENCE_INFO.match(buf, end).end()  # type: ignore[union-attr]
            if not final and e == n and e - end < FENCE_INFO_MAX:
                return _NEED
            info = buf[end:e]
            fence = classify_fence(info)
            c = buf[e] if e < n else ""
            body = e + 1 if c == "\n" else e
            if fence == "other" or (c and c not in "\n{[") or (not c and not info.strip("` \t\r")):
                self._prose(p, body)
                self._other = bool(c)
                return _DONE
            kind = "fence-action" if fence == "action" else "fence-json"
            reader = CloserReader(buf, p, FENCE_CLOSER, fence=True)
        elif kind == "<tool_call>":
            kind, body = "hermes", end
            reader = CloserReader(buf, p, HERMES_CLOSER, fence=False)
        elif kind == "smiley":
            body = end
            reader = SmileyReader(buf, p)
        elif kind.startswith("mistral"):
            m = MISTRAL_HEAD.match(buf, p)
            assert m is not None  # the opener matched the same text
            kind, name = "mistral", m.group(2)
            body = m.start(1) if m.group(1) else m.start(3)
            reader = BracketReader(buf, p, body, python=False, cap=MAX_BLOCK_CHARS)
        elif kind.startswith("command"):
            m = COMMAND_HEAD.match(buf, p)
            assert m is not None  # the opener matched the same text
            kind, name, e = "command", m.group(1), m.end()
            if e < n and buf[e] == "{":
                body = e
                reader = BracketReader(buf, p, e, python=False, cap=MAX_BLOCK_CHARS)
            else:
                self._block(Block(kind, self._base + p, buf[p:e], body=e - p, name=name))
                self._pos = e
                return _DONE
        else:
            body = p
            python = kind == "pythonic"
            cap = MAX_PYTHONIC_CHARS if python else MAX_BLOCK_CHARS
            reader = BracketReader(buf, p, p, python=python, cap=cap)
        self._pending = Block(kind, self._base + p, "", body=body - p, name=name)
        stop = reader.feed(buf, body, final)
        self._reader = reader
        if stop is not None:
            self._finish_reader(final=False)
            self._pos = stop
        elif final:
            self._finish_reader(final=True)
            self._pos = n
        else:
            self._pos = n
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
        elif block.kind in ("fence-action", "fence-json"):
            block.body_end = block.raw.rfind(FENCE_CLOSER)
        elif block.kind == "hermes":
            block.body_end = len(block.raw) - len(HERMES_CLOSER)
        elif block.kind == "smiley":
            block.body_end = len(block.raw) - SMILEY_RUN
        self._block(block)

    def _block(self, block: Block) -> None:
        out: Outcome = decode_block(block, self._ctx)
        if out.prose:
            self._texts.append(block.raw)
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
        for name, args in out.calls:
            values = {"id": f"call_{len(self._calls)}", "name": name, "arguments": args}
            call = _construct(ToolCall, values)
            self._calls.append(call)
            if self._stream:
                self.events.append((CALL, call))
        self._problems.extend(out.problems)
        self._truncated = self._truncated or out.truncated
        if out.final is not MISSING and self._final is MISSING:
            self._final = out.final

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
