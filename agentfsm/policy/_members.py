"""A listed value written where the user named another of the same list (:func:`check_member`).

A small model offered a parameter with an ``enum`` writes its first member whatever the
request says: ``get_current_weather(unit="celsius")`` for "weather today in Boston in
fahrenheit?", and then, as a further call, the member the user named. The test is a
verbatim copy, the way grounding reads strings, so it reads the same in every language:
a string value of a call that its schema lists (an ``enum`` member, at any depth of
objects) is misread where the latest request does not write it while it writes exactly
one other member of that list, as a whole word (case folded), and no other value of the
call is that member. Two members written ("convert json to xml") tell nothing; members
without a letter (``"1"``, ``"2"``: numbers are the number checks') or shorter than three
characters (``"in"``, ``"am"``; a wide character, CJK, kana or Hangul, counts two: "華氏"
is read) are not read: they occur as other words. In a script of wide characters, which
runs words and particles together, a member written anywhere counts ("華氏で").
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping, Sequence
from functools import lru_cache
from typing import Any, Final

from agentfsm.core.messages import ToolCall, ToolSpec
from agentfsm.core.words import runs_together, wide
from agentfsm.guards._history import show_arguments
from agentfsm.guards.base import ACCEPT, Correction, CorrectionReason, Verdict

__all__ = ["MEMBER_REASON", "check_member", "held_to_named", "misread_member"]

GUARD: Final = "grounding"
#: a listed value written where the request names another member of the list
MEMBER_REASON: Final[CorrectionReason] = "misread_member"
_SHORTEST: Final = 3


def check_member(calls: Sequence[ToolCall], schemas: Mapping[str, Any], request: str) -> Verdict:
    """Correct the first of ``calls`` whose listed value the ``request`` does not write
    while it writes exactly one other member of the list (see the module)."""
    for index, call in enumerate(calls):
        found = misread_member(call, schemas.get(call.name), request)
        if found is None:
            continue
        path, value, named = found
        name = ".".join(path)
        return Correction(
            guard=GUARD,
            reason=MEMBER_REASON,
            message=(f"{call.name}({show_arguments(call)}) has {name}={value!r}, but the user wrote "
                     f"{named!r}. Call {call.name} again with the user's {name}, or answer."),
            call_index=index,
            detail=f"call {index}: {call.name}: {name}={value!r}; the request names {named!r}",
        )
    return ACCEPT


def misread_member(call: ToolCall, schema: Any, request: str) -> tuple[tuple[str, ...], str, str] | None:
    """The first listed value of ``call`` that ``request`` names another member for:
    (its path of property names, the value, the member named); None when there is none."""
    text = request.casefold()
    written = {v.casefold() for v in _strings(call.arguments)}
    for path, value, members in _listed(call.arguments, schema, ()):
        if _names(text, value):
            continue
        named = [m for m in members if m.casefold() != value.casefold() and _names(text, m)]
        if len(named) == 1 and named[0].casefold() not in written:
            return path, value, named[0]
    return None


def held_to_named(tools: Sequence[ToolSpec], calls: Sequence[ToolCall], request: str) -> tuple[ToolSpec, ...]:
    """``tools`` for the retry after :data:`MEMBER_REASON`: in the tool of each refused
    call, the misread member's list held to the member the request names (the grammar
    holds a misread number to the written ones the same way); the other tools as they are."""
    held: dict[str, ToolSpec] = {}
    for call in calls:
        spec = held.get(call.name) or next((t for t in tools if t.name == call.name), None)
        found = misread_member(call, spec.parameters, request) if spec is not None else None
        if spec is None or found is None:
            continue
        path, _, named = found
        parameters = copy.deepcopy(spec.parameters)
        node: Any = parameters
        for name in path:
            node = node["properties"][name]
        node["enum"] = [named]
        held[call.name] = spec.model_copy(update={"parameters": parameters})
    return tuple(held.get(t.name, t) for t in tools)


def _listed(arguments: Any, schema: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], str, list[str]]]:
    """(path, value, members) for each string value of ``arguments`` whose property in
    ``schema`` lists string members, through nested objects (not arrays)."""
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(arguments, dict) or not isinstance(props, dict):
        return
    for name, value in arguments.items():
        spec = props.get(name)
        if not isinstance(spec, dict):
            continue
        if isinstance(value, dict):
            yield from _listed(value, spec, (*path, name))
            continue
        members = spec.get("enum")
        if isinstance(value, str) and isinstance(members, list):
            readable = [m for m in members if isinstance(m, str) and _readable(m)]
            if len(readable) >= 2 and _readable(value):
                yield (*path, name), value, readable


def _readable(member: str) -> bool:
    return wide(member.strip()) >= _SHORTEST and any(c.isalpha() for c in member)


def _names(text: str, member: str) -> bool:
    """Whether ``text`` (case folded) writes ``member`` as a whole word."""
    return _word(member.casefold()).search(text) is not None


@lru_cache(maxsize=512)
def _word(member: str) -> re.Pattern[str]:
    """``member`` as a whole word; a member in a script that runs words and particles
    together (CJK, kana, Hangul, Thai ...: :func:`~agentfsm.core.words.runs_together`)
    anywhere ("華氏で")."""
    if runs_together(member):
        return re.compile(re.escape(member.strip()))
    return re.compile(r"(?<![^\W_])" + re.escape(member.strip()) + r"(?![^\W_])")


def _strings(arguments: Any) -> Iterator[str]:
    """Every string in ``arguments``."""
    if isinstance(arguments, dict):
        for value in arguments.values():
            yield from _strings(value)
    elif isinstance(arguments, list):
        for item in arguments:
            yield from _strings(item)
    elif isinstance(arguments, str):
        yield arguments
