"""One batch task: its input line, its result line, and the per-task function.

:func:`run_task` runs one :class:`Task` through the agent loop and always returns a
:class:`TaskResult` (a failed run is a result with ``ok=False``, never an exception),
so the local controller (:mod:`agentfsm.batch.controller`) and the Ray adapter
(:mod:`agentfsm.batch.on_ray`) share it unchanged.

A task line is a JSON object::

    {"id": "q1", "prompt": "What is 2 + 2?"}
    {"id": "q2", "messages": [{"role": "user", "content": "..."}],
     "tools": [{"type": "function", "function": {"name": "calculate", ...}}],
     "tool_choice": "auto", "metadata": {"split": "dev"}}

``messages`` are OpenAI chat-shaped (or agentfsm's own normalized shape); ``tools`` are
OpenAI- or Anthropic-shaped; ``tool_choice`` is ``auto | none | required``, a tool name,
or the OpenAI/Anthropic object forms. The tools' results come from the Python module
named by ``tools_module``; a task without ``tools`` is offered all of that module's tools:
every tool of ``MODULE:ATTR``, or the ``TOOLS`` list of a plain ``MODULE``. A plain module
without a ``TOOLS`` list does not say which of its functions are tools, so a task without
``tools`` is then refused before the batch starts (``"tools": []`` asks for none).
"""

from __future__ import annotations

import asyncio
import inspect
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from hashlib import sha256
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agentfsm.core.choice import ToolChoice
from agentfsm.core.backend import Backend, GenerationOptions
from agentfsm.core.config import DEFAULTS, RunConfig
from agentfsm.core.errors import RequestError, ToolSpecError, UsageError
from agentfsm.core.messages import Message, ToolSpec, UserMessage
from agentfsm.runtime.tally import Tally
from agentfsm.runtime.transcript import prepare_transcripts_dir
from agentfsm.runtime.tools import (
    RegisteredTool,
    ToolRegistry,
    callable_executor,
    idempotency_scope,
    import_tools_module,
    load_tools,
)

__all__ = [
    "Task",
    "TaskResult",
    "TaskSettings",
    "ToolProvider",
    "run_task",
    "transcript_name",
    "validate_tasks",
]


class Task(BaseModel):
    """One line of a tasks file."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    prompt: str | None = None
    messages: list[dict[str, Any]] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    #: carried through untouched; not sent to the model
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("id", mode="before")
    @classmethod
    def _id_as_text(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("id must be a string or an integer")
        if isinstance(value, int):
            return str(value)
        if isinstance(value, str) and not value.strip():
            raise ValueError("id must not be empty")
        return value

    @model_validator(mode="after")
    def _one_input(self) -> Task:
        if (self.prompt is None) == (self.messages is None):
            raise ValueError("a task needs exactly one of 'prompt' or 'messages'")
        if self.messages is not None and not self.messages:
            raise ValueError("'messages' is empty: a task needs a conversation for the model to answer")
        return self

    def history(self) -> list[Message]:
        """The conversation to start from (OpenAI-shaped or agentfsm-shaped messages)."""
        if self.prompt is not None:
            return [UserMessage(content=self.prompt)]
        from agentfsm.protocols import read_conversation

        try:
            return read_conversation(self.messages or [])
        except RequestError as exc:
            raise UsageError(f"task {self.id!r}: {exc}") from exc

    def specs(self) -> tuple[ToolSpec, ...] | None:
        """The tools the task offers (None: all of the tools module's)."""
        if self.tools is None:
            return None
        try:
            return tuple(ToolSpec.from_any(t) for t in self.tools)
        except ToolSpecError as exc:
            raise UsageError(f"task {self.id!r}: {exc}") from exc

    @field_validator("tool_choice")
    @classmethod
    def _choice_reads(cls, value: str | dict[str, Any] | None) -> str | dict[str, Any] | None:
        if value is not None:
            _read_choice(value)  # a bad one names its line when the file is read
        return value

    def choice(self, default: ToolChoice) -> ToolChoice:
        """The task's ``tool_choice`` (a spelling, or the OpenAI / Anthropic object forms)."""
        return default if self.tool_choice is None else _read_choice(self.tool_choice)


def _read_choice(raw: str | dict[str, Any]) -> ToolChoice:
    """A task's ``tool_choice`` as the value (a ValueError for one it cannot be)."""
    if isinstance(raw, str) and raw.strip():
        return ToolChoice.parse(raw)
    if isinstance(raw, Mapping):
        kind = raw.get("type")
        fn = raw.get("function")
        if kind in ("auto", "none", "any"):
            return ToolChoice.parse(str(kind))
        if kind == "tool" and isinstance(raw.get("name"), str) and raw["name"].strip():
            return ToolChoice.of_tool(str(raw["name"]))
        if kind == "function" and isinstance(fn, Mapping) and isinstance(fn.get("name"), str) and fn["name"].strip():
            return ToolChoice.of_tool(str(fn["name"]))
    raise ValueError(
        f"must be auto, none, required, a tool's name, or an OpenAI or Anthropic tool_choice object; got {raw!r}"
    )


class TaskResult(BaseModel):
    """One line of a results file."""

    model_config = ConfigDict(extra="ignore")

    id: str
    ok: bool
    content: str | None = None
    #: ``{"call": ToolCall dump, "result": ToolResult dump or None}``, in order
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    #: model calls made (accepted replies and corrected ones)
    steps: int = 0
    corrections: int = 0
    usage: dict[str, int] = Field(default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0})
    #: ``"ErrorClass: message"`` when ``ok`` is false
    error: str | None = None
    seconds: float = 0.0
    #: corrections by guard name (``{"schema": 1, "refusal": 2}``)
    guards: dict[str, int] = Field(default_factory=dict)
    transcript: str | None = None


