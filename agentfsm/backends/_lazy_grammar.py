"""Grammar-constrained sampling that asks the grammar only about the token it chose.

llama.cpp's grammar sampler, placed in the sampler chain (as llama-cpp-python places it),
matches every token of the vocabulary (about 49k on SmolLM2) against the grammar at every
step: on a small model that costs about as much as the decode itself. Here the token is
drawn by the chain without the grammar first, and the grammar is asked about that one
token; only when it refuses is the step sampled again with the grammar over the whole
vocabulary (what llama.cpp's own ``common_sampler`` does). Greedy, that second draw first
asks the grammar about the :data:`FEW` highest logits alone: the best of them it allows is
the best it allows at all.

Greedy, the token is the same either way: the best token the grammar allows. Sampled,
it is drawn from the same grammar-masked distribution (a draw kept when allowed, else a
draw from the masked distribution: rejection sampling), with the chain's truncations
(top-k, top-p) taken before the mask where the full chain took them after it.

Each grammar is parsed once per loaded model and text (:class:`GrammarSamplers`) and
reset before each generation; generations on a model are serialized by its lock, so
one parsed grammar serves them all. This reaches into llama-cpp-python's sampler hook
(``Llama._init_sampler``), pinned in ``pyproject.toml``.
"""

from __future__ import annotations

import ctypes
import functools
import threading
from collections import OrderedDict
from typing import Any

import numpy as np

__all__ = ["GrammarSamplers", "LazyGrammarSampler", "lazy_grammar_llama"]

#: parsed grammars kept per loaded model (a tool set's grammar is a few KB of rules)
MAX_GRAMMARS = 32
#: greedy, a refused token's step first asks the grammar about this many best tokens
FEW = 64


class GrammarSamplers:
    """llama.cpp grammar samplers, one per grammar text, parsed once and reset per use."""

    def __init__(self, llama_cpp: Any, vocab: Any, limit: int = MAX_GRAMMARS) -> None:
        self._c = llama_cpp
        self._vocab = vocab
        self._limit = limit
        self._parsed: OrderedDict[tuple[str, str], Any] = OrderedDict()
        self._lock = threading.Lock()
        #: grammars parsed, uses served by one parsed before, tokens sampled under a
        #: grammar and those it refused (drawn again under it): for the benchmarks
        self.parsed = 0
        self.reused = 0
        self.sampled = 0
        self.redrawn = 0

    def get(self, text: str, root: str) -> Any:
        """The grammar sampler for ``text`` at its start rule ``root``, reset."""
        key = (text, root)
        with self._lock:
            sampler = self._parsed.get(key)
            if sampler is not None:
                self._parsed.move_to_end(key)
                self._c.llama_sampler_reset(sampler)
                self.reused += 1
                return sampler
            sampler = self._c.llama_sampler_init_grammar(self._vocab, text.encode("utf-8"), root.encode("utf-8"))
            if not sampler:
                raise ValueError("llama.cpp could not parse the grammar")
            self.parsed += 1
            self._parsed[key] = sampler
            while len(self._parsed) > self._limit:
                # the oldest served a generation that has ended (generations are serialized)
                self._c.llama_sampler_free(self._parsed.popitem(last=False)[1])
            return sampler

    def close(self) -> None:
        """Free every parsed grammar."""
        with self._lock:
            while self._parsed:
                self._c.llama_sampler_free(self._parsed.popitem()[1])


class _Candidates:
    """A ``llama_token_data_array`` over a buffer of up to ``n`` tokens, filled from numpy."""

    def __init__(self, llama_cpp: Any, n: int) -> None:
        self._c = llama_cpp
        self._data = (llama_cpp.llama_token_data * n)()
        self._view = np.ctypeslib.as_array(self._data)
        pointer = ctypes.cast(self._data, ctypes.POINTER(llama_cpp.llama_token_data))
        self._array = llama_cpp.llama_token_data_array(data=pointer, size=n, selected=-1, sorted=False)

    def fill(self, ids: Any, logits: Any) -> Any:
        """``ids`` with their ``logits`` (unsorted, none selected); the filled entries."""
        view = self._view[: len(ids)]
        view["id"], view["logit"], view["p"] = ids, logits, 0.0
        array = self._array
        array.size, array.selected, array.sorted = len(ids), -1, False
        return view

    def apply(self, sampler: Any) -> None:
        """Run ``sampler`` (a grammar or a chain) over the entries."""
        self._c.llama_sampler_apply(sampler, ctypes.byref(self._array))

    def selected(self) -> int:
        """The token the last sampler applied selected."""
        return int(self._data[self._array.selected].id)


