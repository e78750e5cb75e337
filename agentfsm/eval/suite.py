"""One task of the suite: a request to an agent, the calls it needs, the results its answer states.

A task is one wording, in one language, of a base task (:mod:`agentfsm.eval.suite_data`). It
runs as one user message to an :class:`~agentfsm.runtime.agent.Agent` with the default
settings; its tools run (deterministic fakes, :mod:`agentfsm.eval.fake_tools`). It passes
when

- the calls made are exactly the expected ones, in any order, compared on values
  (:mod:`agentfsm.eval.matching`: numbers numerically, strings folded, local names
  accepted);
- the final answer is not blank and states every expected result (numbers, verbatim
  result strings): never a test of English words; a task that needs no tool expects no
  call and any non-blank answer;
- and the answer carries no runtime text (:mod:`agentfsm.eval.runtime_text`): an answer
  that copies the contract, a correction or the result framing is not the assistant's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal


from agentfsm.core.backend import Backend, GenerationOptions
from agentfsm.core.errors import AgentFSMError, BackendError
from agentfsm.core.events import ToolCallEvent, TranscriptEvent
from agentfsm.eval.fake_tools import TOOLS
from agentfsm.eval.matching import Call, OneOf, answer_matches, calls_match
from agentfsm.eval.runtime_text import CallsSpent, RunTexts

__all__ = ["KINDS", "SuiteTask", "SuiteResult", "run_suite_task"]

#: the kinds of task, in table order
KINDS: tuple[str, ...] = ("one call (auto)", "one call (required)", "two calls", "chain", "no tool")


@dataclass(frozen=True)
class SuiteTask:
    """One request (a wording of a base task in one language), its tools and what it must do."""

    #: ``BASE.LANGn``, e.g. ``add_8_5.en2``
    name: str
    base: str
    kind: str
    #: ISO 639-1 code of the request's language
    language: str
    prompt: str
    tools: tuple[str, ...]
    calls: tuple[Call, ...]
    #: every item must be stated in the answer: a number, or one of a OneOf's strings
    answer: tuple[float | OneOf, ...] = ()
    tool_choice: str = "auto"  # as spelled: auto, required or a tool name
    #: in the held-out split: no change is tuned on it
    held_out: bool = False

    @property
    def split(self) -> Literal["tuned", "held-out"]:
        """``tuned`` or ``held-out``."""
        return "held-out" if self.held_out else "tuned"


@dataclass(frozen=True)
class SuiteResult:
    """How one task went."""

    task: SuiteTask
    valid: bool
    #: the run ended with an accepted reply (not an error, not a spent budget)
    protocol_valid: bool
    #: model calls made (every completion: consensus candidates and extensions included)
    model_calls: int
    seconds: float
    calls: tuple[tuple[str, dict[str, Any]], ...] = ()
    answer: str = ""
    error: str | None = None
    #: why it failed: ``calls``, ``answer``, ``runtime text`` or the error's message
    why: str = ""
    #: the runtime text the answer copied, if any
    runtime_text: str | None = None
    #: the answer repeats the request (:func:`~agentfsm.eval.runtime_text.echoes`); counted, not failed
    echo: bool = False
    #: model calls spent on extensions, consensus candidates and corrections
    spent: CallsSpent = CallsSpent()


async def run_suite_task(
    backend: Backend,
    task: SuiteTask,
    options: GenerationOptions | None = None,
    transcript: Path | None = None,
    **agent_options: Any,
) -> SuiteResult:
    """Run ``task`` through an :class:`~agentfsm.runtime.agent.Agent` (defaults unless
    ``agent_options`` say otherwise) and check its calls and answer. An error of the
    model's run (a spent retry budget, a loop) is its result; one of the upstream
    (:class:`~agentfsm.core.errors.BackendError`) is raised: it is no measure of the model."""
    from agentfsm.runtime.agent import Agent  # the eval package loads the runtime lazily

    made: list[tuple[str, dict[str, Any]]] = []
    texts = RunTexts()

    def on_event(event: TranscriptEvent) -> None:
        texts(event)
        if isinstance(event, ToolCallEvent):
            made.append((event.call.name, dict(event.call.arguments)))

    agent = Agent(
        backend,
        [TOOLS[name] for name in task.tools],
        tool_choice=task.tool_choice,
        options=options,
        transcript=transcript,
        on_event=on_event,
        **agent_options,
    )
    start = time.perf_counter()
    try:
        result = await agent.arun(task.prompt)
    except BackendError:  # the upstream failed, not the model: the eval stops (and keeps what ran)
        raise
    except AgentFSMError as exc:
        seconds = time.perf_counter() - start
        return SuiteResult(task, False, False, texts.model_calls, seconds, tuple(made), error=type(exc).__name__,
                          why=str(exc)[:200], spent=texts.spent)
    seconds = time.perf_counter() - start
    calls_ok = calls_match(task.calls, made)
    answer_ok = answer_matches(result.content, task.answer)
    leak = texts.finding(result.content)
    why = "calls" if not calls_ok else "answer" if not answer_ok else "runtime text" if leak else ""
    return SuiteResult(
        task,
        valid=not why,
        protocol_valid=not result.exhausted,
        model_calls=texts.model_calls,
        spent=texts.spent,
        seconds=seconds,
        calls=tuple(made),
        answer=result.content,
        why=why,
        runtime_text=leak,
        echo=texts.echo(result.content),
    )
