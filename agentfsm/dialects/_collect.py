"""What a scan found: prose, calls, problems, in order, and the parsed reply they make.

:class:`~agentfsm.dialects._scan.Scanner` finds where prose and action blocks begin and
end; each piece it finds comes here (:meth:`Collected.prose`, :meth:`Collected.block`),
where a block is decoded by its format and its calls are numbered; :meth:`Collected.result`
builds the :class:`~agentfsm.core.parsed.ParsedReply`. A stream takes :attr:`Collected.events`
as they come.
"""

from __future__ import annotations

from typing import Any, Final, TypeVar

from pydantic import BaseModel

from agentfsm.core.messages import ToolCall
from agentfsm.core.parsed import ParsedReply, Problem
from agentfsm.dialects._decode import Block, Context, Outcome, problem
from agentfsm.dialects._json import MAX_REPAIR_CHARS, MISSING, RepairBudget, out_of_range
from agentfsm.dialects._registry import FORMAT_OF_BLOCK
from agentfsm.dialects.xml_function import STRAY_CLOSER

__all__ = ["CALL", "TEXT", "Collected", "DataScan"]

_M = TypeVar("_M", bound=BaseModel)
_set = object.__setattr__
TEXT: Final = 0
CALL: Final = 1


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


class Collected:
    """The pieces of one scan, in order (see the module)."""

    __slots__ = (
        "actions", "broken", "calls", "ctx", "data", "events", "final", "held", "problems", "prose_at",
        "stray", "stream", "strict", "tail", "texts", "truncated", "xml_from",
    )  # fmt: skip

    def __init__(self, ctx: Context, data: DataScan | None, stream: bool, strict: bool) -> None:
        self.ctx = ctx
        self.data = data
        #: keep ``events`` (a whole-text parse only needs the result)
        self.stream = stream
        self.strict = strict
        #: ``(TEXT, str)`` and ``(CALL, ToolCall)`` in order, since last taken
        self.events: list[tuple[int, Any]] = []
        self.texts: list[str] = []
        self.calls: list[ToolCall] = []
        self.problems: list[Problem] = []
        self.truncated = False
        self.final: Any = MISSING
        self.prose_at: int | None = None
        self.actions: list[str] = []
        #: an action could not be read: where its text ends (and what follows begins) is a
        #: guess, so no later action becomes a call
        self.broken = False
        #: the index of the first call from an XML block (None: none yet); from there on,
        #: a stream's call events wait for the end (``held``), when a stray XML closer in
        #: the prose (``stray``; ``tail`` spans prose pieces) refuses them all
        self.xml_from: int | None = None
        self.held: list[tuple[int, Any]] = []
        self.stray = False
        self.tail = ""

    def prose(self, text: str, at: int) -> None:
        """Prose ``text`` that begins at offset ``at`` of the reply."""
        self.watch(text)
        if self.prose_at is None and not text.isspace():
            self.prose_at = at + len(text) - len(text.lstrip())
        self.texts.append(text)
        if self.stream:
            self.events.append((TEXT, text))

    def block(self, block: Block) -> None:
        fmt = FORMAT_OF_BLOCK[block.kind]
        data = self.data
        if data is not None:  # each block of data has the repair budget of a reply of its own
            self.ctx.budget = RepairBudget(lossy=True)
        out: Outcome = fmt.decode(block, self.ctx)
        if data is not None:
            data.repaired += MAX_REPAIR_CHARS - self.ctx.budget.remaining
            if data.repaired > data.budget and data.incomplete_from is None:
                data.incomplete_from = block.start  # no more repairs: what follows is unread
                self.ctx.budget = RepairBudget(remaining=0, calls=0)
        if out.prose and fmt.closer and block.state == "closed":
            body = block.raw[block.body : block.body_end]
            # a JSON body holding its own closer that cannot be read: cut there, probably
            self.broken = self.broken or (body.lstrip()[:1] in ("{", "[") and fmt.closer in body)
        if out.prose:
            self.texts.append(block.raw)
            self.watch(block.raw)
            if self.stream:
                self.events.append((TEXT, block.raw))
            if self.prose_at is None and not block.raw.isspace():
                self.prose_at = block.start
            return
        self.actions.append(block.kind)
        if out.text:
            self.texts.append(out.text)
            if self.stream:
                self.events.append((TEXT, out.text))
        for name, args in out.calls if data is None else ():  # data: a copy writes another number
            number = out_of_range(args)
            if number is not None:  # as JSON it would be another value (null) or no JSON at all
                message = (
                    f"{number} in the arguments of {name} is out of range: write finite "
                    "numbers, and integers within 64 bits; no action of this block was run"
                )
                out.problems.append(problem("invalid_json", message, block.start, fmt.sources[block.kind]))
                out.calls = []
                break
        if self.broken and out.calls and data is None:
            message = "an action after one that could not be read; it was not run"
            out.problems.append(problem("invalid_json", message, block.start, fmt.sources[block.kind]))
            out.calls = []
        self.broken = self.broken or any(p.code == "invalid_json" and p.rejected for p in out.problems)
        if block.kind == "xml" and self.xml_from is None:
            self.xml_from = len(self.calls)
        for name, args in out.calls:
            values = {"id": f"call_{len(self.calls)}", "name": name, "arguments": args}
            call = _construct(ToolCall, values)
            self.calls.append(call)
            if self.stream:
                (self.events if self.xml_from is None else self.held).append((CALL, call))
        self.problems.extend(out.problems)
        self.truncated = self.truncated or out.truncated
        if out.final is not MISSING and self.final is MISSING:
            self.final = out.final

    def watch(self, prose: str) -> None:
        """Note a stray XML closer in prose (a piece may end inside one: keep a tail)."""
        if self.stray:
            return
        text = self.tail + prose
        if "</" in text and STRAY_CLOSER.search(text) is not None:
            self.stray = True
        self.tail = text[-12:]

    def settle_xml(self) -> None:
        """At the end: the calls from the first XML block on, refused or released."""
        start = self.xml_from
        if start is None:
            return
        if self.stray and start < len(self.calls) and self.data is None:
            message = (
                "an XML parameter value held </parameter> or </function> (a closer followed in the "
                "text): no call from the first <tool_call> on was run; write such a value in a JSON "
                "object body, <function=NAME>{...}</function>"
            )
            self.problems.append(
                Problem.model_construct(
                    code="malformed_action", message=message, position=None, rejected=True, source="xml-function"
                )
            )
            del self.calls[start:]
        elif self.stream:
            self.events.extend(self.held)
        self.held = []
        self.xml_from = None

    def result(self) -> ParsedReply:
        """The parsed reply (call after the final feed)."""
        calls, final, problems = self.calls, self.final, self.problems
        if self.strict:
            one_object = len(self.actions) == 1 and self.actions[0] == "object"
            if not one_object or self.prose_at is not None:
                what = "text outside the one JSON object" if self.actions else "no JSON object"
                problems = [
                    *problems,
                    Problem.model_construct(
                        code="extra_text",
                        message=f"json-protocol (strict): the reply must be one JSON object; found {what}",
                        position=self.prose_at if self.prose_at is not None else 0,
                        rejected=True,
                        source="json-protocol",
                    ),
                ]
                calls, final = [], MISSING
        content = "".join(self.texts).strip()
        values = {
            "content": content or None,
            "tool_calls": tuple(calls),
            "problems": tuple(problems),
            "truncated": self.truncated,
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
