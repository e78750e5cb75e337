"""What ``agentfsm run`` and ``chat`` print for each step of a run, as it happens."""

from __future__ import annotations

import json

from rich.console import Console
from rich.text import Text

from agentfsm.core.events import (
    ErrorEvent,
    GuardEvent,
    ModelRequestEvent,
    RetryEvent,
    ToolCallEvent,
    ToolResultEvent,
    TranscriptEvent,
    TransitionEvent,
)

__all__ = ["Printer"]


class Printer:
    """Shows each step of a run as it happens.

    Every line is a :class:`~rich.text.Text` of plain parts and their styles, never markup:
    what a model, a tool or an upstream wrote (``[/etc/hosts]``, ``[bold]``) is shown as
    written, and cannot break the line."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def __call__(self, event: TranscriptEvent) -> None:
        line = _line(event)
        if line is not None:
            self.console.print(line)


def _line(event: TranscriptEvent) -> Text | None:
    match event:
        case TransitionEvent():
            return Text.assemble(("state", "dim"), f" {event.from_} --{event.event}--> ", (event.to, "bold"))
        case ModelRequestEvent():
            more = ", extension" if event.extension else ""
            return Text(f"model request (attempt {event.attempt}, enforcement {event.enforcement}{more})", "dim")
        case ToolCallEvent(call=call):
            args = json.dumps(call.arguments, ensure_ascii=False)
            return Text.assemble(("call", "cyan"), f" {call.name}({args})  ", (call.id, "dim"))
        case ToolResultEvent(result=res):
            return Text.assemble(("result", "green"), f" [{res.status}] {res.content[:300]}")
        case GuardEvent():
            return Text.assemble(("guard", "yellow"), f" {event.guard}: {event.reason} ({event.detail})")
        case RetryEvent():
            return Text.assemble(("retry", "yellow"), f" attempt {event.attempt}: {event.reason}")
        case ErrorEvent():
            return Text.assemble(("error", "red"), f" {event.error}: {event.message}")
    return None
