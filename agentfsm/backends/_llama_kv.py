"""What one llama.cpp context holds, and the decodes the embedded backend runs on it itself.

``llama-cpp-python`` keeps, beside the context, the tokens whose keys and values are in
it (``input_ids[:n_tokens]``); its ``generate`` reuses their longest common prefix with
the next prompt. The functions here keep that pair consistent while they evaluate a
prefix themselves (so that a generation re-reads only what differs) or decode a
continuation with the logits of every position (to score it). Every use of
``llama-cpp-python``'s private attributes is in this module.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "PrefixStore",
    "check_fits",
    "common_prefix",
    "evaluate_prefix",
    "score_continuations",
    "tokenize",
    "truncate",
]

#: a held state that would lose at least this many tokens to another prompt is saved first
SAVE_AT_LEAST = 128
#: a saved state is restored when it shares at least this many more tokens than the context
RESTORE_GAIN = 32


def tokenize(llama: Any, text: str) -> list[int]:
    """``text``'s tokens as ``create_completion`` makes them from a text prompt (special
    tokens parsed; this model adds no BOS)."""
    tokens: list[int] = llama.tokenize(text.encode("utf-8"), add_bos=False, special=True)
    return tokens


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens ``a`` and ``b`` share."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def check_fits(llama: Any, n_tokens: int) -> None:
    """Refuse a prompt the context cannot hold, worded as ``create_completion`` words it (so
    the backend maps it to the same error)."""
    if n_tokens >= llama.n_ctx():
        raise ValueError(f"Requested tokens ({n_tokens}) exceed context window of {llama.n_ctx()}")


def _held(llama: Any) -> list[int]:
    held: list[int] = llama.input_ids[: llama.n_tokens].tolist()
    return held


def truncate(llama: Any, n: int) -> None:
    """Drop every evaluated token from position ``n`` on (the next sample needs a decode)."""
    llama._ctx.kv_cache_seq_rm(-1, n, -1)
    llama.n_tokens = n
    llama._requires_eval = True


def evaluate_prefix(llama: Any, tokens: Sequence[int]) -> int:
    """Make the context hold exactly ``tokens``, evaluating only what follows their longest
    common prefix with what it holds; the number of tokens evaluated."""
    keep = common_prefix(_held(llama), tokens)
    truncate(llama, keep)
    rest = list(tokens[keep:])
    if rest:
        llama.eval(rest)
        llama._requires_eval = True  # the logits are of the last prefix token, not sampled after
    return len(rest)


def _log_softmax(rows: np.ndarray) -> np.ndarray:
    rows = rows.astype(np.float64)
    top = rows.max(axis=1, keepdims=True)
    shifted = rows - top
    result: np.ndarray = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return result


def _decode_rows(llama: Any, tokens: Sequence[int], n_past: int) -> np.ndarray:
    """Decode ``tokens`` at positions ``n_past...`` and return the logits of every one
    (a row per token), keeping ``input_ids``/``n_tokens`` in step with the context."""
    n_vocab = llama.n_vocab()
    rows: list[np.ndarray] = []
    for start in range(0, len(tokens), llama.n_batch):
        chunk = list(tokens[start : start + llama.n_batch])
        at = n_past + start
        llama._batch.set_batch(batch=chunk, n_past=at, logits_all=True)
        llama._ctx.decode(llama._batch)
        logits = np.ctypeslib.as_array(llama._ctx.get_logits(), shape=(len(chunk) * n_vocab,))
        rows.append(logits.reshape(len(chunk), n_vocab).copy())
        llama.input_ids[at : at + len(chunk)] = chunk
        llama.n_tokens = at + len(chunk)
    llama._requires_eval = True
    return np.concatenate(rows) if rows else np.empty((0, n_vocab), dtype=np.float32)


def score_continuations(
    llama: Any,
    prompt: str,
    continuations: Sequence[str],
    prepare: Callable[[Any, Sequence[int]], int] = evaluate_prefix,
) -> tuple[list[float], int, int]:
    """The natural-log probability of each continuation right after ``prompt``, summed over
    its tokens; the tokens a scoring without reuse would evaluate, and those evaluated.

    ``prompt + continuation`` is tokenized whole, and the tokens past its common prefix
    with the prompt's own tokens are scored (a BPE merge across the boundary is then the
    continuation's). The prompt is evaluated once (its prefix reused); each continuation
    is one batched decode from where it leaves the prompt. The context is left holding
    the prompt's tokens up to the last continuation's divergence, so a generation from
    the same prompt re-reads at most a few of them. ``prepare`` brings the prompt's shared
    prefix into the context (:meth:`PrefixStore.prepare` saves and restores states).
    """
    base = tokenize(llama, prompt)
    fulls = [tokenize(llama, prompt + text) for text in continuations]
    check_fits(llama, max((len(full) for full in fulls), default=len(base)))
    # every continuation's logits start at the token before its divergence from the prompt
    starts = [max(common_prefix(base, full), 1) - 1 for full in fulls]
    evaluated = prepare(llama, base[: min(starts, default=len(base))])
    scores: list[float] = []
    sent = len(base) + sum(max(len(full) - 1 - start, 0) for full, start in zip(fulls, starts))
    for full, start in zip(fulls, starts):
        if start + 1 >= len(full):  # nothing past the prompt: probability 1
            scores.append(0.0)
            continue
        evaluated += evaluate_prefix(llama, full[:start])
        feed = full[start:-1]
        rows = _log_softmax(_decode_rows(llama, feed, start))
        evaluated += len(feed)
        targets = full[start + 1 :]
        scores.append(float(rows[np.arange(len(targets)), targets].sum()))
    truncate(llama, common_prefix(_held(llama), base))
    return scores, sent, evaluated


@dataclass
class _Saved:
    tokens: list[int]
    data: Any  # a ctypes byte array: the sequence's keys and values


class PrefixStore:
    """The keys and values of recent prompts that another prompt pushed out of the context,
    so that interleaved conversations (concurrent proxy clients) do not re-read each other's
    prompts on every request.

    Before a prompt is evaluated, :meth:`prepare` saves what the context holds when the
    prompt would discard a large part of it, restores the saved state that shares the
    longest prefix with the prompt when that beats what the context holds, and evaluates
    the rest. Saved states are kept newest first within ``max_bytes``.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._saved: list[_Saved] = []
        #: how many states were saved and restored (for the benchmarks)
        self.saves = 0
        self.restores = 0

    @property
    def bytes(self) -> int:
        """The size of the states held."""
        return sum(len(entry.data) for entry in self._saved)

    def prepare(self, llama: Any, tokens: Sequence[int]) -> int:
        """Make the context hold exactly ``tokens`` at the least cost; the tokens evaluated."""
        held = _held(llama)
        here = common_prefix(held, tokens)
        if len(held) - here >= SAVE_AT_LEAST and self.max_bytes > 0:
            self._save(llama, held)
        best = max(self._saved, key=lambda entry: common_prefix(entry.tokens, tokens), default=None)
        if best is not None and common_prefix(best.tokens, tokens) >= here + RESTORE_GAIN:
            self._restore(llama, best)
        return evaluate_prefix(llama, tokens)

    def _save(self, llama: Any, held: list[int]) -> None:
        if any(common_prefix(entry.tokens, held) == len(held) for entry in self._saved):
            return  # already saved, or within a longer saved state
        ctx = llama._ctx.ctx
        size = _lib().llama_state_seq_get_size(ctx, 0)
        data = (ctypes.c_uint8 * size)()
        if _lib().llama_state_seq_get_data(ctx, data, size, 0) != size:
            return  # nothing saved: the prompt is simply re-read later
        # a saved state that is a prefix of this one is superseded by it
        self._saved = [e for e in self._saved if common_prefix(e.tokens, held) < len(e.tokens)]
        self._saved.insert(0, _Saved(held, data))
        self.saves += 1
        while self._saved and self.bytes > self.max_bytes:
            self._saved.pop()

    def _restore(self, llama: Any, entry: _Saved) -> None:
        ctx = llama._ctx.ctx
        llama._ctx.kv_cache_seq_rm(0, 0, -1)
        if _lib().llama_state_seq_set_data(ctx, entry.data, len(entry.data), 0) != len(entry.data):
            truncate(llama, 0)  # the context is empty: the prompt is evaluated whole
            return
        llama.input_ids[: len(entry.tokens)] = entry.tokens
        llama.n_tokens = len(entry.tokens)
        llama._requires_eval = True
        self._saved.remove(entry)
        self._saved.insert(0, entry)
        self.restores += 1


def _lib() -> Any:
    """The ``llama_cpp`` module (imported by the backend before any of this runs)."""
    import llama_cpp as module

    return module
