"""From one action block's raw text to calls, problems and the text it leaves.

A block is prose again (kept in the content, no problem) when it turns out not to be
an action: bare JSON or a plain json fence without a call's shape, a pythonic list that
does not parse, a name that is not a known tool. What differs between formats (the
source name, which kinds are lenient, the message for a cut block) comes from the
block's :class:`~agentfsm.dialects._format.Format`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Any, Protocol

from agentfsm.dialects._calls import NAME_KEYS, Found, find_calls, plain_call
from agentfsm.dialects._json import DECODER, JSON_WS, MISSING, Read, RepairBudget, read_json
from agentfsm.dialects._shape import MAX_DEPTH, deeper_than, unclosed
from agentfsm.core.parsed import Problem, ProblemCode
from agentfsm.dialects.json_protocol import THOUGHT_CAP

__all__ = ["Block", "Context", "FormatFacts", "Outcome", "decode_json", "problem", "settled", "too_deep"]


class FormatFacts(Protocol):
    """What decoding reads of a block's :class:`~agentfsm.dialects._format.Format`."""

    @property
    def sources(self) -> Mapping[str, str]:
        """Every block kind the format reads -> the source its problems carry."""
        ...

    @property
    def lenient(self) -> frozenset[str]:
        """Kinds that are prose again when they hold no call."""
        ...

    @property
    def cut(self) -> Mapping[str, str]:
        """Kind -> what a cut-off block is, in the problem message."""
        ...


@dataclass(slots=True)
class Block:
    """One action block as read: its kind, where it is, its raw text."""

    kind: str
    #: offset of the block in the reply
    start: int
    raw: str
    #: where the payload starts and ends, as indexes into ``raw``
    body: int = 0
    body_end: int | None = None
    #: the tool name written before the payload (command, Mistral)
    name: str | None = None
    #: the payload already decoded while reading, else MISSING
    value: Any = MISSING
    #: ``closed``, ``truncated`` (the reply ended inside it) or ``limit`` (too large)
    state: str = "closed"


@dataclass(slots=True)
class Context:
    """What decoding needs besides the block."""

    known: frozenset[str] | None
    protocol: bool
    #: each known tool's parameter schema (formats whose values are raw text read types there)
    schemas: Mapping[str, Any] | None = None
    budget: RepairBudget = field(default_factory=RepairBudget)


@dataclass(slots=True)
class Outcome:
    """What one block yields."""

    #: the block is plain text after all
    prose: bool = False
    #: text the block adds to the content (a json-protocol thought or final answer)
    text: str = ""
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    final: Any = MISSING
    truncated: bool = False
    #: the block had json-protocol's shape
    protocol: bool = False


def problem(
    code: ProblemCode, message: str, position: int | None, source: str, rejected: bool = True
) -> Problem:
    """A problem found in a block (built without validation: the parser made its fields)."""
    return Problem.model_construct(
        code=code, message=message, position=position, rejected=rejected, source=source
    )


def settled(block: Block, ctx: Context, fmt: FormatFacts) -> Outcome | None:
    """The outcome of a block too large or cut off (never a call); ``None`` for a closed one."""
    source = fmt.sources[block.kind]
    if block.state == "limit":
        message = f"a {source} block larger than the parser reads; the rest of the reply is dropped"
        return Outcome(problems=[problem("limit_exceeded", message, block.start, source)])
    if block.state == "truncated" and not ctx.budget.lossy:  # data: read as a copy completes it
        final = _truncated_final(block, ctx)
        if final is not None:
            return final
        what = fmt.cut.get(block.kind, "unterminated JSON")
        message = f"cut off: {what}; it was not run"
        return Outcome(truncated=True, problems=[problem("truncated", message, block.start, source)])
    return None


def too_deep(calls: list[tuple[str, dict[str, Any]]], block: Block, source: str) -> Outcome | None:
    """A ``limit_exceeded`` outcome when some call's arguments nest deeper than MAX_DEPTH."""
    if any(deeper_than(args) for _, args in calls):
        message = f"the arguments nest deeper than {MAX_DEPTH} levels"
        return Outcome(problems=[problem("limit_exceeded", message, block.start, source)])
    return None


def decode_json(block: Block, ctx: Context, fmt: FormatFacts) -> Outcome:
    """Decode ``block``'s JSON payload into calls (or prose), recording what was repaired or rejected."""
    out = settled(block, ctx, fmt)
    if out is not None:
        return out
    source = fmt.sources[block.kind]
    lenient = block.kind in fmt.lenient
    if block.name is not None:
        return _named(block, ctx, source)
    read = _read(block, ctx)
    if not read.ok:
        if lenient and read.code != "limit_exceeded" and not _broken_action(block, ctx):
            return Outcome(prose=True)
        position = block.start + block.body + (read.position or 0)
        return Outcome(problems=[problem(read.code or "invalid_json", read.message, position, source)])
    quick = None if read.repaired else plain_call(read.value)
    if quick is not None and (not lenient or ctx.known is None or quick[0] in ctx.known):
        return Outcome(calls=[quick])
    found = find_calls(read.value, loose=not lenient, known=ctx.known, budget=ctx.budget)
    if found is None:
        if lenient:
            return Outcome(prose=True)
        message = "the action has no tool name (expected a \"tool\" or \"name\" key)"
        return Outcome(problems=[problem("malformed_action", message, block.start, source)])
    out = _outcome(found, block, ctx, "json-protocol" if found.protocol else source)
    if read.repaired and (out.calls or out.final is not MISSING):
        out.problems.insert(0, problem("repaired_json", read.repaired, block.start, source, False))
    return out