@dataclass(frozen=True)
class TaskSettings:
    """What every task of a batch shares (picklable, for Ray).

    ``run.tool_choice`` is the choice of a task that names none. ``options``: how each
    model call of every task samples (a task line carries no generation options).
    """

    run: RunConfig = DEFAULTS
    options: GenerationOptions = field(default_factory=GenerationOptions)
    tools_module: str | None = None
    transcripts_dir: str | None = None


class ToolProvider:
    """The implementations of a tools module, by tool name.

    ``ref`` is ``"package.module:ATTR"`` (a list of callables / a ToolRegistry, as for
    ``agentfsm run --tools``) or ``"package.module"`` (its ``TOOLS`` list if it has one,
    and any of its functions, looked up by the tool's name).
    """

    def __init__(self, ref: str | None) -> None:
        self.ref = ref
        #: the listed tools (the module's ``TOOLS``, or ``MODULE:ATTR``), by name
        self._impls: dict[str, RegisteredTool] = {}
        #: the module's other functions, looked up by a task's tool name
        self._found: dict[str, RegisteredTool] = {}
        self._module: Any = None
        #: whether the module lists its tools (what a task without ``tools`` is offered)
        self._listed = True
        if ref is None:
            return
        if ":" in ref:
            items = load_tools(ref)
        else:
            self._module = import_tools_module(ref)
            self._listed = hasattr(self._module, "TOOLS")
            items = load_tools(f"{ref}:TOOLS") if self._listed else []
        for item in items:
            reg = item if isinstance(item, RegisteredTool) else RegisteredTool(ToolSpec.from_callable(item), callable_executor(item))
            self._impls[reg.spec.name] = reg

    def implementation(self, name: str) -> RegisteredTool | None:
        """The implementation of tool ``name``, if the module has one."""
        found = self._impls.get(name) or self._found.get(name)
        if found is not None:
            return found
        fn = getattr(self._module, name, None) if self._module is not None else None
        if callable(fn) and not inspect.isclass(fn):
            # kept apart from the listed tools: a task without ``tools`` is offered those only
            found = self._found[name] = RegisteredTool(ToolSpec.from_callable(fn, name=name), callable_executor(fn))
        return found

    def registry(self, task: Task) -> ToolRegistry:
        """The task's tools (its specs, the module's implementations) as a registry."""
        specs = task.specs()
        if specs is None:
            if not self._listed:
                # offering every function of the module would hand the model its helpers too
                raise UsageError(
                    f"task {task.id!r} names no tools, and tools module {self.ref!r} has no TOOLS list "
                    "to offer it: add a TOOLS list to the module (or name a list: "
                    f"{self.ref}:ATTR), or give the task its \"tools\" (\"tools\": [] for none)"
                )
            return ToolRegistry(list(self._impls.values()))
        tools: list[RegisteredTool] = []
        for spec in specs:
            impl = self.implementation(spec.name)
            if impl is None:
                if self.ref is None:
                    raise UsageError(
                        f"task {task.id!r} offers tool {spec.name!r}, but no tools module was given to run it "
                        "(pass --tools-module MODULE, or tools_module= from Python)"
                    )
                raise UsageError(
                    f"task {task.id!r} offers tool {spec.name!r}, which tools module {self.ref!r} does not implement"
                )
            tools.append(RegisteredTool(spec, impl.execute))
        return ToolRegistry(tools)


