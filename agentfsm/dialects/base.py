"""What every dialect provides (what parsing a reply yields is :mod:`agentfsm.core.parsed`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Protocol

from agentfsm.core._types import DialectName
from agentfsm.core.choice import ToolChoice
from agentfsm.core.messages import ToolCall, ToolSpec

__all__ = ["Dialect", "ProseAnswers"]

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


class ProseAnswers(ABC):
    """The rendering shared by the dialects whose answer is plain prose and whose calls are
    written one after another, :attr:`call_separator` between them."""

    #: what separates the calls of one reply (a blank line unless a dialect says otherwise)
    call_separator = "\n\n"

    @abstractmethod
    def render_call(self, call: ToolCall) -> str:
        """The action text for one call (each dialect writes its own)."""

    def render_calls(self, calls: Sequence[ToolCall]) -> str:
        """The calls one after another, :attr:`call_separator` between them."""
        return self.call_separator.join(self.render_call(c) for c in calls)

    def render_final(self, content: str) -> str:
        """A final answer is plain prose."""
        return content
