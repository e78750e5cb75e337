"""A call's number that misreads the conversation's numbers (:func:`check_misread`), or
stands in for one of the request's that no call uses (:func:`check_unwritten`).

A small model reads "12,5" (a comma as the decimal mark, as most of Europe writes it) as
12, or as 125, and calls ``multiply(a=12, b=4)``; the call passes grounding because 4 is
written. Digits only, so the same in every language: a number of a call that the
conversation does not write, but that is the part before a decimal mark, the part after
it, or both run together, while the decimal itself is used by no call of the turn, is
corrected (:data:`MISREAD_REASON`), and the model called again.

A comma also separates list items ("for 1,5 and 10 years"). Where the turn's calls use
both parts (1 and 5), the comma was a list and only the run-together 15 is a misreading.
Thousands read by their first groups are misreadings too (200 or 2250 for "200,000" or
"2,250,000"). Zero parts (``48.0``, ``0.5``, ``12.05``), and the 1 of "1,000", are left
alone: each is a default as often as a misreading; so is a text whose mark reads either
way by language ("200.000").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Final

from agentfsm.core.messages import ToolCall
from agentfsm.core.numbers import Decimal, decimals_in, digits_in, same
from agentfsm.guards._history import show_arguments
from agentfsm.guards.base import ACCEPT, Correction, CorrectionReason, Verdict

__all__ = ["MISREAD_REASON", "REASONS", "UNWRITTEN_REASON", "check_misread", "check_unwritten", "misread_parts"]

GUARD: Final = "grounding"
#: a call's number that is only part of a written decimal
MISREAD_REASON: Final[CorrectionReason] = "misread_number"
#: a call's number that nobody wrote, while a number of the request goes unused
UNWRITTEN_REASON: Final[CorrectionReason] = "unwritten_number"
#: the corrections after which the retry's numbers are held to the written ones
REASONS: Final = frozenset({MISREAD_REASON, UNWRITTEN_REASON})
_EXPONENT: Final = re.compile(r"(?:\^|\*\*)-?\d+")
#: how a number is scaled from another with a unit (10^k, minutes, hours, days, weeks, months)
_SCALES: Final = (10.0, 100.0, 1000.0, 1e4, 1e5, 1e6, 60.0, 3600.0, 24.0, 7.0, 12.0, 1440.0, 86400.0)


def misread_parts(decimal: Decimal, used: Sequence[float]) -> list[float]:
    """The numbers that read ``decimal`` wrongly, given the numbers the turn's calls ``used``."""
    if any(same(v, decimal.value) for v in used):
        return []  # read right somewhere: the rest is the model's own
    parts = [decimal.joined] if decimal.whole else []
    listed = decimal.comma and all(any(same(v, p) for v in used) for p in (decimal.whole, decimal.after))
    if not listed:
        # a 1 before thousands ("1,000") is a default as often as a misreading
        parts += [decimal.whole] if decimal.whole and not (decimal.thousands and abs(decimal.whole) == 1) else []
        parts += [decimal.after] if not decimal.zero_after else []
    return [p for p in parts if not same(p, decimal.value)]


def check_misread(
    calls: Sequence[ToolCall],
    values: Sequence[set[float | str]],
    before: set[float],
    conversation: str,
    grounded: Callable[[float | str], bool],
) -> Verdict:
    """Correct the first of ``calls`` (``values``: each one's numbers and strings;
    ``before``: the numbers of the turn's earlier calls) with a number that is only part
    of a written decimal (see the module), where every other value of that call is
    ``grounded``: a call made up as a whole is grounding's to judge, not a misreading."""
    numbers = [{v for v in vs if isinstance(v, float)} for vs in values]
    decimals = list(decimals_in(conversation))
    if not decimals:
        return ACCEPT
    written = digits_in(conversation)
    used = [*before, *(v for found in numbers for v in found)]
    for decimal in decimals:
        parts = misread_parts(decimal, used)
        for index, (call, found) in enumerate(zip(calls, numbers, strict=True)):
            bad = [v for v in found if any(same(v, p) for p in parts) and not any(same(v, w) for w in written)]
            if not bad or not all(grounded(v) for v in values[index] if v not in bad):
                continue
            meaning = f"{decimal.value:g}"
            if decimal.comma and not decimal.thousands and same(bad[0], decimal.joined):
                meaning += f", or {decimal.whole:g} and {decimal.after:g}"
            why = (f'but the conversation writes "{decimal.text}", which is {meaning}. Call {call.name} again '
                   "with the number as written.")
            return _correct(MISREAD_REASON, index, call, bad[0], why, f"misreads {decimal.text!r}")
    return ACCEPT


def check_unwritten(
    calls: Sequence[ToolCall],
    values: Sequence[set[float | str]],
    before: set[float],
    request: str,
    conversation: str,
    grounded: Callable[[float | str], bool],
) -> Verdict:
    """Correct the first of ``calls`` that holds a number nobody wrote (not in the
    ``conversation``, not a unit's scaling of a number in it) while a number of the latest
    ``request`` is used by no call of the turn (``before``: the numbers of its earlier
    calls, digits inside strings included), where the call is otherwise grounded (one of
    its other values is): ``add(10, 5)`` for "8 plus 5". Language-neutral: digits only.
    A 0 or a 1 is not judged (a default as often as made up), nor a power ("m/s^2").
    Grounding asks this only before the turn's first result."""
    written = digits_in(conversation)
    used = [abs(v) for v in (*before, *(v for vs in values for v in digits_of(vs)))]
    asked = digits_in(_EXPONENT.sub("", request))  # "m/s^2": a unit's power, not a value
    unused = [n for n in asked if n == n and not any(same(abs(n), u) for u in used)]
    if not unused:
        return ACCEPT
    for index, (call, found) in enumerate(zip(calls, values, strict=True)):
        # 0 and 1 are defaults ("from rest", a factor) as often as made up
        made = [v for v in found if isinstance(v, float) and v not in (0.0, 1.0) and not _near(v, written)]
        others = [v for v in found if not (isinstance(v, float) and v in made)]
        if not made or not any(grounded(v) for v in others):
            continue
        why = (f"which is not in the conversation, and leaves out {unused[0]:g}, which the user wrote. Call "
               f"{call.name} again with the user's numbers, or answer.")
        return _correct(UNWRITTEN_REASON, index, call, made[0], why, f"written nowhere; {unused[0]:g} unused")
    return ACCEPT


def _correct(reason: CorrectionReason, index: int, call: ToolCall, number: float, why: str, detail: str) -> Correction:
    """The correction of ``call`` (the ``index``-th of the reply) for its ``number``."""
    return Correction(
        guard=GUARD,
        reason=reason,
        message=f"{call.name}({show_arguments(call)}) has {number:g}, {why}",
        call_index=index,
        detail=f"call {index}: {call.name}: {number:g} {detail}",
    )


def digits_of(values: Iterable[float | str]) -> list[float]:
    """A call's numbers, and the numbers its strings write ("2023-03-20", "7 pm")."""
    return [n for v in values for n in ([v] if isinstance(v, float) else digits_in(v))]


def _near(value: float, written: set[float]) -> bool:
    """Whether ``value`` is written, or is a written number scaled by a unit (120 minutes
    for 2 hours, 0.15 for 15 %)."""
    return any(
        same(value, w) or (w and any(same(value, w * k) or same(value, w / k) for k in _SCALES)) for w in written
    )
