"""The ``json-action`` dialect (the default): fenced ```` ```json action ```` blocks.

A reply may hold several blocks and prose around them. Plain ```` ```json ```` fences
holding a call are accepted too; text inside any other fence is never a call.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Final

from agentfsm.core._types import DialectName
from agentfsm.core.choice import ToolChoice
from agentfsm.dialects._format import Format, Opened, Prose, Scan
from agentfsm.dialects._readers import CloserReader, fence_verdict
from agentfsm.dialects._render import dumps, example_call
from agentfsm.dialects._tokens import OpenerDef, lit
from agentfsm.dialects.base import ProseAnswers
from agentfsm.core.messages import ToolCall, ToolSpec

if TYPE_CHECKING:
    from agentfsm.dialects._decode import Block

__all__ = [
    "ACTION_INFOS",
    "FENCE",
    "FENCE_CLOSER",
    "FENCE_INFO",
    "FENCE_INFO_MAX",
    "FORMATS",
    "JSON_INFOS",
    "FenceFormat",
    "JsonActionDialect",
    "classify_fence",
]

#: fence info strings (lower-cased, spaces collapsed) that always mark an action block
ACTION_INFOS = frozenset(
    {
        "json action",
        "json-action",
        "json_action",
        "jsonc action",
        "action",
        "tool_call",
        "tool_calls",
        "tool-call",
        "tool",
    }
)
#: fence info strings whose block is a call only when its JSON has the shape of one
JSON_INFOS = frozenset({"", "json", "jsonc", "json5"})


class JsonActionDialect(ProseAnswers):
    """Actions as fenced ```` ```json action ```` blocks, ``{"tool": ..., "parameters": {...}}``."""

    name: DialectName = "json-action"
    action_name = "```json action``` block"
    action_format = 'a ```json action``` block with {"tool": NAME, "parameters": {...}}'
    answer_format = "plain text"

    @property
    def opener(self) -> str:
        """The fence line an action starts with."""
        return "```json action\n"

    def render_call(self, call: ToolCall) -> str:
        """One fenced action block."""
        return f"```json action\n{dumps({'tool': call.name, 'parameters': call.arguments})}\n```"

    def render_instructions(
        self, tools: Sequence[ToolSpec], tool_choice: ToolChoice, parallel: bool
    ) -> str:
        """How to write an action, with one example."""
        lines = [
            "To call a tool, write an action block exactly like this:",
            self.render_call(example_call(tools)),
            'Put the tool name in "tool" and its arguments in "parameters".',
            "Write one block per call." if parallel else "Write only one block.",
            "To answer without a tool, write plain text with no block.",
        ]
        return "\n".join(lines)


#: ```` ``` ```` opens a fence; what follows on its line says what kind
FENCE = OpenerDef("fence", (lit("```"),))
FENCE_CLOSER = "```"
#: the fence info: characters an info string may hold (bounded: longer is "other")
FENCE_INFO = re.compile(r"[`A-Za-z0-9 \t_+.\-\r]{0,64}")
FENCE_INFO_MAX = 64


@lru_cache(maxsize=256)
def classify_fence(info: str) -> str:
    """``"action"``, ``"json"`` (a call only if shaped as one) or ``"other"`` (never a call)."""
    key = " ".join(info.strip("`").lower().split())
    if key in ACTION_INFOS:
        return "action"
    if key in JSON_INFOS:
        return "json"
    return "other"


class FenceFormat(Format):
    """Fenced blocks: ```` ```json action ```` always an action, ```` ```json ```` when
    shaped as a call, any other fence text (its body is prose up to the closing fence)."""

    sources = {"fence-action": "json-action", "fence-json": "json"}
    openers = (FENCE,)
    lenient = frozenset({"fence-json"})
    closer = FENCE_CLOSER
    cut = {
        "fence-action": "an action fence without its closing ```",
        "fence-json": "a json fence without its closing ```",
    }

    def open(self, scan: Scan, buf: str, p: int, kind: str, end: int, final: bool) -> Opened | Prose | None:
        """The info string decides; the character after it too (known only once it came)."""
        n = len(buf)
        e = FENCE_INFO.match(buf, end).end()  # type: ignore[union-attr]
        if not final and e == n and e - end <= FENCE_INFO_MAX:
            return None
        info = buf[end:e]
        fence = classify_fence(info)
        c = buf[e] if e < n else ""
        body = e + 1 if c == "\n" else e
        if fence == "other" or (c and c not in "\n{[") or (not c and not info.strip("` \t\r")):
            return Prose(body, FENCE_CLOSER if c else "")
        kind = "fence-action" if fence == "action" else "fence-json"
        return Opened(kind, body, CloserReader(buf, p, FENCE_CLOSER, fence_verdict))

    def body_end(self, block: Block) -> int | None:
        """Before the closing fence."""
        return block.raw.rfind(FENCE_CLOSER)


FORMATS: Final = (FenceFormat(),)
