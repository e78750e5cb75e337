"""Tool-result continuation: results go back to the model framed, with a request for the next step.

Raw tool output alone leaves a small model unsure whose turn it is. Each result is
framed with the tool's name and call id and a wording of its own for each status:

- ``ok``: "Result of NAME (call ID):" and the content;
- ``empty``: "No data from NAME (call ID): the result is empty." (also ``ok`` with blank content);
- ``error``: "Error from NAME (call ID), the call failed:" and the content;
- ``truncated``: "Result of NAME (call ID), truncated (incomplete):" and the content
  (ending with the cut marker when the cut was made here).

Results longer than ``max_chars`` are cut and marked (:func:`truncate_result`).
The closing request follows ``tool_choice``: ``auto`` lets the model call another
tool or answer; ``required`` or a tool name asks for that call; ``none`` asks for the
answer. Pure functions: no IO.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentfsm._types import ToolChoice
from agentfsm.errors import UsageError
from agentfsm.guards.base import action_format, answer_format
from agentfsm.messages import ToolResult

__all__ = [
    "DEFAULT_MAX_CHARS",
    "TRUNCATION_MARKER",
    "frame_result",
    "frame_results",
    "next_step",
    "truncate_result",
]

#: results longer than this many characters are cut
DEFAULT_MAX_CHARS = 8_000
#: appended to a cut result; ``{omitted}`` and ``{total}`` are filled in
TRUNCATION_MARKER = "\n[... result truncated: {omitted} of {total} characters omitted]"


def truncate_result(result: ToolResult, max_chars: int = DEFAULT_MAX_CHARS) -> ToolResult:
    """Cut ``result.content`` to ``max_chars`` characters, mark the cut, set status ``truncated``.

    A result within the cap is returned unchanged. An ``error`` result keeps its status
    (the error matters more than the cut); its content is cut and marked all the same.
    """
    if max_chars < 1:
        raise UsageError(f"max_chars must be at least 1, got {max_chars}")
    content = result.content
    if len(content) <= max_chars:
        return result
    kept = content[:max_chars]
    marker = TRUNCATION_MARKER.format(omitted=len(content) - len(kept), total=len(content))
    status = "error" if result.status == "error" else "truncated"
    return result.model_copy(update={"content": kept + marker, "status": status})


def _label(result: ToolResult, tool_name: str | None) -> str:
    name = tool_name or result.name or "the tool"
    return f"{name} (call {result.call_id})"


def frame_result(
    result: ToolResult, *, tool_name: str | None, max_chars: int = DEFAULT_MAX_CHARS
) -> str:
    """The framed text of one result, with distinct wording for ok, empty, error and truncated."""
    cut = truncate_result(result, max_chars)
    label = _label(cut, tool_name)
    if cut.status == "error":
        return f"Error from {label}, the call failed:\n{cut.content}"
    if cut.status == "empty" or not cut.content.strip():
        return f"No data from {label}: the result is empty."
    if cut.status == "truncated":
        return f"Result of {label}, truncated (incomplete):\n{cut.content}"
    return f"Result of {label}:\n{cut.content}"


def next_step(statuses: Sequence[str], dialect_name: str, tool_choice: ToolChoice) -> str:
    """The closing request of a continuation: what the model should do next."""
    how_call = action_format(dialect_name)
    how_answer = answer_format(dialect_name)
    if tool_choice == "none":
        return f"Now answer the user in {how_answer}, using these results. Do not call a tool."
    if tool_choice in ("required", "any"):
        return f"Now call the next tool, written as {how_call}."
    if tool_choice != "auto":
        return f"Now call {tool_choice}, written as {how_call}."
    hints = []
    if "error" in statuses:
        hints.append("If a call failed, fix its arguments and call again, or explain the failure.")
    if "empty" in statuses:
        hints.append("An empty result means the tool found nothing.")
    if "truncated" in statuses:
        hints.append("A cut result is incomplete; ask for less if you need the rest.")
    lead = " ".join(hints)
    ask = (
        f"Decide the next step: call another tool, written as {how_call}, "
        f"or, if you have what you need, answer the user in {how_answer}."
    )
    return f"{lead} {ask}" if lead else ask


def frame_results(
    results: Sequence[tuple[ToolResult, str | None]],
    dialect_name: str,
    tool_choice: ToolChoice,
    *,
    max_chars: int = DEFAULT_MAX_CHARS,
) -> str:
    """The user-turn text returning ``results`` (each with its tool name) and asking what next."""
    statuses: list[str] = []
    blocks: list[str] = []
    for result, tool_name in results:
        cut = truncate_result(result, max_chars)
        status = "empty" if cut.status == "ok" and not cut.content.strip() else cut.status
        statuses.append(status)
        blocks.append(frame_result(result, tool_name=tool_name, max_chars=max_chars))
    head = "Tool results:" if len(blocks) > 1 else "Tool result:"
    body = "\n\n".join(blocks)
    return f"{head}\n{body}\n\n{next_step(statuses, dialect_name, tool_choice)}"
