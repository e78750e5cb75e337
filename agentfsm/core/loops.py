"""Text that ends in a loop: one stretch of characters written again and again.

Greedy decoding on a small model falls into loops: an answer that says "No, no, no, ..."
to the token limit, an argument value "AZKLNK_2022_2022_2022...". The answers policy
cuts such an answer where its loop starts; the engine bounds the strings of the retry
after an action that was cut off in one. Both read the loop here, by characters only
(case set aside): no language is read.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

__all__ = ["MAX_STRETCH", "MIN_LOOP", "MIN_REPEATS", "tail_loops"]

#: the longest stretch a loop repeats, in characters
MAX_STRETCH: Final = 40
#: ... how many times at the least (a loop cut by the token limit repeats it dozens of times)
MIN_REPEATS: Final = 5
#: ... and over how many characters at the least ("ha ha ha" is not a loop)
MIN_LOOP: Final = 30


def tail_loops(text: str) -> Iterator[tuple[int, int]]:
    """Each loop ``text`` ends in, one per stretch length: ``(start, period)``, where
    ``text[start:start + period]`` is the stretch's first copy and everything from
    ``start`` on repeats it (the last copy possibly cut short), at least
    :data:`MIN_REPEATS` times over at least :data:`MIN_LOOP` characters."""
    low = text.lower()
    end = len(low)
    for period in range(1, min(MAX_STRETCH, end // MIN_REPEATS) + 1):
        i = end - 1
        while i >= period and low[i] == low[i - period]:
            i -= 1
        start = i + 1 - period
        if end - start >= max(MIN_LOOP, MIN_REPEATS * period):
            yield start, period
