"""What a diagram holds: states, edges and their counts, whether drawn from the machine or
observed in transcripts (:mod:`agentfsm.diagram.build` makes them,
:mod:`agentfsm.diagram.text` renders them)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Diagram", "DiagramEdge", "DiagramNode"]


@dataclass(frozen=True, slots=True)
class DiagramEdge:
    """One edge: an event from one state to another, with its guard conditions."""

    source: str
    dest: str
    event: str
    guards: tuple[str, ...] = ()
    count: int | None = None
    """How often the edge was taken (``None`` in the machine diagram)."""
    in_machine: bool = True
    """False for an observed transition that the machine does not define."""

    @property
    def dimmed(self) -> bool:
        """An edge of the machine that no observed run took."""
        return self.count == 0


@dataclass(frozen=True, slots=True)
class DiagramNode:
    """One state, with what runs did there (zeros in the machine diagram)."""

    state: str
    entered: int | None = None
    """How often runs entered the state (``None`` in the machine diagram)."""
    retries: int = 0
    refusals: int = 0

    @property
    def dimmed(self) -> bool:
        """A state that no observed run entered."""
        return self.entered == 0


@dataclass(frozen=True, slots=True)
class Diagram:
    """A drawable graph: the machine itself, or the paths observed in transcripts."""

    title: str
    nodes: tuple[DiagramNode, ...]
    edges: tuple[DiagramEdge, ...]
    starts: tuple[tuple[str, int | None], ...]
    """Initial states, with how many runs started there (``None``: the machine)."""
    observed: bool = False
    runs: int = 0
    transcripts: int = 0
