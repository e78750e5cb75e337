"""The conversation state, derived from the message history alone.

:func:`derive_state` is a pure function of the history. It reads our own
:mod:`agentfsm.core.messages` models and the wire shapes as they arrive (OpenAI chat
messages, Anthropic messages, and dumps of our models), in one pass, in time linear
in the size of the history. Nothing else is needed: a stateless proxy and a
long-running agent derive the same state from the same history.

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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from agentfsm.core.errors import UsageError
from agentfsm.core.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolMessage,
    UserMessage,
)

__all__ = [
    "DECIDING_STATES",
    "HistoryFacts",
    "State",
    "derive_state",
    "history_facts",
    "pending_calls",
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
_Ref = tuple[str | None, str | None]

_SKIP, _USER, _CORRECTION, _ASSISTANT, _RESULTS, _RESULTS_THEN_USER = range(6)


class _ToolTurn:
    """The calls of the latest assistant tool turn and which have results (rule 3)."""

    __slots__ = (
        "answered", "by_id", "by_name", "calls", "exact", "idless", "idless_by_name", "order", "remaining"
    )

    def __init__(self, calls: list[_Ref]) -> None:
        self.calls = calls
        self.answered = [False] * len(calls)
        self.remaining = len(calls)
        # The usual turn: every call has its own id, and each result names one. Such a
        # result is matched through this one dict; the queues below, which the repair
        # rules need, are built only when a result does not match that way.
        exact = {call_id: index for index, (call_id, _) in enumerate(calls) if call_id is not None}
        self.exact: dict[str, int] | None = exact if len(exact) == len(calls) else None
        self.by_id: dict[str, deque[int]] = {}
        self.idless: deque[int] = deque()
        self.idless_by_name: dict[str, deque[int]] = {}
        # Built on first use: only results without an id need them (rule 3c).
        self.by_name: dict[str, deque[int]] | None = None
        self.order: deque[int] | None = None
        if self.exact is None:
            self._queue_calls()

    def _queue_calls(self) -> None:
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
    state = State.FIRST_DECISION
    decision_point = State.FIRST_DECISION
    turn: _ToolTurn | None = None
    corrections = orphaned = abandoned = 0
    has_tool_history = False
    for position, message in enumerate(messages):
        # a plain dict is the wire's usual shape: straight to its reader
        kind, refs = _read_mapping(message) if type(message) is dict else _read(message, position)
        if kind == _SKIP:
            continue
        if kind in (_RESULTS, _RESULTS_THEN_USER):
            for result_id, result_name in refs:
                if turn is None or state is not State.AWAITING_RESULT:
                    orphaned += 1
                elif not turn.answer(result_id, result_name):
                    orphaned += 1
                elif turn.remaining == 0:
                    state = decision_point = State.RESULT_RECEIVED
                    corrections = 0
            if kind == _RESULTS:
                continue
            kind = _USER
        if kind == _USER:
            if turn is not None and state is State.AWAITING_RESULT:
                abandoned += turn.remaining
            turn = None
            state = decision_point = State.FIRST_DECISION
            corrections = 0
        elif kind == _CORRECTION:
            turn = None
            state = decision_point
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
    return HistoryFacts(
        state=state,
        pending=pending,
        corrections=corrections,
        has_tool_history=has_tool_history,
        orphaned_results=orphaned,
        abandoned_calls=abandoned,
    )


def derive_state(messages: Iterable[Message | Mapping[str, Any]]) -> State:
    """The state of a conversation, from its history alone (see the module docstring)."""
    return history_facts(_current_turn(messages)).state


def pending_calls(messages: Iterable[Message | Mapping[str, Any]]) -> tuple[str, ...]:
    """Ids of the latest tool turn's calls that have no result yet (``""``: no id)."""
    return history_facts(_current_turn(messages)).pending


