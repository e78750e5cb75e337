"""A tool fed its own result back (:func:`fed_back_again`).

Once results are back, a small model may call the tool it just called on that call's
result, every other argument unchanged, and then on that result, and on: "50 US dollars
in euros" became ``convert_currency(50, "USD", "EUR")``, then ``convert_currency(46.0,
"USD", "EUR")`` on its result, and so on until the run's step limit. Each call brings a
value new to the turn (the latest result), so the stale rule lets it through.

A request may ask for it ("times 2, then the result times 2 again"): then the request
writes the value kept unchanged once for each use of it. So feeding a tool its own result
is a feedback loop, and :mod:`agentfsm.policy.grounding` treats it as a stale call (the
results so far, and the answer):

- once, when the result is that one number ("46.0 EUR"; not a page of a file whose line
  numbers hold the next page's offset) and an argument kept unchanged is written in the
  latest request fewer times than the chain uses it (``convert_currency(46.0, "USD",
  "EUR")`` after "Wie viel sind 50 US-Dollar in Euro?": "USD" is written nowhere; in the
  last full table and in requests outside the suite, every such call was one);
- a second time in a row, whatever the request writes.

A tool whose only argument is the result (``convert_km_to_miles(62.14)`` after
``convert_km_to_miles(100)``), or whose kept arguments are booleans, lists or objects
(nothing a request writes), keeps nothing to count: only its second time in a row is a
loop. Digits and argument values copied verbatim only, so the same in every language.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentfsm.core.messages import Message, ToolCall
from agentfsm.core.numbers import NUMBER, digits_in, same, to_float
from agentfsm.guards._history import latest_request
from agentfsm.guards.loops import rounds

__all__ = ["fed_back_again"]


def _fed(call: ToolCall, earlier: ToolCall, numbers: set[float]) -> bool:
    """Whether ``call`` is ``earlier`` with one number argument replaced by one of
    ``numbers`` (those ``earlier``'s result writes)."""
    if call.name != earlier.name or set(call.arguments) != set(earlier.arguments):
        return False
    changed = [k for k, v in call.arguments.items() if v != earlier.arguments[k]]
    if len(changed) != 1:
        return False
    value = call.arguments[changed[0]]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return any(same(float(value), n) for n in numbers)


def _countable(value: object) -> bool:
    """A value a request can write: a number, or a string that is not blank (a boolean,
    a list or an object is the schema's shape, not something written)."""
    return (isinstance(value, int | float) and not isinstance(value, bool)) or (isinstance(value, str) and bool(value.strip()))


def _written(value: float | str, request: str) -> int:
    """How many times ``request`` (lowercased) writes ``value``: a number in digits, a
    string verbatim (case aside)."""
    if isinstance(value, str):
        return request.count(value.strip().lower())
    return sum(same(to_float(m.group()), float(value)) for m in NUMBER.finditer(request))


def _asked(call: ToolCall, earlier: ToolCall, history: Sequence[Message]) -> bool:
    """Whether the latest request writes every argument ``call`` keeps unchanged from
    ``earlier`` (the call whose result it takes) twice, once for each of the two calls."""
    request = latest_request(history).lower()
    kept = [v for k, v in call.arguments.items() if v == earlier.arguments[k] and _countable(v)]
    return all(_written(v, request) >= 2 for v in kept)


def fed_back_again(history: Sequence[Message], call: ToolCall) -> bool:
    """Whether ``call`` feeds its tool's latest result back into it where the request
    does not ask for it (see the module): a second time in a row in this user turn, or
    once, when the result is that one number, with an unchanged argument the request
    writes fewer times than the chain uses it."""
    made = [(c, results.get(c.id)) for calls, results in rounds(history) for c in calls]
    chain = [call]
    for earlier, got in reversed(made):
        if earlier.name != call.name:
            continue
        # the numbers the result writes, read once; no result: nothing was fed
        numbers = digits_in(got.content) if got is not None else set()
        if not _fed(chain[-1], earlier, numbers):
            break
        chain.append(earlier)
        # once, where the result is that one number ("46.0 EUR"): the tool's output taken as
        # its input, not one number of a longer result (a page of a file, whose line
        # numbers hold the next page's offset)
        if len(chain) == 2 and len(numbers) == 1 and not _asked(call, earlier, history):
            return True
        if len(chain) == 3:
            return True
    return False
