"""``agentfsm run``, ``agentfsm chat`` and ``agentfsm tools``."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer
from rich.console import Console

from agentfsm.cli._common import (
    ApiKeyOpt,
    BackendOpt,
    BaseUrlOpt,
    DialectOpt,
    EnforcementOpt,
    ModelOpt,
    ToolChoiceOpt,
    make_backend,
)
from agentfsm.contract import render_contract
from agentfsm.errors import AgentFSMError, UsageError
from agentfsm.messages import AssistantMessage, Message, UserMessage
from agentfsm.tools import ToolRegistry, load_tools

__all__ = ["register"]

ToolsOpt = Annotated[
    list[str] | None,
    typer.Option("--tools", help="Python tools as MODULE:ATTR (a callable or a list of them). Repeatable."),
]
McpOpt = Annotated[
    list[str] | None,
    typer.Option("--mcp", help='An MCP server to start over stdio, e.g. --mcp "python server.py". Repeatable.'),
]
TranscriptOpt = Annotated[str | None, typer.Option("--transcript", help="Write the JSONL transcript here.")]
MaxStepsOpt = Annotated[int, typer.Option("--max-steps", min=1, help="Model calls allowed per turn.")]


def _registry(tools: list[str] | None) -> ToolRegistry:
    registry = ToolRegistry()
    for ref in tools or []:
        for tool in load_tools(ref):
            registry.add(tool)
    return registry


class _Printer:
    """Shows each step of a run as it happens."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def __call__(self, event: dict[str, Any]) -> None:
        kind = event["type"]
        c = self.console
        if kind == "transition":
            c.print(f"[dim]state[/] {event['from']} --{event['event']}--> [bold]{event['to']}[/]")
        elif kind == "model_request":
            more = ", extension" if event.get("extension") else ""
            c.print(f"[dim]model request (attempt {event['attempt']}, enforcement {event['enforcement']}{more})[/]")
        elif kind == "tool_call":
            call = event["call"]
            c.print(f"[cyan]call[/] {call['name']}({json.dumps(call['arguments'], ensure_ascii=False)})  [dim]{call['id']}[/]")
        elif kind == "tool_result":
            res = event["result"]
            c.print(f"[green]result[/] [{res['status']}] {res['content'][:300]}")
        elif kind == "guard":
            c.print(f"[yellow]guard[/] {event['guard']}: {event['reason']} ({event['detail']})")
        elif kind == "retry":
            c.print(f"[yellow]retry[/] attempt {event['attempt']}: {event['reason']}")
        elif kind == "error":
            c.print(f"[red]error[/] {event['error']}: {event['message']}")


def _agent(
    tools: list[str] | None,
    mcp: list[str] | None,
    backend: str,
    base_url: str | None,
    model: str | None,
    api_key: str | None,
    dialect: str,
    enforcement: str,
    tool_choice: str,
    transcript: str | None,
    max_steps: int,
    on_event: Any,
) -> Any:
    from agentfsm.runtime import Agent

    return Agent(
        backend=make_backend(backend, base_url, model, api_key),
        tools=_registry(tools),
        dialect=dialect,
        tool_choice=tool_choice,
        enforcement=enforcement,
        transcript=transcript,
        max_steps=max_steps,
        mcp=mcp or (),
        on_event=on_event,
    )


def run(
    prompt: Annotated[str, typer.Argument(help="What to ask the model.")],
    tools: ToolsOpt = None,
    mcp: McpOpt = None,
    backend: BackendOpt = "local",
    base_url: BaseUrlOpt = None,
    model: ModelOpt = None,
    api_key: ApiKeyOpt = None,
    dialect: DialectOpt = "json-action",
    enforcement: EnforcementOpt = "auto",
    tool_choice: ToolChoiceOpt = "auto",
    transcript: TranscriptOpt = None,
    max_steps: MaxStepsOpt = 10,
    as_json: Annotated[bool, typer.Option("--json", help="Print one machine-readable result.")] = False,
) -> None:
    """Run the agent loop on PROMPT and print each step and the final answer."""
    console = Console(stderr=as_json, highlight=False)
    printer = None if as_json else _Printer(console)
    agent = _agent(tools, mcp, backend, base_url, model, api_key, dialect, enforcement, tool_choice, transcript, max_steps, printer)
    try:
        result = agent.run(prompt)
    except AgentFSMError as exc:
        if as_json:
            print(json.dumps({"ok": False, "error": type(exc).__name__, "message": str(exc), "transcript": transcript}))
            raise SystemExit(1) from None
        raise
    if as_json:
        print(
            json.dumps(
                {
                    "ok": True,
                    "content": result.content,
                    "path": result.path,
                    "steps": result.steps,
                    "corrections": result.corrections,
                    "tool_calls": result.tool_calls,
                    "usage": result.usage.model_dump(),
                    "transcript": result.transcript,
                },
                ensure_ascii=False,
            )
        )
        return
    console.print()
    console.print("[bold]path:[/] " + " → ".join(result.path))
    console.print(f"[bold]answer:[/] {result.content}")
    if result.transcript:
        console.print(f"[dim]transcript written to {result.transcript}[/]")


def chat(
    tools: ToolsOpt = None,
    mcp: McpOpt = None,
    backend: BackendOpt = "local",
    base_url: BaseUrlOpt = None,
    model: ModelOpt = None,
    api_key: ApiKeyOpt = None,
    dialect: DialectOpt = "json-action",
    enforcement: EnforcementOpt = "auto",
    tool_choice: ToolChoiceOpt = "auto",
    transcript: TranscriptOpt = None,
    max_steps: MaxStepsOpt = 10,
) -> None:
    """Chat interactively; history (calls and results included) is kept across turns."""
    console = Console(highlight=False)
    agent = _agent(tools, mcp, backend, base_url, model, api_key, dialect, enforcement, tool_choice, transcript, max_steps, _Printer(console))
    history: list[Message] = []
    console.print("[dim]agentfsm chat: empty line or Ctrl-D to quit[/]")
    while True:
        try:
            line = input("you> ") if sys.stdin.isatty() else sys.stdin.readline()
        except (EOFError, KeyboardInterrupt):
            break
        if not line or not line.strip():
            break
        history.append(UserMessage(content=line.strip()))
        try:
            result = agent.run(list(history))
        except AgentFSMError as exc:
            console.print(f"[red]error:[/] {exc}")
            history.pop()
            continue
        history = list(result.messages)
        console.print(f"[bold]assistant>[/] {result.content}")
    n = sum(1 for m in history if isinstance(m, AssistantMessage))
    console.print(f"[dim]{n} assistant message(s) in this session[/]")


def tools_cmd(
    ref: Annotated[list[str], typer.Argument(help="MODULE:ATTR of the tools.")],
    dialect: DialectOpt = "json-action",
    tool_choice: ToolChoiceOpt = "auto",
) -> None:
    """List the tools and print the contract that would be sent to the model."""
    registry = _registry(ref)
    if not len(registry):
        raise UsageError("no tools found")
    console = Console(highlight=False)
    for spec in registry.specs:
        console.print(f"[bold]{spec.name}[/]: {spec.description}")
        console.print(json.dumps(spec.parameters, indent=2), markup=False)
    console.rule("contract")
    console.print(render_contract(registry.specs, dialect=dialect, tool_choice=tool_choice), markup=False)


def register(app: typer.Typer) -> None:
    app.command("run")(run)
    app.command("chat")(chat)
    app.command("tools")(tools_cmd)
