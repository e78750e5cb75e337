"""Command-line options generated from the run configuration's fields.

:func:`config_options` gives a command one option per
:class:`~agentfsm.core.config.RunConfig` field: ``--max-corrections`` for
``max_corrections``, with the field's help text and default, the environment variable
``AGENTFSM_MAX_CORRECTIONS``, the allowed values of a ``Literal`` field as choices,
``--parallel/--no-parallel`` for a flag, a field's minimum, and a comma-separated
list for a tuple field (``--policies refusal,answers``; ``none`` for the empty tuple). The command receives
them as one ``config: RunConfig``. A field added to the config is an option of every
command at once; a command leaves out (``exclude``) the fields it does not use.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Collection
from typing import Annotated, Any, Literal, TypeVar

import typer

from agentfsm.core.config import DEFAULTS, RunConfig, allowed_items, allowed_values, field_help

__all__ = ["config_options", "envvar", "flag", "split_list"]

_R = TypeVar("_R")


def flag(name: str) -> str:
    """The option of field ``name``: ``max_corrections`` -> ``--max-corrections``."""
    return "--" + name.replace("_", "-")


def envvar(name: str) -> str:
    """The environment variable of field ``name``: ``AGENTFSM_MAX_CORRECTIONS``."""
    return "AGENTFSM_" + name.upper()


def split_list(value: str) -> tuple[str, ...]:
    """A comma-separated list option as a tuple (``none`` or nothing: the empty tuple)."""
    items = tuple(v.strip() for v in value.split(",") if v.strip())
    return () if items == ("none",) else items


def _parameter(field: dataclasses.Field[Any]) -> inspect.Parameter:
    name = field.name
    default = getattr(DEFAULTS, name)
    common: dict[str, Any] = {"envvar": envvar(name), "help": field_help(name)}
    allowed = allowed_values(name)
    annotation: Any
    if allowed_items(name) is not None:
        default = ",".join(default) or "none"
        annotation = Annotated[str, typer.Option(flag(name), **common)]
    elif allowed is not None:
        annotation = Annotated[Literal[allowed], typer.Option(flag(name), **common)]
    elif isinstance(default, bool):
        negative = "--no-" + flag(name)[2:]
        annotation = Annotated[bool, typer.Option(f"{flag(name)}/{negative}", **common)]
    elif isinstance(default, int):
        annotation = Annotated[int, typer.Option(flag(name), min=field.metadata.get("minimum"), **common)]
    else:  # a string, or a value spelled as one (tool_choice)
        default = str(default)
        annotation = Annotated[str, typer.Option(flag(name), **common)]
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)


def config_options(
    *, exclude: Collection[str] = (), only: Collection[str] | None = None
) -> Callable[[Callable[..., _R]], Callable[..., _R]]:
    """Decorate a command that takes ``config: RunConfig`` with one option per field
    (``only`` those, and not those in ``exclude``; the others stay at their defaults)."""
    names = [f.name for f in dataclasses.fields(RunConfig)]
    unknown = sorted((set(exclude) | set(only or ())) - set(names))
    if unknown:
        raise ValueError(f"not RunConfig fields: {', '.join(unknown)}")
    chosen = [
        f for f in dataclasses.fields(RunConfig) if f.name not in exclude and (only is None or f.name in only)
    ]

    def decorate(command: Callable[..., _R]) -> Callable[..., _R]:
        signature = inspect.signature(command, eval_str=True)
        if "config" not in signature.parameters:
            raise TypeError(f"{command.__name__} takes no 'config' parameter")
        own = [p for p in signature.parameters.values() if p.name != "config"]
        added = [_parameter(f) for f in chosen]

        @functools.wraps(command)
        def run(*args: Any, **kwargs: Any) -> _R:
            settings = {p.name: kwargs.pop(p.name) for p in added if p.name in kwargs}
            for name, value in settings.items():
                if allowed_items(name) is not None and isinstance(value, str):
                    settings[name] = split_list(value)
            return command(*args, config=DEFAULTS.replace(**settings), **kwargs)

        # typer reads the options from this signature (it stops at __signature__)
        run.__signature__ = signature.replace(parameters=[*own, *added])  # type: ignore[attr-defined]
        return run

    return decorate