def _current_turn(
    messages: Iterable[Message | Mapping[str, Any]],
) -> Iterable[Message | Mapping[str, Any]]:
    """The history from its latest real user turn on, when it can be read backwards.

    A real user turn resets everything the state depends on (the tool turn, the
    decision point, the correction count), so the state and the pending calls are
    decided by that suffix alone. Reading back to it costs the length of the current
    turn instead of the whole history (a proxy receives the whole conversation with
    every request). Counts over the whole history (:func:`history_facts`) still scan
    it all.
    """
    if not isinstance(messages, list | tuple):
        return messages
    for position in range(len(messages) - 1, 0, -1):
        kind, _ = _read(messages[position], position)
        if kind == _USER or kind == _RESULTS_THEN_USER:
            return messages[position:]
    return messages


def _read(message: object, position: int) -> tuple[int, list[_Ref]]:
    """Classify one message and pull out its calls or results."""
    if isinstance(message, dict):  # the wire's usual shape: skip the slower checks below
        return _read_mapping(message)
    if isinstance(message, ToolMessage):
        return _RESULTS, [(_as_id(message.result.call_id), message.result.name)]
    if isinstance(message, AssistantMessage):
        return _ASSISTANT, [(_as_id(call.id), call.name) for call in message.tool_calls]
    if isinstance(message, UserMessage):
        return (_USER if message.correction is None else _CORRECTION), []
    if isinstance(message, SystemMessage):
        return _SKIP, []
    if isinstance(message, Mapping):
        return _read_mapping(message)
    raise UsageError(
        f"history item {position} is a {type(message).__name__}, not a message or a mapping"
    )


def _read_mapping(message: Mapping[str, Any]) -> tuple[int, list[_Ref]]:
    role = message.get("role")
    if role == "assistant":
        return _ASSISTANT, _wire_calls(message)
    if role == "user":
        if message.get("correction") is not None:
            return _CORRECTION, []
        content = message.get("content")
        if isinstance(content, list):
            results: list[_Ref] = []
            other = False
            for block in content:
                if _is_mapping(block) and block.get("type") == "tool_result":
                    results.append((_as_id(block.get("tool_use_id")), None))
                else:
                    other = True
            if results:
                return (_RESULTS_THEN_USER if other else _RESULTS), results
        return _USER, []
    if role == "tool":
        result = message.get("result")
        if result is not None and _is_mapping(result):  # a dump of our ToolMessage
            return _RESULTS, [(_as_id(result.get("call_id")), _as_name(result.get("name")))]
        call_id = message.get("tool_call_id")
        name = message.get("name")
        return _RESULTS, [(
            (call_id or None) if type(call_id) is str else _as_id(call_id),
            (name or None) if type(name) is str else None,
        )]
    if role == "function":  # OpenAI's legacy function result: a name, no id
        return _RESULTS, [(None, _as_name(message.get("name")))]
    return _SKIP, []  # system, developer, and roles we do not know


def _is_mapping(value: object) -> bool:
    # a plain dict is what JSON gives; the ABC check (slow) only for other mappings
    return type(value) is dict or isinstance(value, Mapping)


def _wire_calls(message: Mapping[str, Any]) -> list[_Ref]:
    calls: list[_Ref] = []
    tool_calls = message.get("tool_calls")
    if tool_calls and isinstance(tool_calls, list):
        for call in tool_calls:
            if not _is_mapping(call):
                continue
            name = call.get("name")
            if name is None:
                function = call.get("function")
                if _is_mapping(function):
                    name = function.get("name")
            call_id = call.get("id")
            calls.append((
                (call_id or None) if type(call_id) is str else _as_id(call_id),
                (name or None) if type(name) is str else None,
            ))
    function_call = message.get("function_call")
    if function_call is not None and _is_mapping(function_call):
        calls.append((None, _as_name(function_call.get("name"))))
    content = message.get("content")
    if content and isinstance(content, list):
        for block in content:
            if _is_mapping(block) and block.get("type") == "tool_use":
                calls.append((_as_id(block.get("id")), _as_name(block.get("name"))))
    return calls


def _as_id(value: object) -> str | None:
    if isinstance(value, str):
        return value or None
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def _as_name(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
