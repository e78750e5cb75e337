"""The ``agentfsm`` command line. One module per command group, each with ``register(app)``.

Registering a command imports nothing heavy: each command module imports its server,
batch, eval or rendering libraries inside the command function, so ``agentfsm --help``
and ``agentfsm replay`` start fast (tests/test_cli.py checks what ``--help`` loads).
"""

from __future__ import annotations

import os
import sys

import typer

from agentfsm.core.errors import AgentFSMError

__all__ = ["app", "main"]

app = typer.Typer(
    name="agentfsm",
    help="Tool calling for chat models that have none.",
    epilog="Logging: AGENTFSM_LOG_LEVEL=trace|debug|info|success|warning|error|critical (any case; "
    "default warning) sets what is logged to stderr. Exit codes: 0 done, 1 a replay that diverged "
    "or a batch with failed tasks, 2 misuse or a run that failed (one line: agentfsm: error: ...), "
    "130 interrupted (Ctrl-C), 143 terminated (SIGTERM: run, chat and batch end their runs as for Ctrl-C).",
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
    """Console entry point: typed errors become a one-line message and exit code 2."""
    from loguru import logger

    from agentfsm.cli._logging import configure_logging

    try:
        configure_logging(os.environ.get("AGENTFSM_LOG_LEVEL", "WARNING"))
    except AgentFSMError as exc:
        print(f"agentfsm: error: AGENTFSM_LOG_LEVEL: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    logger.enable("agentfsm")
    try:
        app()
    except AgentFSMError as exc:
        print(f"agentfsm: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