#: a json-protocol object's opening key, or a call's name key with the name written
_PROTOCOL_OPENING = re.compile(r'\s*\{\s*"(?:action|final)"\s*:')
_NAMED = re.compile(r'"(?:%s)"\s*:\s*"([^"\\]{1,200})"' % "|".join(NAME_KEYS))


def _broken_action(block: Block, ctx: Context) -> bool:
    """Whether a bare block that cannot be read has an action's shape: it opens as a
    json-protocol object (``{"action": ...``, ``{"final": ...``), names a known tool under a
    call's name key, or is JSON but for ``NaN`` or ``Infinity`` and then reads as a call or
    an answer. Such a block is a broken action the model is asked to write again, not prose
    that would reach the user as the action's raw text. The keys are the formats' own, so
    no language is read."""
    body = block.raw[block.body : block.body_end]
    if _PROTOCOL_OPENING.match(body):
        return True
    if ctx.known and any(m.group(1) in ctx.known for m in _NAMED.finditer(body)):
        return True
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return False
    found = find_calls(value, loose=False, known=ctx.known, budget=RepairBudget())
    return found is not None and bool(found.calls or found.final is not MISSING)


_FINAL_OPENING = re.compile(r'\s*\{\s*"final"\s*:')


def _truncated_final(block: Block, ctx: Context) -> Outcome | None:
    """A json-protocol final answer cut off (by the token limit, say) keeps the text so far,
    as a chat API returns a reply cut at its length limit; an action never does."""
    end = len(block.raw) if block.body_end is None else block.body_end
    if not _FINAL_OPENING.match(block.raw, block.body, end):
        return None
    try:
        value = DECODER.decode(_closed(block.raw[block.body : end]))
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict) or "action" in value or deeper_than(value):
        return None
    found = find_calls(value, loose=False, known=ctx.known, budget=ctx.budget)
    if found is None or found.final is MISSING or found.calls:
        return None
    out = _outcome(found, block, ctx, "json-protocol")
    message = "the final answer was cut off before its end; the text so far is kept"
    out.problems.insert(0, problem("truncated_final", message, block.start, "json-protocol", False))
    return out


def _closed(text: str) -> str:
    """``text`` (JSON cut off mid-way) with its open string, arrays and objects closed.

    A cut after a key, a colon or a comma still fails to decode; so be it.
    """
    left = unclosed(text)
    if left.escape:
        text = text[:-1]
    return text + ('"' if left.string is not None else "") + left.closers


def _read(block: Block, ctx: Context) -> Read:
    """Read the payload, without copying it out of the block when it is valid JSON."""
    raw = block.raw
    if block.value is not MISSING:
        return read_json(raw, ctx.budget, block.value)
    end = len(raw) if block.body_end is None else block.body_end
    try:
        value, stop = DECODER.raw_decode(raw, JSON_WS.match(raw, block.body, end).end())  # type: ignore[union-attr]
    except (ValueError, RecursionError):
        pass
    else:
        if stop <= end and JSON_WS.match(raw, stop, end).end() == end:  # type: ignore[union-attr]
            return read_json(raw, ctx.budget, value)
    return read_json(raw[block.body : end], ctx.budget)


def _named(block: Block, ctx: Context, source: str) -> Outcome:
    name = block.name or ""
    if not block.raw[block.body : block.body_end].strip():
        return Outcome(calls=[(name, {})])
    read = _read(block, ctx)
    if not read.ok:
        position = block.start + block.body + (read.position or 0)
        return Outcome(problems=[problem(read.code or "invalid_json", read.message, position, source)])
    if not isinstance(read.value, dict):
        message = f"the arguments of {name!r} must be a JSON object"
        return Outcome(problems=[problem("malformed_action", message, block.start, source)])
    out = Outcome(calls=[(name, read.value)])
    if read.repaired:
        out.problems.append(problem("repaired_json", read.repaired, block.start, source, False))
    return out


def _outcome(found: Found, block: Block, ctx: Context, source: str) -> Outcome:
    out = Outcome(calls=found.calls, protocol=found.protocol)
    for code, message, rejected in found.notes:
        out.problems.append(problem(code, message, block.start, source, rejected))
    if found.final is not MISSING:
        out.final = found.final
        out.text = found.final if isinstance(found.final, str) else _dumps(found.final)
    elif isinstance(found.thought, str):
        thought = found.thought
        if ctx.protocol and len(thought) > THOUGHT_CAP:
            message = f"the thought has {len(thought)} characters; it was cut to {THOUGHT_CAP}"
            out.problems.append(problem("thought_too_long", message, block.start, source, False))
            thought = thought[:THOUGHT_CAP]
        out.text = thought
    if not out.calls and out.final is MISSING and not out.problems:
        message = "the action block holds no call"
        out.problems.append(problem("malformed_action", message, block.start, source))
    return out


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
