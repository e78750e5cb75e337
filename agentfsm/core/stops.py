"""Stop sequences (``GenerationOptions.stop``, a client's ``stop`` / ``stop_sequences``),
applied to the answer of a turn with tools.

With tools, the model writes actions (JSON, fenced blocks), and a stop sequence
(```` ``` ````, ``"\\n\\n"``, ``"Observation:"``) would cut an action before it could be
read. So the turn runner (:func:`~agentfsm.runtime.turn.stream_turn`) sends the backend
none of them; they bind the answer alone, as they bind a model's prose: the answer ends
before the first stop sequence that completes in it, and the turn says which
(``TurnResult.stop_sequence``: the proxy's finish reason ``stop_sequence``, Anthropic's
``stop_reason``). :func:`cut_at_stop` cuts a whole text; :class:`StopCutter` cuts the
same text arriving in pieces, holding back only a tail that could still begin a stop
sequence. A plain completion (no tools) sends them to the backend, which applies them.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["StopCutter", "cut_at_stop"]


def cut_at_stop(text: str, stops: Sequence[str]) -> tuple[str, str | None]:
    """``text`` before the stop sequence that completes first in it (as generation would
    stop there; of two that end together, the one that starts first), and that sequence;
    ``(text, None)`` when none occurs."""
    best: tuple[int, int, str] | None = None
    for stop in stops:
        if not stop:
            continue
        start = text.find(stop)
        if start < 0:
            continue
        key = (start + len(stop), start, stop)
        if best is None or key[:2] < best[:2]:
            best = key
    if best is None:
        return text, None
    return text[: best[1]], best[2]


class StopCutter:
    """:func:`cut_at_stop` over a text that arrives in pieces: :meth:`feed` returns what
    can be released now, :meth:`flush` the tail held at the end; once a stop sequence has
    completed (:attr:`matched`), nothing more is released."""

    __slots__ = ("_held", "matched", "stops")

    def __init__(self, stops: Sequence[str]) -> None:
        self.stops = tuple(s for s in stops if s)
        self.matched: str | None = None
        self._held = ""

    def feed(self, piece: str) -> str:
        """The part of ``piece`` (after what was held) that no stop sequence can still cut."""
        if self.matched is not None:
            return ""
        if not self.stops:
            return piece
        text = self._held + piece
        kept, self.matched = cut_at_stop(text, self.stops)
        if self.matched is not None:
            self._held = ""
            return kept
        hold = max((_open_prefix(text, stop) for stop in self.stops), default=0)
        self._held = text[len(text) - hold:] if hold else ""
        return text[: len(text) - hold]

    def flush(self) -> str:
        """The tail held back: no stop sequence completed in it."""
        held, self._held = self._held, ""
        return held


def _open_prefix(text: str, stop: str) -> int:
    """The length of the longest end of ``text`` that ``stop`` begins with (shorter than ``stop``)."""
    for size in range(min(len(stop) - 1, len(text)), 0, -1):
        if text.endswith(stop[:size]):
            return size
    return 0
