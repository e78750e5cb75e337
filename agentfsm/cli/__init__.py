"""The ``agentfsm`` command line. One module per command group, each with ``register(app)``.

Registering a command imports nothing heavy: each command module imports its server,
batch, eval or rendering libraries inside the command function, so ``agentfsm --help``
and ``agentfsm replay`` start fast (tests/test_cli.py checks what ``--help`` loads).
"""

from __future__ import annotations

import os
import sys

import typer

# typer (0.26 and later) carries its own copy of click, and raises that copy's errors
from typer._click.exceptions import BadParameter, ClickException, NoArgsIsHelpError, UsageError

from agentfsm.core.errors import AgentFSMError

__all__ = ["app", "main"]

app = typer.Typer(
    name="agentfsm",
    help="Tool calling for chat models that have none.",
    epilog="Logging: AGENTFSM_LOG_LEVEL=trace|debug|info|success|warning|error|critical (any case; "
    "default warning) sets what is logged to stderr. Exit codes: 0 done, 1 a replay that diverged "
    "or a batch with failed tasks, 2 misuse or a run that failed (one line: agentfsm: error: ...), "
    "130 interrupted (Ctrl-C), 143 terminated (SIGTERM: run, chat, batch, eval and calibrate end their runs as for Ctrl-C).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _register_all() -> None:
    import importlib

    for name in ("run", "diagram", "report", "serve", "replay", "batch", "eval", "calibrate"):
        try:
            module = importlib.import_module(f"agentfsm.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"agentfsm.cli.{name}":
                continue  # command group not built yet
            raise
        module.register(app)


def _reflow_help(commands: typer.Typer) -> None:
    """Each command's help is its docstring with the line breaks inside a paragraph
    joined: typer keeps them, so at 80 columns rich wrapped a line that was a little too
    long and then broke it again where the docstring did, leaving one-word lines."""
    import inspect

    for info in commands.registered_commands:
        if info.help is None and info.callback is not None:
            doc = inspect.getdoc(info.callback) or ""
            info.help = "\n\n".join(" ".join(p.split()) for p in doc.split("\n\n"))
    for group in commands.registered_groups:
        if group.typer_instance is not None:
            _reflow_help(group.typer_instance)


_register_all()
_reflow_help(app)


def main() -> None:
    """Console entry point: typed errors and click's usage errors become one line
    (``agentfsm: error: ...``, a usage error followed by click's "Try ... --help" hint)
    and exit code 2."""
    from loguru import logger

    from agentfsm.cli._logging import configure_logging

    try:
        configure_logging(os.environ.get("AGENTFSM_LOG_LEVEL", "WARNING"))
    except AgentFSMError as exc:
        print(f"agentfsm: error: AGENTFSM_LOG_LEVEL: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    logger.enable("agentfsm")
    try:
        # click's documented way to handle its errors oneself: not standalone, so they
        # are raised here instead of printed as a box (typer's) below the usage line
        code = app(standalone_mode=False)
    except AgentFSMError as exc:
        print(f"agentfsm: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    except ClickException as exc:
        _report_click_error(exc)
        raise SystemExit(exc.exit_code) from None
    except typer.Abort:
        print("agentfsm: aborted", file=sys.stderr)
        raise SystemExit(1) from None
    if isinstance(code, int) and code:  # typer.Exit(N) raised by a command (batch: 1, Ctrl-C: 130)
        raise SystemExit(code)


def _report_click_error(exc: ClickException) -> None:
    """A usage error (a bad option value, an unknown option, a missing argument) as one
    line, and click's hint to try ``--help`` when the command has that option."""
    if isinstance(exc, NoArgsIsHelpError):
        # the command's help: rich printed it when the error was made (its text is then
        # empty); plain click's is the text, which click shows on stderr
        if help_text := exc.format_message():
            print(help_text, file=sys.stderr)
        return
    if isinstance(exc, BadParameter):
        # typer reads values through pydantic, whose message for a failed check starts so
        exc.message = exc.message.removeprefix("Value error, ")
    print(f"agentfsm: error: {' '.join(exc.format_message().split())}", file=sys.stderr)
    ctx = exc.ctx if isinstance(exc, UsageError) else None
    if ctx is not None and ctx.command.get_help_option(ctx) is not None:
        print(f"Try '{ctx.command_path} {ctx.help_option_names[0]}' for help.", file=sys.stderr)
