"""The backend interface: a normalized prompt in, text (and usage) out."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol, TypeGuard, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentfsm.core._types import JSONObject
from agentfsm.core.errors import UsageError
from agentfsm.core.messages import PromptMessage

__all__ = [
    "Backend",
    "Capabilities",
    "Completion",
    "CountsTokens",
    "GenerationOptions",
    "ListContinuation",
    "SAMPLING_OPTIONS",
    "ScoresContinuations",
    "TextStream",
    "Usage",
    "counts_tokens",
    "estimate_tokens",
    "read_options",
]

#: the optional fields of :class:`GenerationOptions` that carry a client's own sampling
#: and reply settings; a backend lists those it honours in :attr:`Capabilities.sampling`
SAMPLING_OPTIONS: tuple[str, ...] = (
    "top_p",
    "top_k",
    "presence_penalty",
    "frequency_penalty",
    "response_format",
    "user",
)


def estimate_tokens(text: str) -> int:
    """A rough token count (about four characters a token) for upstreams that report none."""
    return (len(text) + 3) // 4 if text else 0


class Capabilities(BaseModel):
    """What a backend can do beyond plain chat."""

    model_config = ConfigDict(frozen=True)

    #: the assistant turn can be started with given text, which the model continues
    prefill: bool = False
    #: decoding can be constrained to a JSON schema (grammar or response_format)
    json_schema: bool = False
    #: a prefilled, open JSON list can be continued under a grammar
    #: (:attr:`GenerationOptions.list_continuation`)
    list_continuation: bool = False
    #: which of :data:`SAMPLING_OPTIONS` this backend honours (the proxy reports the others
    #: to the client as ignored rather than dropping them silently)
    sampling: frozenset[str] = frozenset(SAMPLING_OPTIONS)
    #: the model's context window in tokens (prompt and completion together); None: unknown
    context_tokens: int | None = None
    #: the model is small (the embedded SmolLM2): ``grounding="auto"`` turns the
    #: policies for small models on (:mod:`agentfsm.policy`)
    small_model: bool = False
    #: the backend scores given continuations of a prompt (:class:`ScoresContinuations`)
    scoring: bool = False


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
    """Per-call generation options (a NaN or infinite number is refused: JSON has none, and a
    value no provider takes, such as ``max_tokens=0`` or a negative temperature, too)."""

    model_config = ConfigDict(frozen=True, allow_inf_nan=False)

    #: the completion limit; ``None``: none of ours (the backend's own bound: an upstream's
    #: default, or what the model's context leaves)
    max_tokens: int | None = Field(default=512, ge=1)
    temperature: float = Field(default=0.0, ge=0)
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
    # A client's own settings, passed on unchanged (None: the backend's default).
    top_p: float | None = Field(default=None, ge=0, le=1)
    top_k: int | None = Field(default=None, ge=0)
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    #: the client's OpenAI-shaped ``response_format`` (``json_object`` or ``json_schema``)
    #: for a reply without tools; ``json_schema`` and ``list_continuation`` take precedence
    response_format: JSONObject | None = None
    #: an end-user id for the upstream's abuse monitoring (OpenAI ``user``)
    user: str | None = None


def read_options(options: Any) -> GenerationOptions:
    """``options`` as GenerationOptions (None: the defaults; a mapping of its fields is read
    as one): a misspelt name or a value out of bounds is a :class:`UsageError` naming it."""
    if options is None:
        return GenerationOptions()
    if isinstance(options, GenerationOptions):
        return options
    if isinstance(options, Mapping):
        unknown = sorted(str(k) for k in options if k not in GenerationOptions.model_fields)
        if unknown:  # as an unknown setting is: a misspelt option would be dropped silently
            raise UsageError(f"unknown option(s) {', '.join(unknown)}; options: {', '.join(GenerationOptions.model_fields)}")
        try:
            return GenerationOptions.model_validate(options)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "options"
            raise UsageError(f"options.{where}: {first['msg']}") from None
    raise UsageError(f"options must be GenerationOptions (or a dict of its fields), got {type(options).__name__}")


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
    #: the client stop sequence that ended the text, where the upstream says which
    #: (vLLM's ``stop_reason``, SGLang's ``matched_stop``); None otherwise
    stop_sequence: str | None = None
    #: the completion limit the backend sent in place of ``options.max_tokens``, which it
    #: lowered (the upstream said its context could not hold that many beside the
    #: prompt); None: the limit was sent as asked
    max_tokens_sent: int | None = None


class TextStream(AsyncIterator[str]):
    """The text deltas of one streamed generation and, once they are all read, how it
    ended: ``finish_reason``, ``usage`` and ``stop_sequence`` (:attr:`Completion.stop_sequence`)
    where the backend reports them (else ``None``); ``max_tokens_sent``
    (:attr:`Completion.max_tokens_sent`) is known once the upstream has answered, which
    may be well before the first delta (a long prompt): :attr:`on_max_tokens_sent` is
    called with it then.

    A backend's ``astream`` may return one; callers that only want text iterate it as
    any async iterator of ``str``. ``source`` is called once with the stream itself,
    to fill in the ending when it knows it.
    """

    def __init__(self, source: Callable[[TextStream], AsyncIterator[str]]) -> None:
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.stop_sequence: str | None = None
        self._max_tokens_sent: int | None = None
        #: told a lowered limit as soon as the backend sets it (a proxy's headers may
        #: leave, with a keep-alive, before the first delta)
        self.on_max_tokens_sent: Callable[[int], None] | None = None
        self._deltas = source(self)

    @property
    def max_tokens_sent(self) -> int | None:
        """The completion limit the backend sent in place of the asked one (None: as asked)."""
        return self._max_tokens_sent

    @max_tokens_sent.setter
    def max_tokens_sent(self, value: int | None) -> None:
        self._max_tokens_sent = value
        if value is not None and self.on_max_tokens_sent is not None:
            self.on_max_tokens_sent(value)

    def __aiter__(self) -> TextStream:
        return self

    async def __anext__(self) -> str:
        return await self._deltas.__anext__()

    async def aclose(self) -> None:
        """Stop the generation (the backend releases what it holds)."""
        aclose = getattr(self._deltas, "aclose", None)
        if aclose is not None:
            await aclose()


@runtime_checkable
class CountsTokens(Protocol):
    """A backend that can count a prompt's tokens exactly as its model will see them."""

    def count_tokens(self, messages: Sequence[PromptMessage], options: GenerationOptions) -> int:
        """The prompt tokens of a call with ``messages`` and ``options`` (prefill included)."""
        ...


def counts_tokens(backend: object) -> TypeGuard[CountsTokens]:
    """``isinstance(backend, CountsTokens)``, without the protocol machinery (~7 µs a check
    on Python 3.11, on every proxied request): the protocol's one method is there."""
    return getattr(backend, "count_tokens", None) is not None


@runtime_checkable
class ScoresContinuations(Protocol):
    """A backend that can say how likely its model finds given texts after a prompt."""

    def score(
        self, messages: Sequence[PromptMessage], options: GenerationOptions, continuations: Sequence[str]
    ) -> list[float]:
        """For each continuation, the natural-log probability the model gives that text right
        after the rendered prompt (``messages`` opened for the assistant, then
        ``options.prefill``), summed over its tokens; no grammar applies."""
        ...

    async def ascore(
        self, messages: Sequence[PromptMessage], options: GenerationOptions, continuations: Sequence[str]
    ) -> list[float]:
        """Async twin of :meth:`score`."""
        ...


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
