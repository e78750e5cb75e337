"""What ``agentfsm run`` and ``chat`` print for each step of a run, as it happens."""

from __future__ import annotations

import json

from rich.console import Console

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
    """Shows each step of a run as it happens."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def __call__(self, event: TranscriptEvent) -> None:
        c = self.console
        match event:
            case TransitionEvent():
                c.print(f"[dim]state[/] {event.from_} --{event.event}--> [bold]{event.to}[/]")
            case ModelRequestEvent():
                more = ", extension" if event.extension else ""
                c.print(f"[dim]model request (attempt {event.attempt}, enforcement {event.enforcement}{more})[/]")
            case ToolCallEvent(call=call):
                args = json.dumps(call.arguments, ensure_ascii=False)
                c.print(f"[cyan]call[/] {call.name}({args})  [dim]{call.id}[/]")
            case ToolResultEvent(result=res):
                c.print(f"[green]result[/] [{res.status}] {res.content[:300]}")
            case GuardEvent():
                c.print(f"[yellow]guard[/] {event.guard}: {event.reason} ({event.detail})")
            case RetryEvent():
                c.print(f"[yellow]retry[/] attempt {event.attempt}: {event.reason}")
            case ErrorEvent():
                c.print(f"[red]error[/] {event.error}: {event.message}")
