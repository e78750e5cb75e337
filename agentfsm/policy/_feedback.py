"""A tool fed its own result again and again (:func:`fed_back_again`).

Once results are back, a small model may call the tool it just called on that call's
result, every other argument unchanged, and then on that result, and on: "50 US dollars
in euros" became ``convert_currency(50, "USD", "EUR")``, then ``convert_currency(46.0,
"USD", "EUR")`` on its result, and so on until the run's step limit. Each call brings a
value new to the turn (the latest result), so the stale rule lets it through. Once is a
request as often as not ("times 2, then the result times 2 again"); a second time in a
row is a feedback loop, and :mod:`agentfsm.policy.grounding` treats it as a stale call
(the results so far, and the answer). Digits and argument values only, so the same in
every language.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentfsm.core.messages import Message, ToolCall
from agentfsm.core.numbers import digits_in, same
from agentfsm.guards.loops import rounds

__all__ = ["fed_back_again"]


def _fed(call: ToolCall, earlier: ToolCall, result: str | None) -> bool:
    """Whether ``call`` is ``earlier`` with one number argument replaced by a number
    that ``earlier``'s ``result`` writes."""
    if result is None or call.name != earlier.name or set(call.arguments) != set(earlier.arguments):
        return False
    changed = [k for k, v in call.arguments.items() if v != earlier.arguments[k]]
    if len(changed) != 1:
        return False
    value = call.arguments[changed[0]]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return any(same(float(value), n) for n in digits_in(result))


def fed_back_again(history: Sequence[Message], call: ToolCall) -> bool:
    """Whether ``call`` feeds its tool's latest result back into it a second time in a
    row in this user turn (see the module)."""
    made = [(c, results.get(c.id)) for calls, results in rounds(history) for c in calls]
    chain = [call]
    for earlier, got in reversed(made):
        if earlier.name != call.name:
            continue
        if not _fed(chain[-1], earlier, got.content if got is not None else None):
            break
        chain.append(earlier)
        if len(chain) == 3:
            return True
    return False
