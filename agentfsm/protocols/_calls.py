"""The tool calls a client's history makes, and the results that answer them.

Every protocol reads its history through one :class:`CallLedger`, so the same three
mistakes are the same 400 everywhere, naming the id and where it stands:

- one assistant turn with two different calls of the same id (Anthropic answers
  "tool_use ids must be unique", OpenAI refuses it too): which of the two did a result
  answer? Read on, the second would shadow the first and the conversation would seem
  to end with a call that has no result. A call written twice over, the same id, tool
  and arguments (Claude Code 2.1.19 and 2.1.20 sent such copies, which Anthropic's API
  refused), means one call: the copy is dropped and named, and the request is served;
- a result whose id answers no earlier call;
- two results for one call (Anthropic: "each tool_use must have a single result",
  OpenAI: "Duplicate value for 'tool_call_id'").

An id used again in a *later* assistant turn is accepted (some local servers number
their calls per reply): a result answers the latest call of its id.
"""

from __future__ import annotations

from agentfsm.core._types import ResultStatus
from agentfsm.core.errors import RequestError
from agentfsm.core.messages import ToolCall, ToolMessage, ToolResult

__all__ = ["CallLedger"]


class CallLedger:
    """The calls seen so far in one request's history, by id, and where each was answered."""

    __slots__ = ("_answered", "_calls", "_turn")

    def __init__(self) -> None:
        self._calls: dict[str, ToolCall] = {}
        #: id -> where the current assistant turn holds it
        self._turn: dict[str, str] = {}
        #: id -> where its result stands (for the latest call of that id)
        self._answered: dict[str, str] = {}

    def begin_turn(self) -> None:
        """A new assistant turn starts: its ids may repeat those of earlier turns."""
        self._turn = {}

    def add(self, call: ToolCall, where: str) -> bool:
        """A call of the current assistant turn, its id read at ``where``: False for a copy
        of the turn's earlier call of that id (same tool and arguments), which the caller
        drops; a 400 when the turn holds another call of that id."""
        first = self._turn.get(call.id)
        if first is not None:
            earlier = self._calls[call.id]
            if (earlier.name, earlier.arguments) == (call.name, call.arguments):
                return False
            raise RequestError(
                f"{where}: tool call id {call.id!r} is used twice in one assistant turn "
                f"(first at {first}); tool call ids must be unique",
                param=where,
            )
        self._turn[call.id] = where
        self._calls[call.id] = call
        self._answered.pop(call.id, None)
        return True

    def answer(
        self, call_id: str, text: str, *, where: str, key: str, answers: str, error: bool = False
    ) -> ToolMessage:
        """The result of the earlier call ``call_id`` (read at ``where.key``); a 400 when no
        earlier ``answers`` has that id, or when that call has had its result already.
        Status ``error`` when the client says so, else by text."""
        param = f"{where}.{key}"
        call = self._calls.get(call_id)
        if call is None:
            raise RequestError(f"{where}: {key} {call_id!r} answers no earlier {answers}", param=param)
        first = self._answered.get(call_id)
        if first is not None:
            raise RequestError(
                f"{where}: a second result for the call {call_id!r} (the first is at {first}); "
                "each call takes one result",
                param=param,
            )
        self._answered[call_id] = where
        status: ResultStatus = "error" if error else ("ok" if text.strip() else "empty")
        return ToolMessage(result=ToolResult(call_id=call_id, content=text, status=status, name=call.name))
