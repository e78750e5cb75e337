"""A ``model_request``'s prompt written as what it adds to the run's previous one.

Each model call's prompt is the run's conversation so far, so a run of ``k`` calls
would write its shared prefix ``k`` times (the contract and every earlier turn, again
at each step): a transcript that grows with the square of the run. From schema version
5 a ``model_request`` line whose leading messages are those of the previous
``model_request`` of the same run writes, instead of them, ``messages_from`` (that
event's ``seq``) and ``messages_kept`` (how many of its leading messages it shares);
its ``messages`` are the rest. The line is the only place this shows: the
:class:`~agentfsm.runtime.transcript.TranscriptWriter` hands its ``on_event`` hook the
whole event, and the readers expand each line back into it before anything sees it.

:class:`PromptDelta` is the writer's half: it compares the (redacted) messages being
written with those of the previous request only, a message at a time, so writing
stays linear in what is written. :class:`PromptExpander` is the reader's: it holds
each run's last request's messages (let go at its ``run_end``) and rebuilds a line's
``messages`` from them, the shared ones as the validated messages already read. A
reference to anything but the run's previous ``model_request`` in the file (a file that
starts mid-run, or filtered without it) is a :class:`TranscriptError` saying so.
"""

from __future__ import annotations

from typing import Any

from agentfsm.core.errors import TranscriptError
from agentfsm.core.events import ModelRequestEvent, RunEndEvent, TranscriptEvent
from agentfsm.core.messages import PromptMessage

__all__ = ["DELTA_SINCE", "FROM", "KEPT", "PromptDelta", "PromptExpander"]

#: the schema version that writes a prompt as what it adds
DELTA_SINCE = 5
#: the line's fields: the ``seq`` of the run's previous ``model_request``, and how many of
#: its leading messages this prompt begins with (``messages`` are the ones after them)
FROM, KEPT = "messages_from", "messages_kept"


class PromptDelta:
    """The writer's half: one run's ``model_request`` lines, each after the previous one."""

    __slots__ = ("_seq", "_messages")

    def __init__(self) -> None:
        self._seq = -1
        self._messages: list[Any] = []

    def line(self, event: dict[str, Any]) -> dict[str, Any]:
        """What to write for ``event`` (a ``model_request`` as plain, redacted JSON): the
        event itself, or, when its messages begin with any of the previous request's,
        the event with ``messages_from``, ``messages_kept`` and the messages after those."""
        messages = event.get("messages")
        if not isinstance(messages, list):
            return event
        previous, self._messages = self._messages, messages
        seq, self._seq = self._seq, event["seq"]
        kept = 0
        for before, now in zip(previous, messages):
            if before != now:
                break
            kept += 1
        if kept == 0:
            return event
        line: dict[str, Any] = {}
        for key, value in event.items():
            if key == "messages":
                line[FROM], line[KEPT], line[key] = seq, kept, messages[kept:]
            else:
                line[key] = value
        return line


class PromptExpander:
    """The reader's half: a file's ``model_request`` lines back into whole events."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        #: run -> the seq and messages of its last model_request read
        self._last: dict[str, tuple[int, tuple[PromptMessage, ...]]] = {}

    def expand(self, data: dict[str, Any]) -> dict[str, Any]:
        """``data`` (one line) with its ``messages`` whole again, when it refers to the
        previous request's; a reference that does not resolve is a :class:`TranscriptError`."""
        if FROM not in data and KEPT not in data:
            return data
        if data.get("type") != "model_request" or type(data.get("v")) is not int or data["v"] < DELTA_SINCE:
            return data  # not a field of this event (or version): the event's own check says so
        seq, kept, rest = data.get(FROM), data.get(KEPT), data.get("messages", [])
        if type(seq) is not int or type(kept) is not int or kept < 1 or not isinstance(rest, list):
            raise TranscriptError(
                f"bad model_request event: {FROM} must be an event's seq, {KEPT} a count from 1 "
                "and messages a list"
            )
        run = data.get("run")
        last = self._last.get(run) if isinstance(run, str) else None
        if last is None or last[0] != seq:
            before = "has no model_request before it" if last is None else f"has seq {last[0]} as its previous model_request"
            raise TranscriptError(
                f"model_request refers to the messages of the model_request at seq {seq} of run {run}, "
                f"but the run {before} in the file (a file that starts mid-run, or filtered?)"
            )
        if kept > len(last[1]):
            raise TranscriptError(
                f"model_request keeps {kept} messages of event seq {seq}, which has {len(last[1])}"
            )
        expanded = {key: value for key, value in data.items() if key not in (FROM, KEPT)}
        expanded["messages"] = [*last[1][:kept], *rest]
        return expanded

    def seen(self, event: TranscriptEvent) -> None:
        """Note ``event`` as read: a request's messages, for the next to refer to."""
        if isinstance(event, ModelRequestEvent) and event.v >= DELTA_SINCE:
            self._last[event.run] = (event.seq, event.messages)
        elif isinstance(event, RunEndEvent):
            self._last.pop(event.run, None)
