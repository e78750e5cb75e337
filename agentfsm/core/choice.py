"""``tool_choice`` as a value: which replies a turn allows.

:class:`ToolChoice` is what the code passes around; strings are how the edges spell it
(a client's request, the CLI, a transcript): ``auto``, ``none``, ``required`` (Anthropic's
``any`` too) or the name of the one tool that must be called. :meth:`ToolChoice.parse`
reads a spelling, ``str()`` writes it back. "A call is required" is
:attr:`ToolChoice.requires_call`, and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, ClassVar, Literal, TypeAlias

from pydantic import PlainSerializer, PlainValidator, WithJsonSchema

from agentfsm.core.errors import UsageError

__all__ = ["ToolChoice", "ToolChoiceField", "ToolChoiceMode"]

ToolChoiceMode: TypeAlias = Literal["auto", "none", "required", "tool"]


@dataclass(frozen=True, slots=True)
class ToolChoice:
    """Which replies a turn allows: ``auto`` (a call or an answer), ``none`` (an answer
    only), ``required`` (a call of any tool), ``tool`` (a call of the tool ``name``)."""

    mode: ToolChoiceMode
    #: the tool that must be called (mode ``tool`` only)
    name: str | None = None

    AUTO: ClassVar[ToolChoice]
    NONE: ClassVar[ToolChoice]
    REQUIRED: ClassVar[ToolChoice]

    def __post_init__(self) -> None:
        if (self.mode == "tool") != bool(self.name):
            raise UsageError(f"tool_choice mode {self.mode!r} {'needs' if self.mode == 'tool' else 'takes no'} tool name")

    @classmethod
    def parse(cls, value: str | ToolChoice) -> ToolChoice:
        """A spelling (``auto``, ``none``, ``required``, ``any``, or a tool's name) as a value;
        an empty one is a :class:`~agentfsm.core.errors.UsageError`."""
        if isinstance(value, ToolChoice):
            return value
        if not isinstance(value, str) or not value.strip():
            raise UsageError(f"tool_choice must be a non-empty string; got {value!r}")
        if value in _SPELLED:
            return _SPELLED[value]
        return cls("tool", value)

    @classmethod
    def of_tool(cls, name: str) -> ToolChoice:
        """The choice that requires a call of ``name``."""
        return cls("tool", name)

    @property
    def requires_call(self) -> bool:
        """Whether the reply must be a call (``required`` or a named tool)."""
        return self.mode == "required" or self.mode == "tool"

    @property
    def allows_answer(self) -> bool:
        """Whether the reply may be an answer (``auto`` or ``none``)."""
        return not self.requires_call

    def __str__(self) -> str:
        return self.name if self.name is not None else self.mode


ToolChoice.AUTO = ToolChoice("auto")
ToolChoice.NONE = ToolChoice("none")
ToolChoice.REQUIRED = ToolChoice("required")
_SPELLED: dict[str, ToolChoice] = {
    "auto": ToolChoice.AUTO,
    "none": ToolChoice.NONE,
    "required": ToolChoice.REQUIRED,
    "any": ToolChoice.REQUIRED,  # Anthropic's spelling
}

def _read(value: object) -> ToolChoice:
    if isinstance(value, ToolChoice):
        return value
    if not isinstance(value, str) or not value.strip():
        raise ValueError("tool_choice must be a non-empty string")  # pydantic names the field
    return ToolChoice.parse(value)


#: a ``tool_choice`` field of a model: read from its spelling, written as it
ToolChoiceField: TypeAlias = Annotated[
    ToolChoice,
    PlainValidator(_read),
    PlainSerializer(str, return_type=str),
    WithJsonSchema({"type": "string"}),
]
