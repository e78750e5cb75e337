"""The backend interface: a normalized prompt in, text (and usage) out."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from agentfsm._types import JSONObject
from agentfsm.messages import PromptMessage

__all__ = [
    "Backend",
    "Capabilities",
    "Completion",
    "GenerationOptions",
    "ListContinuation",
    "Usage",
]


class Capabilities(BaseModel):
    """What a backend can do beyond plain chat."""

    model_config = ConfigDict(frozen=True)

    #: the assistant turn can be started with given text, which the model continues
    prefill: bool = False
    #: decoding can be constrained to a JSON schema (grammar or response_format)
    json_schema: bool = False
    streaming: bool = True
    #: a prefilled, open JSON list can be continued under a grammar
    #: (:attr:`GenerationOptions.list_continuation`)
    list_continuation: bool = False


class ListContinuation(BaseModel):
    """Constrain a continuation of an open JSON list: up to ``max_items`` more items
    (each ``, item``, matching ``item_schema``), then ``close``.

    The prefill ends inside the list, after an item; this describes only what follows.
    """

    model_config = ConfigDict(frozen=True)

    item_schema: JSONObject
    max_items: int = Field(default=3, ge=0, le=64)
    close: str = "]"


class GenerationOptions(BaseModel):
    """Per-call generation options."""

    model_config = ConfigDict(frozen=True)

    max_tokens: int = 512
    temperature: float = 0.0
    seed: int | None = 0
    stop: tuple[str, ...] = ()
    #: constrain the output to this JSON schema (only when ``capabilities.json_schema``)
    json_schema: JSONObject | None = None
    #: start the assistant turn with this text (only when ``capabilities.prefill``);
    #: the returned text does NOT include the prefill: callers prepend it themselves
    prefill: str | None = None
    #: continue the open JSON list the prefill ends in (only when
    #: ``capabilities.list_continuation``; it replaces ``json_schema`` for that call)
    list_continuation: ListContinuation | None = None


class Usage(BaseModel):
    model_config = ConfigDict(frozen=True)

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        """Usage of two calls together."""
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
        )


class Completion(BaseModel):
    """A finished generation."""

    model_config = ConfigDict(frozen=True)

    text: str
    usage: Usage = Field(default_factory=Usage)
    #: ``stop``, ``length`` (cut at max_tokens), or what the upstream said
    finish_reason: str = "stop"
    model: str | None = None


@runtime_checkable
class Backend(Protocol):
    """A text-only chat model. Sync and async, whole or streamed."""

    @property
    def name(self) -> str: ...

    @property
    def capabilities(self) -> Capabilities: ...

    def complete(
        self, messages: Sequence[PromptMessage], options: GenerationOptions
    ) -> Completion: ...

    async def acomplete(
        self, messages: Sequence[PromptMessage], options: GenerationOptions
    ) -> Completion: ...

    def stream(
        self, messages: Sequence[PromptMessage], options: GenerationOptions
    ) -> Iterator[str]: ...

    def astream(
        self, messages: Sequence[PromptMessage], options: GenerationOptions
    ) -> AsyncIterator[str]: ...
