"""History projection: the normalized conversation as plain chat text for the model.

The contract becomes the system prompt (the client's own system text follows it);
earlier assistant calls go back as action text in the active dialect (under
``tool_choice="none"`` they are left out: the framed results name each call, and no action
text is shown to a model that must not write one); tool results go back as a framed
continuation in a user turn. Tool results and user turns are data:
action text inside them is neutralised (:func:`~agentfsm.prompt.results.neutralise_actions`),
so a model that repeats it word for word writes no action. Consecutive turns of the same role are
merged, since many chat templates require alternation.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentfsm.core._types import DialectName
from agentfsm.core.choice import ToolChoice
from agentfsm.core.config import DEFAULTS
from agentfsm.guards._history import subjects
from agentfsm.prompt.results import frame_results, neutralise_actions
from agentfsm.prompt.contract import render_contract
from agentfsm.dialects import get_dialect
from agentfsm.core.messages import (
    AssistantMessage,
    Message,
    PromptMessage,
    SystemMessage,
    ToolMessage,
    ToolCall,
    ToolResult,
    ToolSpec,
    UserMessage,
)

__all__ = ["project_history"]


def project_history(
    history: Sequence[Message],
    tools: Sequence[ToolSpec],
    *,
    dialect: DialectName = DEFAULTS.dialect,
    tool_choice: ToolChoice = ToolChoice.AUTO,
    parallel: bool = DEFAULTS.parallel,
    contract: str | None = None,
    sentences: bool = True,
    answer_only: bool = False,
) -> list[PromptMessage]:
    """Turn ``history`` into the prompt sent to a text-only model (``sentences``: short
    results framed as sentences, :func:`~agentfsm.prompt.results.frame_result`;
    ``answer_only``: the results close by asking for the answer, as under
    ``tool_choice="none"``, the calls still shown)."""
    d = get_dialect(dialect)
    calls: dict[str, ToolCall] = {}  # by id
    system_parts: list[str] = []
    if tools or tool_choice != ToolChoice.AUTO:
        system_parts.append(
            contract
            if contract is not None
            else render_contract(tools, dialect=dialect, tool_choice=tool_choice, parallel=parallel)
        )
    out: list[PromptMessage] = []
    pending: list[ToolResult] = []
    request: str | None = None  # the latest user request (not a runtime correction)

    def flush_results() -> None:
        if pending:
            # several results of one tool in a block are told apart by their arguments
            known = [calls.get(r.call_id) for r in pending]
            named = subjects([(r.name or (c.name if c else None), c) for r, c in zip(pending, known, strict=True)])
            text = frame_results(
                list(zip(pending, named, strict=True)), dialect_name=dialect,
                tool_choice=ToolChoice.NONE if answer_only else tool_choice, tools=tools,
                request=request, sentences=sentences,
            )
            out.append(PromptMessage(role="user", content=text))
            pending.clear()

    for msg in history:
        if isinstance(msg, SystemMessage):
            system_parts.append(msg.content)
            continue
        if isinstance(msg, ToolMessage):
            pending.append(msg.result)
            continue
        flush_results()
        if isinstance(msg, UserMessage):
            # the runtime's corrections are ours (their example action is meant to be read)
            content = msg.content if msg.correction is not None else neutralise_actions(msg.content, tools, dialect)
            if msg.correction is None:
                request = content
            out.append(PromptMessage(role="user", content=content))
        elif isinstance(msg, AssistantMessage):
            text_parts = [msg.content] if msg.content else []
            if msg.tool_calls:
                calls.update((call.id, call) for call in msg.tool_calls)
                if tool_choice.mode != "none":
                    text_parts.append(d.render_calls(list(msg.tool_calls)))
            if text_parts or not msg.tool_calls:  # a turn of calls alone, left out under none
                out.append(PromptMessage(role="assistant", content="\n".join(text_parts)))
    flush_results()
    merged: list[PromptMessage] = []
    if system_parts:
        merged.append(PromptMessage(role="system", content="\n\n".join(system_parts)))
    for m in out:
        if merged and merged[-1].role == m.role and m.role != "system":
            merged[-1] = PromptMessage(role=m.role, content=merged[-1].content + "\n\n" + m.content)
        else:
            merged.append(m)
    return merged
