"""A llama.cpp model loaded once per process: its lock, grammars and saved prompt states.

The model is a ``Llama`` whose grammar-constrained generations check the grammar only
on the token drawn (:mod:`agentfsm.backends._lazy_grammar`).

:class:`~agentfsm.backends.local.LocalBackend` reaches its model through :func:`load_model`
(on the model thread, :mod:`agentfsm.backends._llama_thread`); backends with the same
file, context, threads and seed share one.
"""

from __future__ import annotations

import atexit
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentfsm.backends._lazy_grammar import lazy_grammar_llama
from agentfsm.backends._llama_kv import PrefixStore, check_fits, tokenize
from agentfsm.backends._local_grammar import GrammarCache
from agentfsm.core.errors import BackendError, MissingExtraError

__all__ = ["PREFIX_CACHE_BYTES", "LoadedModel", "PromptCounts", "llama_cpp_module", "load_model"]

#: memory for the saved states of prompts pushed out of the context by others (a
#: conversation's state is ~22 KB per token on SmolLM2-135M: ~23 states of 1,000 tokens)
PREFIX_CACHE_BYTES = 512 * 1024 * 1024


@dataclass(frozen=True)
class PromptCounts:
    """Prompt tokens a loaded model was sent and evaluated since it was loaded: the
    difference was read from the context or from a saved state instead."""

    sent: int = 0
    evaluated: int = 0
    #: states of other prompts saved to make room, and restored to serve a prompt
    saves: int = 0
    restores: int = 0


class LoadedModel:
    """A llama.cpp model, the lock that serializes generations on it, its grammars, and
    the states of recent prompts."""

    def __init__(self, llama: Any) -> None:
        self.llama = llama
        self.lock = threading.Lock()
        self.grammars = GrammarCache()
        self.store = PrefixStore(PREFIX_CACHE_BYTES)
        self.sent = 0
        self.evaluated = 0

    def prepare(self, prompt: str) -> list[int]:
        """The prompt's tokens, with every one but the last already in the context (the
        generation evaluates that one and samples after it); call under the lock."""
        tokens = tokenize(self.llama, prompt)
        check_fits(self.llama, len(tokens))
        self.evaluated += self.store.prepare(self.llama, tokens[:-1]) + 1
        self.sent += len(tokens)
        return tokens


_MODELS: dict[tuple[str, int, int, int], LoadedModel] = {}
_MODELS_LOCK = threading.Lock()


@atexit.register
def _close_models() -> None:
    # free llama.cpp models while the interpreter is whole: their __del__ fails at teardown
    for loaded in _MODELS.values():
        close = getattr(loaded.llama, "close", None)
        if close is not None:
            close()
    _MODELS.clear()


def llama_cpp_module() -> Any:
    """``llama_cpp``, or a :class:`MissingExtraError` naming the extra."""
    try:
        import llama_cpp
    except ImportError as exc:
        raise MissingExtraError("local", "the embedded backend (llama-cpp-python)") from exc
    return llama_cpp


def load_model(path: Path, n_ctx: int, n_threads: int, seed: int) -> LoadedModel:
    """The model for these settings, loaded on first use (call on the model thread)."""
    key = (str(path), n_ctx, n_threads, seed)
    with _MODELS_LOCK:
        if key not in _MODELS:
            llama_cpp = llama_cpp_module()
            try:
                llama = lazy_grammar_llama(llama_cpp)(
                    model_path=str(path), n_ctx=n_ctx, n_threads=n_threads, seed=seed, verbose=False
                )
            except (ValueError, OSError, RuntimeError) as exc:
                raise BackendError(f"cannot load model {path}: {exc}") from exc
            _MODELS[key] = LoadedModel(llama)
        return _MODELS[key]
