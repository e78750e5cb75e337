"""The conversation state, derived from the message history alone.

:func:`derive_state` is a pure function of the history. It reads our own
:mod:`agentfsm.core.messages` models and the wire shapes as they arrive (OpenAI chat
messages, Anthropic messages, and dumps of our models), in one pass, in time linear
in the size of the history; it reads back from the end only as far as the state
depends on, usually the latest step (see ``_decided``). Nothing else is needed: a
stateless proxy and a long-running agent derive the same state from the same history.

States (:class:`State`; the values are the names written in transcripts):

- ``first-decision``: the last message is a user turn.
- ``tool-emitted``: the engine has parsed a reply into calls and not dispatched them
  yet. This state exists only inside the engine and in transcripts; a stored history
  never yields it (an assistant message whose calls lack results is
  ``awaiting-result``).
- ``awaiting-result``: some call of the latest assistant tool turn has no result.
- ``result-received``: every call of that turn has its result; the model decides.
- ``final``: the latest assistant reply carries no call.

Having tool history never makes another call mandatory: only ``tool_choice`` does.

How messages are read:

- System (and OpenAI ``developer``) messages are ignored, and so is any role we
  do not know, so that a new wire role never breaks a running proxy.
- A user message is a *real user turn*, unless it is a correction (a
  :class:`~agentfsm.core.messages.UserMessage` with ``correction`` set, or its dump), or
  it is made only of Anthropic ``tool_result`` blocks (a tool-result turn). A user
  message that mixes ``tool_result`` blocks with other blocks applies its results
  first and then counts as a real user turn.
- Calls come from ``tool_calls`` (ours or OpenAI's), OpenAI's legacy
  ``function_call``, and Anthropic ``tool_use`` blocks. Results come from ``tool``
  messages (``tool_call_id`` or our ``result.call_id``), legacy ``function``
  messages, and ``tool_result`` blocks (``tool_use_id``).

Repair rules (a broken history is repaired, never a crash):

1. A correction turn returns to the latest *decision point* (the deciding state
   entered by the latest real user turn or completed set of results): the reply it
   corrects, calls included, no longer counts. Corrections are counted
   (:attr:`HistoryFacts.corrections`) until the next decision point.
2. Only the latest assistant tool turn is awaited. A real user turn or a new
   assistant reply while calls are unanswered abandons them
   (:attr:`HistoryFacts.abandoned_calls`).
3. A result is matched to a call of the latest tool turn by, in order:
   (a) the first unanswered call with the result's id (so with duplicated ids, the
   first unanswered call with that id gets the result); (b) when calls without an
   id are unanswered: the first of them with the result's tool name, else the first
   of them (by position); (c) when the result itself has no id: the first
   unanswered call with its tool name, else the first unanswered call.
4. A result that matches no call (unknown id, a call already answered, or no tool
   turn awaiting results) is orphaned: it is counted
   (:attr:`HistoryFacts.orphaned_results`) and changes nothing.
5. An id that is missing, empty, or not a string is "no id" (integers are read as
   their decimal text). :func:`pending_calls` reports such calls as ``""``.
6. An item that is neither a message model nor a mapping is a misuse of the API
   and raises :class:`~agentfsm.core.errors.UsageError`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from agentfsm.core._history_read import (
    ASSISTANT,
    CORRECTION,
    RESULTS,
    RESULTS_THEN_USER,
    SKIP,
    USER,
    Ref,
    kind,
    read,
    read_mapping,
)
from agentfsm.core.messages import Message

__all__ = [
    "DECIDING_STATES",
    "HistoryFacts",
    "State",
    "derive_state",
    "history_facts",
    "pending_calls",
    "shared_ids",
]


class State(StrEnum):
    """The five states of a tool-using conversation."""

    FIRST_DECISION = "first-decision"
    TOOL_EMITTED = "tool-emitted"
    AWAITING_RESULT = "awaiting-result"
    RESULT_RECEIVED = "result-received"
    FINAL = "final"


#: The states in which the model decides what to do next (and may be corrected).
DECIDING_STATES: frozenset[State] = frozenset({State.FIRST_DECISION, State.RESULT_RECEIVED})


@dataclass(frozen=True, slots=True)
class HistoryFacts:
    """What the history says, beyond the state: for the engine and the guards."""

    state: State
    """The derived state (never ``tool-emitted``)."""
    pending: tuple[str, ...]
    """Ids of the latest tool turn's calls still without a result (``""``: no id)."""
    corrections: int
    """Correction turns since the latest decision point."""
    has_tool_history: bool
    """Whether any assistant message in the history carries a call."""
    orphaned_results: int
    """Results that matched no call (repair rule 4)."""
    abandoned_calls: int
    """Calls left without a result when the history moved on (repair rule 2)."""


