"""The ``json-protocol`` dialect: the whole reply is one JSON object.

``{"thought": "...", "action": {"tool": NAME, "args": {...}}}`` calls a tool;
``{"final": {"content": ...}}`` ends the turn. ``strict`` parsing rejects any text
outside the object; the thought is capped at :data:`THOUGHT_CAP` characters.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentfsm.core._types import DialectName
from agentfsm.core.choice import ToolChoice
from agentfsm.dialects._render import dumps, example_call
from agentfsm.core.messages import ToolCall, ToolSpec

__all__ = ["THOUGHT_CAP", "JsonProtocolDialect"]

#: the longest thought kept; a longer one is cut (problem ``thought_too_long``)
THOUGHT_CAP = 200


class JsonProtocolDialect:
    """One JSON object per reply: an action, or the final answer."""

    name: DialectName = "json-protocol"
    action_name = "JSON action object"
    action_format = 'one JSON object {"action": {"tool": NAME, "args": {...}}}'
    answer_format = 'one JSON object {"final": {"content": <your answer>}}'

    @property
    def opener(self) -> str:
        """Every reply starts an object with a quoted key."""
        return '{"'

    def render_call(self, call: ToolCall) -> str:
        """``{"action": {"tool": ..., "args": {...}}}``."""
        return dumps({"action": {"tool": call.name, "args": call.arguments}})

    def render_calls(self, calls: Sequence[ToolCall]) -> str:
        """Several calls go in one object, as a list of actions."""
        if len(calls) == 1:
            return self.render_call(calls[0])
        return dumps({"action": [{"tool": c.name, "args": c.arguments} for c in calls]})

    def render_final(self, content: str) -> str:
        """``{"final": {"content": ...}}``."""
        return dumps({"final": {"content": content}})

    def render_instructions(
        self, tools: Sequence[ToolSpec], tool_choice: ToolChoice, parallel: bool
    ) -> str:
        """How to write the one JSON object, with one example of each kind."""
        call = example_call(tools)
        lines = [
            "Reply with one JSON object and nothing else. No markdown, no other text.",
            "To call a tool, like this:",
            self.render_call(call),
        ]
        if parallel:
            lines.append('To make several calls at once, "action" may be a list of such {"tool": ..., "args": ...} objects.')
        lines += [
            f"When you are done: {self.answer_format}.",
            f'You may put a short "thought" (under {THOUGHT_CAP} characters) before the action.',
        ]
        return "\n".join(lines)
