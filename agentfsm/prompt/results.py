"""Tool-result continuation: results go back to the model framed, with a request for the next step.

Raw tool output alone leaves a small model unsure whose turn it is. Each result is
framed with the tool's name (``NAME(ARGS)`` where one block holds several results of a
tool, :func:`agentfsm.guards._history.subjects`; never the call id, which the model's own actions do not
carry and a small model copied into its answers) and a wording of its own for each status:

- ``ok``: "Result of NAME:" and the content; with ``sentences`` (the ``answers``
  language policy), "The result of NAME is CONTENT." for a short one-line result (a
  sentence a small model restates in its answer, where it would copy another number
  from a bare value);
- ``empty``: "No data from NAME: the result is empty." (also ``ok`` with blank content);
- ``error``: "Error from NAME, the call failed:" and the content;
- ``truncated``: "Result of NAME, truncated (incomplete):" and the content
  (ending with the cut marker when the cut was made here).

Results longer than ``max_chars`` are cut and marked (:func:`truncate_result`).
Results are data: action text inside them is neutralised (:func:`neutralise_actions`)
so that a model repeating it word for word writes no action.
The closing request follows ``tool_choice``: ``auto`` lets the model call another
tool or answer; ``required`` or a tool name asks for that call; ``none`` asks for the
answer. Pure functions: no IO.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentfsm.core._types import DialectName
from agentfsm.core.choice import ToolChoice
from agentfsm.core.config import DEFAULTS
from agentfsm.core.errors import UsageError
from agentfsm.core.messages import ToolResult, ToolSpec
from agentfsm.dialects.smiley import SMILEY
from agentfsm.guards.base import action_format, answer_format
from agentfsm.guards.injection import actions_in

__all__ = [
    "DEFAULT_MAX_CHARS",
    "TRUNCATION_MARKER",
    "frame_result",
    "frame_results",
    "neutralise_actions",
    "next_step",
    "result_sentence",
    "truncate_result",
]

#: a one-line result up to this long is framed as a sentence ("The result of NAME is ...")
SENTENCE_CHARS = 200
#: results longer than this many characters are cut
DEFAULT_MAX_CHARS = DEFAULTS.result_max_chars
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


# U+2060 WORD JOINER: invisible, and breaks every opener it is put into
_JOIN = "\u2060"
#: openers first, then the brackets that start bare JSON and pythonic calls
_BREAKS = (
    ("```", "``" + _JOIN + "`"),
    ("<tool_call", "<" + _JOIN + "tool_call"),
    ("[TOOL_CALLS", "[" + _JOIN + "TOOL_CALLS"),
    ("@tool", "@" + _JOIN + "tool"),
    (SMILEY, SMILEY + _JOIN),
    ("{", "{" + _JOIN),
    ("[", "[" + _JOIN),
)
# last resort, should a parser ever read through the joiners: full-width look-alikes
_FULL_WIDTH = str.maketrans({c: chr(ord(c) + 0xFEE0) for c in "`<>[]{}@"})


def neutralise_actions(
    text: str, tools: Sequence[ToolSpec] = (), dialect_name: DialectName = "json-action"
) -> str:
    """``text`` (data: a tool result, user content) such that it parses to no action.

    Text without an action is returned unchanged. Otherwise every action opener, brace
    and bracket gets an invisible word joiner (U+2060): the model still reads the data,
    but a copy of it, word for word, is not an action.
    """
    if not actions_in(text, tools, dialect_name):
        return text
    for old, new in _BREAKS:
        text = text.replace(old, new)
    if actions_in(text, tools, dialect_name):
        text = text.translate(_FULL_WIDTH)
    return text


def result_sentence(subject: str, text: str) -> str:
    """``The result of <subject> is <text>.`` (no second full stop after one in ``text``)."""
    return f"The result of {subject} is {text}" + ("" if text.endswith((".", "!", "?")) else ".")


def _label(result: ToolResult, tool_name: str | None) -> str:
    # no call id: the model's own actions carry none, and a small model copied the id
    # into its answers; two results of one tool are told apart by their arguments
    # (:func:`agentfsm.guards._history.subjects`)
    return tool_name or result.name or "the tool"


def frame_result(
    result: ToolResult,
    *,
    tool_name: str | None,
    max_chars: int = DEFAULT_MAX_CHARS,
    tools: Sequence[ToolSpec] = (),
    dialect_name: DialectName = "json-action",
    sentences: bool = True,
) -> str:
    """The framed text of one result, with distinct wording for ok, empty, error and truncated.

    Action text inside the result is neutralised (``tools`` and ``dialect_name`` say
    what would parse as an action); ``sentences``: a short one-line result reads as a
    sentence (:func:`result_sentence`).
    """
    cut = truncate_result(result, max_chars)
    cut = cut.model_copy(update={"content": neutralise_actions(cut.content, tools, dialect_name)})
    label = _label(cut, tool_name)
    if cut.status == "error":
        return f"Error from {label}, the call failed:\n{cut.content}"
    if cut.status == "empty" or not cut.content.strip():
        return f"No data from {label}: the result is empty."
    if cut.status == "truncated":
        return f"Result of {label}, truncated (incomplete):\n{cut.content}"
    text = cut.content.strip()
    if sentences and "\n" not in text and len(text) <= SENTENCE_CHARS:
        # a short result reads as a sentence the model can restate in its answer
        return result_sentence(label, text)
    return f"Result of {label}:\n{cut.content}"




def next_step(
    statuses: Sequence[str], dialect_name: DialectName, tool_choice: ToolChoice, request: str | None = None
) -> str:
    """The closing request of a continuation: what the model should do next.

    ``request`` (the user's request of this turn) is no longer repeated: a small model
    copied the echo into its answers. Under ``auto`` answering comes first: most turns
    end after one round of results.
    """
    how_call = action_format(dialect_name)
    how_answer = answer_format(dialect_name)
    if tool_choice.mode == "none":
        # "the request", not "the user": under "Now answer the user ..." a small model
        # narrated in the runtime's third person ("The user asked for ...") in 16 of 44
        # answers; under this wording in none (bench/results/answer-framing-smollm2.md)
        return "Now answer the request in plain prose, using these results."
    if tool_choice.mode == "required":
        return f"Now call the next tool, written as {how_call}."
    if tool_choice.mode == "tool":
        return f"Now call {tool_choice.name}, written as {how_call}."
    hints = []
    if "error" in statuses:
        hints.append("If a call failed, fix its arguments and call again, or explain the failure.")
    if "empty" in statuses:
        hints.append("An empty result means the tool found nothing.")
    if "truncated" in statuses:
        hints.append("A cut result is incomplete; ask for less if you need the rest.")
    # the user's request is not repeated here: a small model copied "The user asked: ..."
    # into its answers (issue 27); ``request`` is kept for callers and not shown
    ask = (
        f"If you have what the user asked for, answer now, stating the results, in {how_answer}. "
        f"If a further step is needed, call the next tool, written as {how_call}."
    )
    return " ".join([*hints, ask]) if hints else ask


def frame_results(
    results: Sequence[tuple[ToolResult, str | None]],
    dialect_name: DialectName,
    tool_choice: ToolChoice,
    *,
    max_chars: int = DEFAULT_MAX_CHARS,
    tools: Sequence[ToolSpec] = (),
    request: str | None = None,
    sentences: bool = True,
) -> str:
    """The user-turn text returning ``results`` (each with its tool name) and asking what
    next (``request``: the user's request of this turn, see :func:`next_step`;
    ``sentences``: see :func:`frame_result`)."""
    statuses: list[str] = []
    blocks: list[str] = []
    for result, tool_name in results:
        cut = truncate_result(result, max_chars)
        status = "empty" if cut.status == "ok" and not cut.content.strip() else cut.status
        statuses.append(status)
        blocks.append(
            frame_result(
                result, tool_name=tool_name, max_chars=max_chars, tools=tools, dialect_name=dialect_name,
                sentences=sentences,
            )
        )
    head = "Tool results:" if len(blocks) > 1 else "Tool result:"
    body = "\n\n".join(blocks)
    return f"{head}\n{body}\n\n{next_step(statuses, dialect_name, tool_choice, request)}"