# A call or a result as read from a message: (id or None, tool name or None).
class _ToolTurn:
    """The calls of the latest assistant tool turn and which have results (rule 3)."""

    __slots__ = (
        "answered", "by_id", "by_name", "calls", "exact", "idless", "idless_by_name", "order", "remaining"
    )

    def __init__(self, calls: list[Ref]) -> None:
        self.calls = calls
        self.answered = [False] * len(calls)
        self.remaining = len(calls)
        # The usual turn: every call has its own id, and each result names one. Such a
        # result is matched through this one dict; the queues below, which the repair
        # rules need, are built only when a result does not match that way.
        exact = {call_id: index for index, (call_id, _) in enumerate(calls) if call_id is not None}
        self.exact: dict[str, int] | None = exact if len(exact) == len(calls) else None
        # Built on first use: only results without an id need them (rule 3c).
        self.by_name: dict[str, deque[int]] | None = None
        self.order: deque[int] | None = None
        if self.exact is None:
            self._queue_calls()

    def _queue_calls(self) -> None:
        self.by_id: dict[str, deque[int]] = {}
        self.idless: deque[int] = deque()
        self.idless_by_name: dict[str, deque[int]] = {}
        for index, (call_id, name) in enumerate(self.calls):
            if call_id is None:
                self.idless.append(index)
                if name is not None:
                    self.idless_by_name.setdefault(name, deque()).append(index)
            else:
                self.by_id.setdefault(call_id, deque()).append(index)

    def _take(self, queue: deque[int] | None) -> int | None:
        # Queues are cleaned lazily: each index leaves each queue at most once,
        # which keeps the whole scan linear.
        while queue:
            index = queue.popleft()
            if not self.answered[index]:
                return index
        return None

    def answer(self, result_id: str | None, result_name: str | None) -> bool:
        """Mark the call this result answers; False when the result is orphaned."""
        if self.exact is not None:
            if result_id is not None:
                found = self.exact.pop(result_id, None)
                if found is not None and not self.answered[found]:
                    self.answered[found] = True
                    self.remaining -= 1
                    return True
            # not an exact match: fall back to the queues (answered calls are skipped)
            self.exact = None
            self._queue_calls()
        index: int | None = None
        if result_id is not None:
            index = self._take(self.by_id.get(result_id))
        if index is None and self.idless:
            if result_name is not None:
                index = self._take(self.idless_by_name.get(result_name))
            if index is None:
                index = self._take(self.idless)
        if index is None and result_id is None:
            if self.by_name is None or self.order is None:
                self.by_name = {}
                for position, (_, name) in enumerate(self.calls):
                    if name is not None:
                        self.by_name.setdefault(name, deque()).append(position)
                self.order = deque(range(len(self.calls)))
            if result_name is not None:
                index = self._take(self.by_name.get(result_name))
            if index is None:
                index = self._take(self.order)
        if index is None:
            return False
        self.answered[index] = True
        self.remaining -= 1
        return True

    def unanswered_ids(self) -> tuple[str, ...]:
        return tuple(
            call_id or ""
            for (call_id, _), done in zip(self.calls, self.answered, strict=True)
            if not done
        )


def history_facts(messages: Iterable[Message | Mapping[str, Any]]) -> HistoryFacts:
    """Derive the state and the facts around it from a history, in one linear pass."""
    return _scan(messages)[0]


