"""The reply fixtures under ``fixtures/replies/``: loading and comparing (shared by tests)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentfsm.core._types import DIALECT_NAMES
from agentfsm.core.parsed import ParsedReply
from agentfsm.core.messages import ToolSpec

__all__ = ["REPLIES", "ReplyFixture", "fixtures", "summary"]

REPLIES = Path(__file__).resolve().parent.parent / "fixtures" / "replies"


@dataclass(frozen=True)
class ReplyFixture:
    """One raw reply and what parsing it must give."""

    id: str
    text: str
    expected: dict[str, Any]

    @property
    def tools(self) -> list[ToolSpec] | None:
        names = self.expected.get("tools")
        return None if names is None else [ToolSpec(name=n) for n in names]

    @property
    def dialect(self) -> str | None:
        group = self.id.split("/")[0]
        return self.expected.get("dialect", group if group in DIALECT_NAMES else None)

    @property
    def strict(self) -> bool:
        return bool(self.expected.get("strict", False))


def fixtures() -> list[ReplyFixture]:
    """Every fixture pair, sorted by id (``group/name``)."""
    out = []
    for path in sorted(REPLIES.glob("*/*.txt")):
        expected_path = path.with_name(path.name[: -len(".txt")] + ".expected.json")
        out.append(
            ReplyFixture(
                id=f"{path.parent.name}/{path.stem}",
                text=path.read_bytes().decode("utf-8"),
                expected=json.loads(expected_path.read_text(encoding="utf-8")),
            )
        )
    return out


def summary(reply: ParsedReply) -> dict[str, Any]:
    """The parts of a ParsedReply a fixture's ``expected.json`` states."""
    out: dict[str, Any] = {
        "content": reply.content,
        "tool_calls": [{"name": c.name, "arguments": c.arguments} for c in reply.tool_calls],
        "truncated": reply.truncated,
        "problems": [p.code for p in reply.problems],
    }
    if reply.final is not None:
        out["final"] = reply.final
    return out
