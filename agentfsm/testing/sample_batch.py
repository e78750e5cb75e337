"""A sample batch with every outcome, run on a scripted model: data for reports and benchmarks.

:func:`write_sample_batch` runs ``runs`` multiplication tasks through the real batch
controller (``run_batch_sync``, the example ``multiply`` tool, transcripts on) with a
:class:`~agentfsm.backends.scripted.ScriptedBackend` that answers each task by its
number, so every kind of run is there in known proportions:

========  =====================================================  ==================
task % 8  the scripted model                                      outcome
========  =====================================================  ==================
0-4       calls ``multiply``, then states the product             ok
5         first a call with a wrong argument (``schema``), then   ok, 1 correction
          the right call, then the product
6         under ``tool_choice: required``, refuses four times     failed
          (``RetryBudgetExceeded``)
7         under ``auto``, calls an unknown tool four times, with  exhausted
          prose beside the last
========  =====================================================  ==================

The directory gets ``tasks.jsonl``, ``results.jsonl`` and ``transcripts/``: what
``agentfsm batch tasks.jsonl -o results.jsonl --transcripts transcripts`` writes.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path

from agentfsm.backends.scripted import ScriptedBackend
from agentfsm.core.messages import PromptMessage

__all__ = ["OUTCOME_OF_KIND", "sample_backend", "sample_reply", "write_sample_batch"]

#: the outcome each ``task number % 8`` ends with
OUTCOME_OF_KIND: tuple[str, ...] = ("ok",) * 6 + ("failed", "exhausted")
_TASK = re.compile(r"task (\d+):")


def _action(tool: str, **arguments: object) -> str:
    return "```json action\n" + json.dumps({"tool": tool, "args": arguments}) + "\n```"


def _operands(number: int) -> tuple[int, int]:
    return 2 + number % 17, 3 + number % 11


def sample_reply(messages: Sequence[PromptMessage]) -> str:
    """The scripted model's reply to a conversation of the sample batch."""
    first = next((m.content for m in messages if m.role == "user" and _TASK.search(m.content)), "")
    found = _TASK.search(first)
    number = int(found.group(1)) if found else 0
    a, b = _operands(number)
    turn = sum(1 for m in messages if m.role == "assistant")
    kind = number % 8
    if kind == 6:
        return "I don't have access to any tools, so I cannot do that."
    if kind == 7:
        return ("I will look it up." + "\n" if turn >= 3 else "") + _action("lookup_product", a=a, b=b)
    script = [_action("multiply", a=a, b=b), f"The product is {a * b}."]
    if kind == 5:
        script.insert(0, _action("multiply", x=a, y=b))
    return script[min(turn, len(script) - 1)]


def sample_backend() -> ScriptedBackend:
    """The scripted model of the sample batch (answers each task by its number)."""
    return ScriptedBackend(sample_reply)


def write_sample_batch(directory: str | os.PathLike[str], runs: int, *, concurrency: int = 16) -> Path:
    """Run the sample batch of ``runs`` tasks into ``directory``; returns the results file."""
    from agentfsm.batch.controller import run_batch_sync

    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    tasks = root / "tasks.jsonl"
    lines = []
    for number in range(runs):
        a, b = _operands(number)
        task = {"id": f"task-{number:05d}", "prompt": f"task {number}: what is {a} times {b}?"}
        if number % 8 == 6:
            task["tool_choice"] = "required"
        lines.append(json.dumps(task))
    tasks.write_text("\n".join(lines) + "\n", encoding="utf-8")
    results = root / "results.jsonl"
    run_batch_sync(
        tasks,
        output=results,
        backend=sample_backend(),
        tools_module="agentfsm.testing.example_tools:TOOLS",
        transcripts_dir=root / "transcripts",
        concurrency=concurrency,
        ramp=0,
    )
    return results
