"""What every dialect provides, and what parsing a reply yields."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol, TypeAlias

from pydantic import BaseModel, ConfigDict

from agentfsm.core._types import DialectName, ToolChoice
from agentfsm.core.messages import ToolCall, ToolSpec

__all__ = [
    "Dialect",
    "ParsedReply",
    "Problem",
    "ProblemCode",
]

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


class Dialect(Protocol):
    """An action format: renders its part of the contract and the text of a call."""

    name: DialectName
    #: how corrections name one action (``"```json action``` block"``)
    action_name: str
    #: how one action is written, in one short phrase a small model can follow
    action_format: str
    #: how a final answer is written
    answer_format: str

    def render_instructions(
        self, tools: Sequence[ToolSpec], tool_choice: ToolChoice, parallel: bool
    ) -> str:
        """The contract's section describing the one action format, with a valid example."""
        ...

    def render_call(self, call: ToolCall) -> str:
        """The action text for one call (history projection, few-shot, round trips)."""
        ...

    def render_calls(self, calls: Sequence[ToolCall]) -> str:
        """The action text for several calls in one reply."""
        ...

    def render_final(self, content: str) -> str:
        """A final answer as this dialect expects it (prose, or a JSON ``final`` object)."""
        ...

    @property
    def opener(self) -> str:
        """The text an action starts with; used to prefill the assistant turn."""
        ...
