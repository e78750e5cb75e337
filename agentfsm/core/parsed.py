"""What parsing one model reply yields: the prose, the calls, and the problems found.

Values shared by the parser (:mod:`agentfsm.dialects`), the guards, the engine and the
transcript events; they live here so that none of those imports another for them.
"""

from __future__ import annotations

from typing import Literal, TypeAlias

from pydantic import BaseModel, ConfigDict

from agentfsm.core.messages import ToolCall

__all__ = ["ParsedReply", "Problem", "ProblemCode"]

ProblemCode: TypeAlias = Literal[
    # the reply held something meant as an action whose JSON could not be read, even repaired
    "invalid_json",
    # the JSON of an action was repaired (smart quotes, trailing comma, stringified args ...)
    "repaired_json",
    # an action opener without its closer (unclosed fence / delimiter, unterminated JSON)
    "truncated",
    # a JSON object that looked like an action but had no tool name, or no usable arguments
    "malformed_action",
    # json-protocol strict mode: text outside the one JSON object
    "extra_text",
    # json-protocol: thought longer than the 200-character cap (it is cut)
    "thought_too_long",
    # json-protocol: a final answer cut off by the token limit (the text so far is kept)
    "truncated_final",
    # input exceeded a size / depth / number limit and that part was not parsed
    "limit_exceeded",
]


class Problem(BaseModel):
    """Something the parser repaired or rejected; read by guards and logs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    code: ProblemCode
    message: str
    #: character offset in the reply where the problem was found, when known
    position: int | None = None
    #: ``True`` when the action was dropped (never became a call); ``False`` when repaired
    rejected: bool = True
    #: the format the action was written in (``json-action``, ``hermes``, ``pythonic`` ...)
    source: str | None = None


class ParsedReply(BaseModel):
    """The result of parsing one model reply."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: the prose with every action block stripped; ``None`` when nothing is left
    content: str | None
    #: tool calls in emission order
    tool_calls: tuple[ToolCall, ...] = ()
    problems: tuple[Problem, ...] = ()
    #: the reply ended inside an action (it was cut off)
    truncated: bool = False
    #: json-protocol ``{"final": {"content": ...}}``: the final content, when present
    final: object | None = None

    @property
    def rejected(self) -> tuple[Problem, ...]:
        return tuple(p for p in self.problems if p.rejected)
