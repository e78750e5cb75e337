"""Scripted models that follow one action format only, for the calibrate and models-file tests.

:func:`follower` is a FakeUpstream script (or, with :func:`follower_backend`, a
ScriptedBackend's): it reads which format the contract asks for (each dialect's example
opener in the system message) and, when it is its own, answers the conversation's
request in that format: the expected calls, one batch per reply, then the expected
answer. Asked for any other format, it writes a sentence without a call, as a model
that cannot write that format does. The answers are keyed by the first user message.
"""

from __future__ import annotations

from agentfsm.eval.matching import OneOf

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentfsm.core.messages import PromptMessage, ToolCall
from agentfsm.dialects import get_dialect
from agentfsm.eval.calibrate import Item
from agentfsm.testing import ReceivedRequest

__all__ = ["MARKERS", "Answer", "asked_dialect", "follower", "item_answers", "prompt_follower"]

#: what each dialect's contract shows, and no other's
MARKERS = {
    "json-action": "```json action",
    "json-protocol": '{"action": {',
    "command": "@tool ",
    "smiley": "\U0001f60a" * 14,
}

_CANNOT = "Sorry, I cannot write my reply in that format."


@dataclass(frozen=True)
class Answer:
    """What a request needs: batches of calls (name, arguments), one per reply, then the answer."""

    batches: tuple[tuple[tuple[str, dict[str, Any]], ...], ...] = ()
    final: str = "Here is my answer."


def asked_dialect(system: str) -> str | None:
    """The dialect whose marker the contract shows (None when none or several do)."""
    found = [name for name, marker in MARKERS.items() if marker in system]
    return found[0] if len(found) == 1 else None


def _reply(dialect: str, messages: Sequence[Mapping[str, Any]], answers: Mapping[str, Answer]) -> str:
    system = "\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "system")
    if asked_dialect(system) != dialect:
        return _CANNOT
    question = next(str(m.get("content") or "") for m in messages if m.get("role") == "user")
    answer = next((a for key, a in answers.items() if key in question), None)
    if answer is None:
        return _CANNOT
    done = sum(1 for m in messages if m.get("role") == "assistant")
    format_ = get_dialect(dialect)
    if done < len(answer.batches):
        calls = [ToolCall(id=f"call_{i}", name=name, arguments=args) for i, (name, args) in enumerate(answer.batches[done])]
        return format_.render_calls(calls)
    return format_.render_final(answer.final)


def follower(dialect: str, answers: Mapping[str, Answer]) -> Callable[[ReceivedRequest], str]:
    """A FakeUpstream script that follows ``dialect`` only."""
    return lambda request: _reply(dialect, request.messages, answers)


def prompt_follower(dialect: str, answers: Mapping[str, Answer]) -> Callable[[Sequence[PromptMessage]], str]:
    """The same, as a ScriptedBackend's function of the prompt."""
    return lambda prompt: _reply(dialect, [m.model_dump() for m in prompt], answers)


def _first(values: Sequence[Any]) -> Any:
    return next(v for v in values if v != "")


def item_answers(items: Sequence[Item]) -> dict[str, Answer]:
    """The right answer to each calibration item, keyed by its question."""
    out: dict[str, Answer] = {}
    for item in items:
        if item.task is not None:
            task = item.task
            final = " ".join(a.values[0] if isinstance(a, OneOf) else str(a) for a in task.answer) or "Done."
            out[task.prompt] = Answer(tuple(((c.name, dict(c.args[0])),) for c in task.calls), final)
            continue
        assert item.case is not None
        question = next(m["content"] for m in item.case.messages if m["role"] == "user")
        calls = tuple(
            (name, {k: _first(v) for k, v in params.items() if any(x != "" for x in v)})
            for truth in item.case.ground_truth or ()
            for name, params in truth.items()
        )
        out[question] = Answer((calls,) if calls else (), "None of the offered tools answers that question.")
    return out