class LazyGrammarSampler:
    """Stands in for llama-cpp-python's sampler chain in one generation: ``sample`` draws
    with ``chain`` (a ``LlamaSampler`` without the grammar), checks the token against
    ``grammar`` and draws again under the grammar only when it was refused."""

    def __init__(
        self, llama_cpp: Any, chain: Any, grammar: Any, n_vocab: int, counts: GrammarSamplers, greedy: bool = False
    ) -> None:
        self._c = llama_cpp
        self.chain = chain
        self.grammar = grammar
        self._counts = counts
        #: the chain takes the highest logit as it is (no penalty, no processor, no draw)
        self.greedy = greedy
        self._ids = np.arange(n_vocab, dtype=np.int32)
        self._all = _Candidates(llama_cpp, n_vocab)
        self._few = _Candidates(llama_cpp, FEW)

    def _draw(self, logits: Any, constrained: bool) -> int:
        self._all.fill(self._ids, logits)
        if constrained:
            self._all.apply(self.grammar)
        self._all.apply(self.chain.sampler)
        return self._all.selected()

    def _allowed(self, tokens: Any) -> Any:
        """Which of ``tokens`` (at most :data:`FEW`) the grammar allows next, in its present state."""
        view = self._few.fill(tokens, 0.0)
        self._few.apply(self.grammar)
        return ~np.isinf(view["logit"])

    def allows(self, token: int) -> bool:
        """Whether the grammar, in its present state, allows ``token`` next."""
        return bool(self._allowed(np.array([token]))[0])

    def _best_allowed(self, logits: Any) -> int | None:
        """Greedy under the grammar from the :data:`FEW` highest logits alone: the highest
        one the grammar allows, or ``None`` when it allows none of them (or the pick ties
        with a logit left out, where the whole vocabulary decides)."""
        top = np.argpartition(logits, -FEW)[-FEW:]
        allowed = top[self._allowed(top)]
        if not len(allowed):
            return None
        best = logits[allowed].max()
        if best <= logits[top].min():
            return None
        return int(allowed[logits[allowed] == best].min())

    def sample(self, ctx: Any, idx: int = -1) -> int:
        """The next token after the logits at ``idx`` (as ``LlamaSampler.sample``), accepted
        by the chain and the grammar."""
        pointer = self._c.llama_get_logits_ith(ctx.ctx, idx)
        logits = np.ctypeslib.as_array(pointer, shape=(len(self._ids),))
        token = self._draw(logits, constrained=False)
        if not self.allows(token):
            self._counts.redrawn += 1
            best = self._best_allowed(logits) if self.greedy else None
            token = self._draw(logits, constrained=True) if best is None else best
        self._counts.sampled += 1
        self._c.llama_sampler_accept(self.grammar, token)
        self._c.llama_sampler_accept(self.chain.sampler, token)
        return token

    def close(self) -> None:
        """Close the chain (the grammar belongs to :class:`GrammarSamplers`)."""
        self.chain.close()


@functools.cache
def lazy_grammar_llama(llama_cpp: Any) -> Any:
    """A ``llama_cpp.Llama`` subclass whose grammar-constrained generations sample with
    :class:`LazyGrammarSampler` (each instance keeps its parsed grammars)."""

    class LazyGrammarLlama(llama_cpp.Llama):  # type: ignore[misc]
        grammar_samplers: GrammarSamplers | None = None
        #: False: llama-cpp-python's own sampling, the grammar in the chain (benchmarks compare)
        lazy_grammar = True

        def _init_sampler(self, *args: Any, grammar: Any = None, **kwargs: Any) -> Any:
            if not self.lazy_grammar:
                return super()._init_sampler(*args, grammar=grammar, **kwargs)
            chain = super()._init_sampler(*args, grammar=None, **kwargs)
            if grammar is None:
                return chain
            if self.grammar_samplers is None:
                self.grammar_samplers = GrammarSamplers(llama_cpp, self._model.vocab)
            samplers = self.grammar_samplers
            parsed = samplers.get(grammar._grammar, grammar._root)
            greedy = (
                kwargs.get("temp", 0.8) == 0.0 and kwargs.get("logits_processor") is None
                and kwargs.get("repeat_penalty", 1.0) == 1.0 and kwargs.get("frequency_penalty", 0.0) == 0.0
                and kwargs.get("presence_penalty", 0.0) == 0.0
            )
            return LazyGrammarSampler(llama_cpp, chain, parsed, self._n_vocab, samplers, greedy=not args and greedy)

        def close(self) -> None:
            if self.grammar_samplers is not None:
                self.grammar_samplers.close()
                self.grammar_samplers = None
            super().close()

    return LazyGrammarLlama