def _scan(messages: Iterable[Message | Mapping[str, Any]]) -> tuple[HistoryFacts, bool]:
    """:func:`history_facts`, and whether a correction returned to the decision point the
    scan started with (it was not set by a message scanned: see :func:`_decided`)."""
    state = State.FIRST_DECISION
    decision_point = State.FIRST_DECISION
    inherited = True  # the decision point is still the one the scan started with
    borrowed = False
    turn: _ToolTurn | None = None
    corrections = orphaned = abandoned = 0
    has_tool_history = False
    for position, message in enumerate(messages):
        # a plain dict is the wire's usual shape: straight to its reader
        kind, refs = read_mapping(message) if type(message) is dict else read(message, position)
        if kind == SKIP:
            continue
        if kind == RESULTS or kind == RESULTS_THEN_USER:
            for result_id, result_name in refs:
                if turn is None or state is not State.AWAITING_RESULT:
                    orphaned += 1
                elif not turn.answer(result_id, result_name):
                    orphaned += 1
                elif turn.remaining == 0:
                    state = decision_point = State.RESULT_RECEIVED
                    inherited = False
                    corrections = 0
            if kind == RESULTS:
                continue
            kind = USER
        if kind == USER:
            if turn is not None and state is State.AWAITING_RESULT:
                abandoned += turn.remaining
            turn = None
            state = decision_point = State.FIRST_DECISION
            inherited = False
            corrections = 0
        elif kind == CORRECTION:
            turn = None
            state = decision_point
            borrowed = borrowed or inherited
            corrections += 1
        else:  # an assistant reply
            if turn is not None and state is State.AWAITING_RESULT:
                abandoned += turn.remaining
            if refs:
                turn = _ToolTurn(refs)
                state = State.AWAITING_RESULT
                has_tool_history = True
            else:
                turn = None
                state = State.FINAL
    pending = turn.unanswered_ids() if turn is not None and state is State.AWAITING_RESULT else ()
    facts = HistoryFacts(
        state=state,
        pending=pending,
        corrections=corrections,
        has_tool_history=has_tool_history,
        orphaned_results=orphaned,
        abandoned_calls=abandoned,
    )
    return facts, borrowed


def derive_state(messages: Iterable[Message | Mapping[str, Any]]) -> State:
    """The state of a conversation, from its history alone (see the module docstring)."""
    return _decided(messages).state


def pending_calls(messages: Iterable[Message | Mapping[str, Any]]) -> tuple[str, ...]:
    """Ids of the latest tool turn's calls that have no result yet (``""``: no id)."""
    return _decided(messages).pending


def shared_ids(messages: Sequence[Message | Mapping[str, Any]], pending: Iterable[str]) -> dict[str, int]:
    """Of the ``pending`` ids, those that several calls of the latest reply with calls
    carry, and how many (a result under such an id answers one of them): what makes a
    history look as if a result were missing when the ids are at fault."""
    wanted = {p for p in pending if p}
    for position in range(len(messages) - 1, -1, -1):
        message = messages[position]
        what, refs = read_mapping(message) if type(message) is dict else read(message, position)
        if what == ASSISTANT and refs:
            ids = [call_id for call_id, _ in refs if call_id in wanted]
            return {i: n for i in dict.fromkeys(ids) if (n := ids.count(i)) > 1}
    return {}


#: assistant replies tried as a starting point before the scan runs back to the user turn
_ANCHORS = 3


def _decided(messages: Iterable[Message | Mapping[str, Any]]) -> HistoryFacts:
    """The facts that decide the state and the pending calls, read from the end when
    the history can be read backwards.

    The state and the pending calls depend only on a suffix of the history:

    - a real user turn resets everything they depend on (the tool turn, the decision
      point, the correction count), so a scan from the latest one is exact;
    - an assistant reply sets the state and the awaited calls on its own, and what can
      follow it in the same user turn (results, corrections, skipped messages) reads
      only those and the decision point. A scan from it is exact unless a correction
      returns to a decision point set before it; the scan reports that, and the next
      earlier reply is tried (a few at most, then the user turn).

    So the state costs the latest step, not the history (a proxy receives the whole
    conversation with every request) nor a long agent turn. The other facts
    (:func:`history_facts`: counts over the whole history) still scan it all.
    """
    if not isinstance(messages, list | tuple):
        return history_facts(messages)
    tries = 0
    for position in range(len(messages) - 1, 0, -1):
        found = kind(messages[position], position)
        if found == USER or found == RESULTS_THEN_USER:
            break
        if found == ASSISTANT and tries < _ANCHORS:
            tries += 1
            facts, borrowed = _scan(messages[position:])
            if not borrowed:
                return facts
    else:
        position = 0
    return history_facts(messages[position:])
