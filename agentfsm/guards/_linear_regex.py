"""A linear-time ``re.search`` for the regexes found in client JSON schemas.

Python's ``re`` backtracks: ``^(a+)+$`` against ``"aaaa...!"`` takes exponential
time, and a tool schema comes from whoever calls the proxy. The schema guard
therefore never hands a client pattern to ``re``. This module parses the pattern
with the standard library's own regex parser (``re._parser``, so the syntax and
the answers are Python's, the ones ``jsonschema`` would give) and runs it as a
Thompson NFA (a Pike VM without captures): each character visits each program
instruction at most once, so the work is bounded by
``(len(text) + 1) * len(program)`` *before* the run starts.

What is not supported returns ``None`` ("cannot decide") instead of guessing:
back-references, look-around, conditionals, atomic groups and possessive
repeats, case-insensitive / multiline / dot-all / ASCII / locale flags, a
program over :data:`MAX_PROGRAM` instructions, a run over ``max_work`` steps,
an invalid pattern, or a Python without ``re._parser``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from functools import lru_cache
from typing import Any

__all__ = ["MAX_PATTERN", "MAX_PROGRAM", "MAX_WORK", "search", "work"]

#: longest pattern compiled, in characters
MAX_PATTERN = 2_000
#: largest program (instructions) one pattern may compile to (bounded repeats expand)
MAX_PROGRAM = 5_000
#: default bound on one search: positions times instructions
MAX_WORK = 400_000

try:  # private but stable since 3.11; without it every pattern is "cannot decide"
    _P: Any = importlib.import_module("re._parser")
    _C: Any = importlib.import_module("re._constants")
except ImportError:  # pragma: no cover - depends on the Python version
    _P = _C = None

Pred = Callable[[str], bool]
# Instructions: ("char", pred) | ("split", a, b) | ("jmp", a) | ("at", kind) | ("match",)
Instr = tuple[Any, ...]


class _Unsupported(Exception):
    """The pattern uses something this matcher does not run."""


def _word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _category(cat: Any) -> Pred:
    table: dict[Any, Pred] = {
        _C.CATEGORY_DIGIT: str.isdecimal,
        _C.CATEGORY_NOT_DIGIT: lambda ch: not ch.isdecimal(),
        _C.CATEGORY_SPACE: str.isspace,
        _C.CATEGORY_NOT_SPACE: lambda ch: not ch.isspace(),
        _C.CATEGORY_WORD: _word,
        _C.CATEGORY_NOT_WORD: lambda ch: not _word(ch),
    }
    if cat not in table:
        raise _Unsupported(str(cat))
    return table[cat]


def _char_class(items: list[tuple[Any, Any]]) -> Pred:
    negate = False
    chars: set[str] = set()
    ranges: list[tuple[int, int]] = []
    preds: list[Pred] = []
    for op, av in items:
        if op is _C.NEGATE:
            negate = True
        elif op is _C.LITERAL:
            chars.add(chr(av))
        elif op is _C.RANGE:
            ranges.append((av[0], av[1]))
        elif op is _C.CATEGORY:
            preds.append(_category(av))
        else:
            raise _Unsupported(str(op))

    def pred(ch: str) -> bool:
        code = ord(ch)
        hit = (
            ch in chars
            or any(lo <= code <= hi for lo, hi in ranges)
            or any(p(ch) for p in preds)
        )
        return hit != negate

    return pred


class _Compiler:
    def __init__(self) -> None:
        self.prog: list[Instr] = []

    def emit(self, instr: Instr) -> int:
        if len(self.prog) >= MAX_PROGRAM:
            raise _Unsupported("program too large")
        self.prog.append(instr)
        return len(self.prog) - 1

    def seq(self, nodes: Any) -> None:
        for op, av in nodes:
            self.node(op, av)

    def node(self, op: Any, av: Any) -> None:
        c = _C
        if op is c.LITERAL:
            ch = chr(av)
            self.emit(("char", ch.__eq__))
        elif op is c.NOT_LITERAL:
            ch = chr(av)
            self.emit(("char", ch.__ne__))
        elif op is c.ANY:
            self.emit(("char", "\n".__ne__))
        elif op is c.IN:
            self.emit(("char", _char_class(av)))
        elif op is c.AT:
            self.emit(("at", av))
        elif op is c.SUBPATTERN:
            _group, add_flags, del_flags, sub = av
            if add_flags or del_flags:
                raise _Unsupported("scoped flags")
            self.seq(sub)
        elif op is c.BRANCH:
            self.branch(av[1])
        elif op is c.MAX_REPEAT or op is c.MIN_REPEAT:
            # greedy or lazy does not change *whether* a search matches
            self.repeat(av[0], av[1], av[2])
        else:  # GROUPREF, ASSERT, ASSERT_NOT, GROUPREF_EXISTS, ATOMIC_GROUP, POSSESSIVE_REPEAT ...
            raise _Unsupported(str(op))

    def branch(self, alternatives: list[Any]) -> None:
        jumps: list[int] = []
        for i, alt in enumerate(alternatives):
            if i < len(alternatives) - 1:
                split = self.emit(("split", 0, 0))
                self.seq(alt)
                jumps.append(self.emit(("jmp", 0)))
                self.prog[split] = ("split", split + 1, len(self.prog))
            else:
                self.seq(alt)
        for j in jumps:
            self.prog[j] = ("jmp", len(self.prog))

    def repeat(self, low: int, high: Any, sub: Any) -> None:
        for _ in range(low):
            self.seq(sub)
        if high is _C.MAXREPEAT:
            loop = self.emit(("split", 0, 0))
            self.seq(sub)
            self.emit(("jmp", loop))
            self.prog[loop] = ("split", loop + 1, len(self.prog))
            return
        optional: list[int] = []
        for _ in range(high - low):
            optional.append(self.emit(("split", 0, 0)))
            self.seq(sub)
        for split in optional:
            self.prog[split] = ("split", split + 1, len(self.prog))


@lru_cache(maxsize=256)
def _compile(pattern: str) -> tuple[Instr, ...] | None:
    if _P is None or len(pattern) > MAX_PATTERN:
        return None
    try:
        parsed = _P.parse(pattern)
    except Exception:  # re.error, or RecursionError on absurd nesting
        return None
    allowed = _C.SRE_FLAG_UNICODE | _C.SRE_FLAG_VERBOSE
    if parsed.state.flags & ~allowed:
        return None
    compiler = _Compiler()
    try:
        compiler.seq(parsed)
        compiler.emit(("match",))
    except (_Unsupported, RecursionError):
        return None
    return tuple(compiler.prog)


def _at(kind: Any, text: str, i: int) -> bool:
    c = _C
    n = len(text)
    if kind is c.AT_BEGINNING or kind is c.AT_BEGINNING_STRING:
        return i == 0
    if kind is c.AT_END:  # Python's $: the end, or just before a final newline
        return i == n or (i == n - 1 and text[i] == "\n")
    if kind is c.AT_END_STRING:
        return i == n
    before = i > 0 and _word(text[i - 1])
    after = i < n and _word(text[i])
    if kind is c.AT_BOUNDARY:
        return before != after
    if kind is c.AT_NON_BOUNDARY:
        return before == after and n > 0
    return False  # pragma: no cover - other kinds only appear with MULTILINE/LOCALE


def work(pattern: str, text: str) -> int | None:
    """The step bound of searching ``text`` for ``pattern``, or ``None`` when unsupported."""
    prog = _compile(pattern)
    return None if prog is None else (len(text) + 1) * len(prog)


def search(pattern: str, text: str, *, max_work: int = MAX_WORK) -> bool | None:
    """Whether ``re.search(pattern, text)`` would match, in bounded time.

    ``None`` when the pattern is unsupported or the bound exceeds ``max_work``.
    """
    prog = _compile(pattern)
    if prog is None or (len(text) + 1) * len(prog) > max_work:
        return None
    size = len(prog)
    seen = [-1] * size
    current: list[int] = []
    for i in range(len(text) + 1):
        # add the start state at every position: search, not match
        if _closure(prog, 0, text, i, seen, current):
            return True
        if i == len(text):
            break
        ch = text[i]
        following: list[int] = []
        for pc in current:
            if prog[pc][1](ch) and _closure(prog, pc + 1, text, i + 1, seen, following):
                return True
        current = following
    return False


def _closure(
    prog: tuple[Instr, ...], start: int, text: str, i: int, seen: list[int], out: list[int]
) -> bool:
    """Add the ``char`` states reachable from ``start`` at position ``i``; True on a match.

    ``seen`` marks states per position (the position ``i + 1`` stamps them), so every
    state enters ``out`` at most once per position.
    """
    stamp = i + 1
    stack = [start]
    while stack:
        pc = stack.pop()
        if seen[pc] == stamp:
            continue
        seen[pc] = stamp
        instr = prog[pc]
        tag = instr[0]
        if tag == "char":
            out.append(pc)
        elif tag == "match":
            return True
        elif tag == "jmp":
            stack.append(instr[1])
        elif tag == "split":
            stack.append(instr[2])
            stack.append(instr[1])
        elif _at(instr[1], text, i):
            stack.append(pc + 1)
    return False
