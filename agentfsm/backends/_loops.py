"""A generation stuck in a loop is cut, not run to ``max_tokens``.

Greedy decoding on a small model often falls into a loop: an argument value that
repeats one stretch ("AZKLNK_2022_2022_2022..."), a sentence said again and again ("The
user requested the results of add to the user's request." after a task's answer). On the
embedded model such a reply ran to its 512-token limit (about 7 s on 2 cores): an
argument was refused as truncated anyway, as was each of its corrections, and an answer
was trimmed of its repetitions. :class:`LoopStop` is
a llama.cpp stopping criterion that ends a generation once its last :data:`WINDOW`
tokens are one stretch of at most :data:`MAX_PERIOD` tokens repeated; the reply is
then reported as cut (``finish_reason`` ``"length"``), as one that reached the limit is.
It compares token ids, so it reads no language.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["MAX_PERIOD", "WINDOW", "LoopStop"]

#: the generated tokens a loop must fill ...
WINDOW: Final = 96
#: ... repeating a stretch of at most this many tokens (three times at the most: a
#: sentence said again and again is 10-30 tokens; a list's items differ in their numbers)
MAX_PERIOD: Final = 32


class LoopStop:
    """Stops a generation whose tail loops (see the module); :attr:`fired` says it did.

    ``prompt_tokens``: the length of the prompt, which the ids passed in begin with."""

    def __init__(self, prompt_tokens: int) -> None:
        self.start = prompt_tokens
        self.fired = False

    def __call__(self, ids: Any, _logits: Any) -> bool:
        if self.fired:
            return True
        if len(ids) - self.start < WINDOW:
            return False
        tail = [int(i) for i in ids[-WINDOW:]]
        for period in range(1, MAX_PERIOD + 1):
            if all(tail[i] == tail[i - period] for i in range(period, WINDOW)):
                self.fired = True
                return True
        return False
