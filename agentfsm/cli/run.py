"""``agentfsm run``, ``agentfsm chat`` and ``agentfsm tools``."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentfsm.cli._common import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_SEED,
    DEFAULT_TEMPERATURE,
    ApiKeyOpt,
    BackendOpt,
    BaseUrlOpt,
    MaxTokensOpt,
    ModelOpt,
    SeedOpt,
    TemperatureOpt,
    TopPOpt,
    generation_options,
    make_backend,
)
from agentfsm.cli._options import config_options
from agentfsm.cli._signals import ChatStops, Stop, sigterm_as_interrupt
from agentfsm.core.config import DEFAULTS, RunConfig
from agentfsm.core.errors import AgentFSMError, UsageError

if TYPE_CHECKING:
    from agentfsm.core.backend import GenerationOptions
    from agentfsm.core.events import TranscriptEvent
    from agentfsm.runtime.tools import ToolRegistry

__all__ = ["register"]

ToolsOpt = Annotated[
    list[str] | None,
    typer.Option("--tools", help="Python tools as MODULE:ATTR (a callable or a list of them). Repeatable."),
]
McpOpt = Annotated[
    list[str] | None,
    typer.Option("--mcp", help='An MCP server to start over stdio, e.g. --mcp "python server.py". Repeatable.'),
]
McpTimeoutOpt = Annotated[
    float,
    typer.Option(
        "--mcp-timeout",
        metavar="SECONDS",
        help="Seconds each --mcp server has to start (answer the MCP handshake and list its tools); "
        "past that it is stopped and the command fails.",
    ),
]
TranscriptOpt = Annotated[str | None, typer.Option("--transcript", help="Write the JSONL transcript here.")]


def _registry(tools: list[str] | None) -> ToolRegistry:
    from agentfsm.runtime.tools import ToolRegistry, load_tools

    registry = ToolRegistry()
    for ref in tools or []:
        for tool in load_tools(ref):
            registry.add(tool)
    return registry


def _agent(
    tools: list[str] | None,
    mcp: list[str] | None,
    backend: str,
    base_url: str | None,
    model: str | None,
    api_key: str | None,
    config: RunConfig,
    transcript: str | None,
    on_event: Any,
    *,
    mcp_timeout: float,
    options: GenerationOptions,
) -> Any:
    from agentfsm.runtime.agent import Agent

    return Agent(
        backend=make_backend(backend, base_url, model, api_key),
        tools=_registry(tools),
        config=config,
        options=options,
        transcript=transcript,
        mcp=mcp or (),
        mcp_start_timeout=mcp_timeout,
        on_event=on_event,
    )


@config_options()
def run(
    prompt: Annotated[str, typer.Argument(help="What to ask the model.")],
    tools: ToolsOpt = None,
    mcp: McpOpt = None,
    mcp_timeout: McpTimeoutOpt = 60.0,  # START_TIMEOUT (agentfsm.runtime.mcp loads on use)
    backend: BackendOpt = "local",
    base_url: BaseUrlOpt = None,
    model: ModelOpt = None,
    api_key: ApiKeyOpt = None,
    max_tokens: MaxTokensOpt = DEFAULT_MAX_TOKENS,
    temperature: TemperatureOpt = DEFAULT_TEMPERATURE,
    seed: SeedOpt = DEFAULT_SEED,
    top_p: TopPOpt = None,
    transcript: TranscriptOpt = None,
    config: RunConfig = DEFAULTS,
    as_json: Annotated[
        bool,
        typer.Option("--json", help='Print one machine-readable result ({"ok": false, ...} and exit code 2 when the run fails).'),
    ] = False,
) -> None:
    """Run the agent loop on PROMPT and print each step and the final answer.

    Exit code 0 with an answer; 2 when the run fails (a spent retry budget,
    an upstream error) or the options are wrong, with one line saying why;
    130 when Ctrl-C interrupts it, 143 when SIGTERM does (its transcript then
    ends with run_end status cancelled).
    """
    from rich.console import Console
    from rich.text import Text

    from agentfsm.cli._show import Printer

    # soft_wrap: an answer piped to a file is the answer, not cut into 80-column lines
    console = Console(stderr=as_json, highlight=False, soft_wrap=True)
    printer = None if as_json else Printer(console)
    options = generation_options(max_tokens, temperature, seed, top_p)
    agent = _agent(tools, mcp, backend, base_url, model, api_key, config, transcript, printer, mcp_timeout=mcp_timeout,
                   options=options)
    stop = Stop()
    try:
        with sigterm_as_interrupt(stop):  # SIGTERM (timeout, a scheduler) as Ctrl-C
            result = agent.run(prompt)
    except AgentFSMError as exc:
        if as_json:  # the same exit code as without --json (agentfsm.cli.main)
            print(json.dumps({"ok": False, "error": type(exc).__name__, "message": str(exc), "transcript": transcript}))
            raise SystemExit(2) from None
        raise
    except KeyboardInterrupt:  # the run was cancelled, and recorded so (run_end status cancelled)
        if as_json:
            error = "SIGTERM" if stop.terminated else "KeyboardInterrupt"
            print(json.dumps({"ok": False, "error": error, "message": stop.word, "transcript": transcript}))
        else:
            print(f"agentfsm: {stop.word}", file=sys.stderr)
        raise SystemExit(stop.code) from None
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
    console.print(Text.assemble(("path:", "bold"), " " + " → ".join(result.path)))
    console.print(Text.assemble(("answer:", "bold"), f" {result.content}"))
    if result.transcript:
        console.print(Text(f"transcript written to {result.transcript}", "dim"))


@config_options()
def chat(
    tools: ToolsOpt = None,
    mcp: McpOpt = None,
    mcp_timeout: McpTimeoutOpt = 60.0,  # START_TIMEOUT (agentfsm.runtime.mcp loads on use)
    backend: BackendOpt = "local",
    base_url: BaseUrlOpt = None,
    model: ModelOpt = None,
    api_key: ApiKeyOpt = None,
    max_tokens: MaxTokensOpt = DEFAULT_MAX_TOKENS,
    temperature: TemperatureOpt = DEFAULT_TEMPERATURE,
    seed: SeedOpt = DEFAULT_SEED,
    top_p: TopPOpt = None,
    transcript: TranscriptOpt = None,
    config: RunConfig = DEFAULTS,
) -> None:
    """Chat interactively; history (calls and results included) is kept across turns.

    Ctrl-C during a turn cancels that turn (its run is recorded as cancelled)
    and drops its message; a second Ctrl-C while that cancellation is still
    under way (a tool tidying up) exits at once (130, agentfsm: interrupted).
    An empty line, Ctrl-D or Ctrl-C at the prompt ends the chat (exit 0).
    SIGTERM cancels the turn under way the same way and ends the chat (exit
    143, agentfsm: terminated). A turn whose answer has arrived is not
    cancelled: a stop then shows and keeps its answer first, and ends the
    chat as at the prompt."""
    from rich.console import Console
    from rich.text import Text

    from agentfsm.cli._show import Printer
    from agentfsm.core.messages import AssistantMessage, Message, UserMessage

    console = Console(highlight=False, soft_wrap=True)
    stop = Stop()
    stops = ChatStops(stop)
    printer = Printer(console)

    def show(event: TranscriptEvent) -> None:  # a step line is written whole, as an answer is
        with stops.held():
            printer(event)
            console.file.flush()

    agent = _agent(tools, mcp, backend, base_url, model, api_key, config, transcript, show,
                   mcp_timeout=mcp_timeout, options=generation_options(max_tokens, temperature, seed, top_p))
    if transcript is not None:  # a path no turn could write is refused now (exit 2), not at every turn
        from agentfsm.runtime.transcript import TranscriptWriter

        TranscriptWriter(transcript).close()
    history: list[Message] = []
    # one event loop for the whole chat: the --mcp servers start once, on it, and keep
    # their state from turn to turn; Ctrl-C during a turn cancels that turn's task only
    with stops.installed(), asyncio.Runner() as runner:
        try:
            stops.run(runner, agent.__aenter__())
        except asyncio.CancelledError:
            print(f"agentfsm: {stop.word}", file=sys.stderr)
            raise SystemExit(stop.code) from None
        try:
            console.print("[dim]agentfsm chat: empty line or Ctrl-D to quit; Ctrl-C cancels a turn[/]")
            while True:
                try:
                    line = stops.prompt(lambda: input("you> ") if sys.stdin.isatty() else sys.stdin.readline())
                except EOFError:
                    break
                if not line or not line.strip() or stops.stopped:
                    break
                history.append(UserMessage(content=line.strip()))
                try:
                    result = stops.run(runner, agent.arun(list(history)))
                except AgentFSMError as exc:
                    console.print(Text.assemble(("error:", "red"), f" {exc}"))
                    history.pop()
                    continue
                except asyncio.CancelledError:  # that turn only, unless SIGTERM
                    console.print(f"[yellow]{stop.word}:[/] the turn was cancelled and its message dropped")
                    history.pop()
                    stops.stopped = stop.terminated
                    continue
                # a stop from here to the prompt is acted on there: the answer is shown and kept first
                with stops.held():
                    history = list(result.messages)
                    console.print(Text.assemble(("assistant>", "bold"), f" {result.content}"))
                    console.file.flush()
        except KeyboardInterrupt:  # a stop at the prompt's last instant, out of its handler: as at the prompt
            pass
        finally:
            runner.run(agent.__aexit__(None, None, None))  # a stop now is only recorded: the servers stop
    if stop.terminated:  # SIGTERM ends the chat wherever it landed, where Ctrl-C in a turn ends only the turn
        print("agentfsm: terminated", file=sys.stderr)
        raise SystemExit(stop.code)
    n = sum(1 for m in history if isinstance(m, AssistantMessage))
    console.print(f"[dim]{n} assistant message(s) in this session[/]")


@config_options(only=("dialect", "tool_choice", "parallel"))
def tools_cmd(
    ref: Annotated[list[str], typer.Argument(help="MODULE:ATTR of the tools.")],
    config: RunConfig = DEFAULTS,
) -> None:
    """List the tools and print the contract that would be sent to the model."""
    from rich.console import Console
    from rich.text import Text

    from agentfsm.prompt.contract import render_contract

    registry = _registry(ref)
    if not len(registry):
        raise UsageError("no tools found")
    console = Console(highlight=False, soft_wrap=True)  # the contract verbatim, piped or not
    for spec in registry.specs:
        console.print(Text.assemble((spec.name, "bold"), f": {spec.description}"))
        console.print(json.dumps(spec.parameters, indent=2), markup=False)
    console.rule("contract")
    contract = render_contract(registry.specs, config.dialect, config.tool_choice, config.parallel)
    console.print(contract, markup=False)


def register(app: typer.Typer) -> None:
    app.command("run")(run)
    app.command("chat")(chat)
    app.command("tools")(tools_cmd)
