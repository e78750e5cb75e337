"""Benchmark: derive_state on long histories, as a ratio to a plain loop over the same list.

The reference loop touches every message once (reads its role), the least any
history scan can do. derive_state reads from the end only as far as the state depends
on (the latest step, usually), so on most histories its ratio is near 0; the worst-case
rows read the whole turn, and there the ratio says what classifying and matching calls
costs on top of the plain loop. Two sizes show that the cost per message stays flat
(linear time).
"""

from __future__ import annotations

import time
from functools import partial
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agentfsm.core.messages import AssistantMessage, Message, ToolCall, ToolMessage, ToolResult, UserMessage
from agentfsm.core.states import derive_state

__all__ = ["run"]

SIZES = (10_000, 100_000)
REPEATS = 5


def _models(n: int) -> list[Message]:
    out: list[Message] = []
    i = 0
    while len(out) < n:
        out += [
            UserMessage(content="question"),
            AssistantMessage(tool_calls=(ToolCall(id=f"a{i}", name="add"), ToolCall(id=f"b{i}", name="mul"))),
            ToolMessage(result=ToolResult(call_id=f"b{i}", content="2")),
            ToolMessage(result=ToolResult(call_id=f"a{i}", content="1")),
            AssistantMessage(content="answer"),
        ]
        i += 1
    return out[:n]


def _turn(n: int, *, complete: bool) -> list[Message]:
    """One user turn of tool rounds, ``n`` messages long (an agent loop): each round's
    two calls get both their results (``complete``), or only one (an open round)."""
    out: list[Message] = [UserMessage(content="question")]
    i = 0
    while len(out) < n:
        results = [ToolMessage(result=ToolResult(call_id=f"b{i}", content="2"))] if complete else []
        out += [
            AssistantMessage(tool_calls=(ToolCall(id=f"a{i}", name="add"), ToolCall(id=f"b{i}", name="mul"))),
            *results,
            ToolMessage(result=ToolResult(call_id=f"a{i}", content="1")),
        ]
        i += 1
    return out[:n]


#: the runtime's correction of the reply before it
_CORRECTION = UserMessage(content="call a tool", correction="unknown_tool")


def _one_turn(n: int) -> list[Message]:
    """One user turn of complete rounds ending in an answer: no user message near the end."""
    return [*_turn(n - 1, complete=True), AssistantMessage(content="answer")]


def _one_turn_corrected(n: int) -> list[Message]:
    """:func:`_one_turn` whose last reply the runtime corrected: the correction returns to
    the decision point the latest complete round of results set."""
    return [*_one_turn(n - 1), _CORRECTION]


def _worst_case(n: int) -> list[Message]:
    """One user turn whose rounds never get all their results, and whose last reply was
    corrected: the correction returns to the user turn's decision point, so derive_state
    reads the whole turn (its worst case: the full scan)."""
    return [*_turn(n - 2, complete=False), AssistantMessage(content="answer"), _CORRECTION]


def _openai(models: Sequence[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in models:
        if isinstance(m, ToolMessage):
            out.append({"role": "tool", "tool_call_id": m.result.call_id, "content": m.result.content})
        elif isinstance(m, AssistantMessage) and m.tool_calls:
            out.append({
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": "{}"}}
                    for c in m.tool_calls
                ],
            })
        else:
            out.append({"role": m.role, "content": getattr(m, "content", "")})
            if getattr(m, "correction", None):
                out[-1]["correction"] = m.correction
    return out


def _anthropic(models: Sequence[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in models:
        if isinstance(m, ToolMessage):
            block = {"type": "tool_result", "tool_use_id": m.result.call_id, "content": m.result.content}
            if out and isinstance(out[-1]["content"], list) and out[-1]["role"] == "user":
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
        elif isinstance(m, AssistantMessage):
            blocks: list[dict[str, Any]] = [{"type": "text", "text": m.content or "checking"}]
            blocks += [{"type": "tool_use", "id": c.id, "name": c.name, "input": {}} for c in m.tool_calls]
            out.append({"role": "assistant", "content": blocks})
        else:
            out.append({"role": "user", "content": getattr(m, "content", "")})
            if getattr(m, "correction", None):
                out[-1]["correction"] = m.correction
    return out


def _plain_loop(messages: Sequence[Message | Mapping[str, Any]]) -> int:
    seen = 0
    for m in messages:
        role = m["role"] if isinstance(m, Mapping) else m.role
        seen += role == "tool"
    return seen


def _best(fn: Callable[[], object]) -> float:
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def run() -> list[dict[str, Any]]:
    """Time derive_state against a plain loop, per history shape and size."""
    rows: list[list[Any]] = []
    for size in SIZES:
        models = _models(size)
        one_turn = _one_turn(size)
        corrected = _one_turn_corrected(size)
        worst = _worst_case(size)
        shapes: dict[str, Sequence[Message | Mapping[str, Any]]] = {
            "our models": models,
            "OpenAI dicts": _openai(models),
            "Anthropic dicts": _anthropic(models),
            "our models, one turn": one_turn,
            "OpenAI dicts, one turn": _openai(one_turn),
            "Anthropic dicts, one turn": _anthropic(one_turn),
            "our models, one turn, corrected": corrected,
            "OpenAI dicts, one turn, corrected": _openai(corrected),
            "Anthropic dicts, one turn, corrected": _anthropic(corrected),
            "our models, worst case": worst,
            "OpenAI dicts, worst case": _openai(worst),
            "Anthropic dicts, worst case": _anthropic(worst),
        }
        for shape, history in shapes.items():
            derive = _best(partial(derive_state, history))
            loop = _best(partial(_plain_loop, history))
            rows.append([
                shape,
                len(history),
                round(derive * 1e3, 3),
                round(loop * 1e3, 2),
                round(derive / loop, 1),
                round(derive / len(history) * 1e9),
            ])
    return [
        {
            "title": "derive_state on long histories",
            "columns": [
                "history",
                "messages",
                "derive_state ms",
                "plain loop ms",
                "ratio to plain loop",
                "ns per message",
            ],
            "rows": rows,
            "notes": (
                f"Best of {REPEATS}. Histories repeat user / 2 calls / 2 results (reversed) / answer. "
                "derive_state reads back from the end to the latest real user turn, or to the latest "
                "assistant reply when no correction after it returns to an earlier decision point, so "
                "it costs the latest step, not the history. 'One turn': a single user turn of many tool "
                "rounds (an agent loop, a coding agent's session) ending in an answer; 'corrected': the "
                "same, whose last reply the runtime corrected. 'Worst case': one turn whose rounds never "
                "get all their results, with a corrected last reply: the correction returns to the user "
                "turn's decision point, so the whole turn is read, and its ratio is the full scan's own "
                "cost. The plain loop reads each message's role once. Anthropic histories hold fewer "
                "messages because results of one turn share a user message."
            ),
        }
    ]


if __name__ == "__main__":
    from run import print_tables  # bench/run.py

    print_tables(run(), __file__)