def transcript_name(task_id: str) -> str:
    """A file name for a task's transcript: the id when it is safe, else id slug + hash."""
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,100}", task_id):
        return f"{task_id}.jsonl"
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", task_id)[:60].strip("._") or "task"
    return f"{slug}-{sha256(task_id.encode()).hexdigest()[:12]}.jsonl"


async def run_task(
    task: Task,
    backend: Backend,
    settings: TaskSettings,
    provider: ToolProvider | None = None,
) -> TaskResult:
    """Run one task to a :class:`TaskResult`; a failure is recorded, not raised.

    Misuse found before the run starts (a tool the module lacks, bad messages) is
    recorded the same way; the controller checks for it before running anything.
    """
    from agentfsm.runtime.agent import Agent

    tally = Tally()  # the agent keeps it current: a run that raises is reported as far as it got
    started = time.perf_counter()
    transcript: Path | None = None
    content: str | None = None
    error: str | None = None
    try:
        provider = provider or ToolProvider(settings.tools_module)
        registry = provider.registry(task)
        if settings.transcripts_dir is not None:
            transcript = Path(settings.transcripts_dir) / transcript_name(task.id)
            transcript.parent.mkdir(parents=True, exist_ok=True)
            transcript.unlink(missing_ok=True)  # a killed earlier attempt left a partial one
        choice = task.choice(settings.run.tool_choice)
        # the same config unless the task names its own choice (a replace checks every field)
        run = settings.run if choice == settings.run.tool_choice else settings.run.replace(tool_choice=choice)
        agent = Agent(
            backend,
            registry,
            config=run,
            options=settings.options,
            transcript=transcript,
            transcript_config={"producer": "batch", "task": task.id},
        )
        with idempotency_scope(task.id):  # a re-run task's calls get the same keys
            result = await agent.arun(task.history(), tally=tally)
        content = result.content
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # every failure of one task is data, not a batch crash
        error = f"{type(exc).__name__}: {exc}"
    return TaskResult(
        id=task.id,
        ok=error is None,
        content=content,
        tool_calls=tally.calls,
        steps=tally.model_calls,
        corrections=tally.corrections,
        usage={"prompt_tokens": tally.usage.prompt_tokens, "completion_tokens": tally.usage.completion_tokens},
        error=error,
        seconds=round(time.perf_counter() - started, 4),
        guards=tally.guards,
        transcript=str(transcript) if transcript is not None else None,
    )


def validate_tasks(tasks: Sequence[Task], provider: ToolProvider, settings: TaskSettings) -> None:
    """Fail before running anything when a task cannot run at all, or its transcript
    could not be written (clear UsageError)."""
    if settings.transcripts_dir is not None:
        prepare_transcripts_dir(settings.transcripts_dir)
    for task in tasks:
        task.history()
        registry = provider.registry(task)
        choice = task.choice(settings.run.tool_choice)
        if choice.name is not None and choice.name not in registry:
            raise UsageError(f"task {task.id!r}: tool_choice names {choice.name!r}, which it does not offer")
