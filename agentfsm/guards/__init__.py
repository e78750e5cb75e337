"""Guards: pure checks on a parsed reply, each returning a verdict.

One module per guard, each with a ``check`` function:

- :mod:`~agentfsm.guards.json_valid`: an action that could not be read -> resend valid JSON;
- :mod:`~agentfsm.guards.refusal`: "I don't have tools", refusals, limitations, deflections
  (the words are a language policy's: :mod:`agentfsm.policy.refusal`);
- :mod:`~agentfsm.guards.tool_choice`: a forced call missing, the wrong tool, calls under ``none``;
- :mod:`~agentfsm.guards.empty`: a reply with no call and no text;
- :mod:`~agentfsm.guards.answer_schema`: a final answer that is not the JSON of the
  client's output schema (the engine applies it to answers);
- :mod:`~agentfsm.guards.unknown_tool`: a tool name that was not offered;
- :mod:`~agentfsm.guards.schema`: arguments that do not match the tool's JSON Schema;
- :mod:`~agentfsm.guards.placeholder`: arguments copied from the contract's example;
- :mod:`~agentfsm.guards.injection`: a call copied from action text inside a tool result
  or user content (data, not the model's own decision);
- :mod:`~agentfsm.guards.budget`: corrections per turn, counted from the history, each stricter;
- :mod:`~agentfsm.guards.repeated_call`: the last round's call again -> told once per round;
- :mod:`~agentfsm.guards.loops`: the same call after the same result N times -> stop.

:func:`run_guards` runs the reply guards in this fixed order, the first verdict that
is not an accept wins:

1. ``json_valid``: an unreadable action is the first thing to fix;
2. ``refusal``: a reply without calls that refuses gets the refusal wording, which names
   the tools (it runs before ``tool_choice`` so that the reason logged is ``refusal``);
3. ``tool_choice``: a missing forced call, a call to another tool than the named one,
   or any call under ``none`` (before the argument checks, which would be moot);
4. ``empty``: a reply with no call and no text (never passed on as an empty answer);
5. ``unknown_tool``;
6. ``schema``;
7. ``placeholder``: a well-formed call whose values are the example's placeholders;
8. ``injection``: a well-formed call that repeats an action found in the conversation's
   data (last: a call that is wrong anyway gets the more specific correction).

The engine then applies :mod:`~agentfsm.guards.repeated_call` and
:mod:`~agentfsm.guards.loops` to accepted calls, and :mod:`~agentfsm.guards.budget` to
every correction, since they read the history; then the run's language policies
(:mod:`agentfsm.policy`), which no guard here imports.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from agentfsm.core._types import DialectName
from agentfsm.core.choice import ToolChoice
from agentfsm.core.parsed import ParsedReply
from agentfsm.guards import (
    budget,
    empty,
    injection,
    json_valid,
    loops,
    placeholder,
    refusal,
    repeated_call,
    schema,
    tool_choice,
    unknown_tool,
)
from agentfsm.guards import tool_choice as _choice  # the name `tool_choice` is also a parameter
from agentfsm.guards.base import ACCEPT, Accept, Correction, Stop, Verdict
from agentfsm.guards.refusal import RefusalMatcher
from agentfsm.core.messages import ToolSpec

__all__ = [
    "ACCEPT",
    "Accept",
    "Correction",
    "GUARD_ORDER",
    "Stop",
    "Verdict",
    "budget",
    "empty",
    "injection",
    "json_valid",
    "loops",
    "placeholder",
    "refusal",
    "repeated_call",
    "run_guards",
    "schema",
    "tool_choice",
    "unknown_tool",
]

#: the reply guards, in the order :func:`run_guards` runs them
GUARD_ORDER: tuple[str, ...] = (
    json_valid.GUARD,
    refusal.GUARD,
    _choice.GUARD,
    empty.GUARD,
    unknown_tool.GUARD,
    schema.GUARD,
    placeholder.GUARD,
    injection.GUARD,
)


def run_guards(
    parsed: ParsedReply,
    *,
    tools: Sequence[ToolSpec],
    tool_choice: ToolChoice,
    dialect_name: DialectName,
    example: str = "",
    source: str = "",
    injected: injection.DataActions = injection.NO_DATA_ACTIONS,
    refusals: RefusalMatcher | None = None,
) -> Verdict:
    """Run the reply guards in :data:`GUARD_ORDER`; the first non-accept verdict wins.

    ``source`` is the conversation's text, lowercased (the ``placeholder`` guard
    accepts a value the conversation contains); ``injected`` are the actions found in
    its data (:func:`~agentfsm.guards.injection.data_actions`); ``refusals`` reads a
    refusal for the ``refusal`` guard (the run's language policies': without one, no
    reply is read as a refusal). When all accept, the notes they left (a schema not validated, a soft deflection
    accepted) are joined into the returned :class:`Accept`'s ``detail``.
    """
    checks: tuple[Callable[[], Verdict], ...] = (
        lambda: json_valid.check(parsed, dialect_name, example=example),
        lambda: refusal.check(parsed, tool_choice, tools, dialect_name=dialect_name, match=refusals),
        lambda: _choice.check(
            parsed, tool_choice, tools, dialect_name=dialect_name, example=example
        ),
        lambda: empty.check(parsed, tool_choice, dialect_name),
        lambda: unknown_tool.check(parsed, tools),
        lambda: schema.check(parsed, tools),
        lambda: placeholder.check(parsed, tools, tool_choice, source),
        lambda: injection.check(parsed, injected),
    )
    notes: list[str] = []
    for run in checks:
        verdict = run()
        if not isinstance(verdict, Accept):
            return verdict
        if verdict.detail:
            notes.append(f"{verdict.guard}: {verdict.detail}" if verdict.guard else verdict.detail)
    return Accept(guard="guards", detail="; ".join(notes)) if notes else ACCEPT
