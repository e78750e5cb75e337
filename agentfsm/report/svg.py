"""The observed state diagram as inline SVG, laid out here (no graphviz, no script).

Pure: a :class:`~agentfsm.diagram.build.Diagram` in, SVG text out. The machine's five
states have fixed places, the deciding states on the left, the tool round on the
top row, its results and the end below::

    (start) -> first-decision -> tool-emitted -> awaiting-result
                   |      ^            ^               |
                   v      |            |               v
                 final  <------- result-received <-----+

A state the machine does not define (a foreign transition's) gets a place on a row
below. Edges between the same two states are drawn as curves bent apart, each
labelled ``event ×count``; an edge looping on its state is drawn as a loop around
one of the state's sides. Edges the machine defines but no run took are dashed
grey; edges it does not define are red; an edge's width grows with its count. Every
edge carries ``data-edge="source|dest|event"`` so the page can filter runs by it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from html import escape
from typing import TYPE_CHECKING

from agentfsm.core.states import State

if TYPE_CHECKING:
    from agentfsm.diagram.build import Diagram, DiagramEdge, DiagramNode

__all__ = ["NODE_H", "NODE_W", "POSITIONS", "diagram_svg", "edge_key"]

NODE_W, NODE_H = 168, 58
#: centre of each machine state
POSITIONS: dict[str, tuple[float, float]] = {
    State.FIRST_DECISION.value: (170.0, 150.0),
    State.TOOL_EMITTED.value: (480.0, 150.0),
    State.AWAITING_RESULT.value: (790.0, 150.0),
    State.RESULT_RECEIVED.value: (480.0, 390.0),
    State.FINAL.value: (170.0, 390.0),
}
_WIDTH = 960.0
_START = (170.0, 40.0)
#: the side a state's loops go around, in order, as an angle in degrees (0: right, 90: down)
_LOOP_SIDES: dict[str, tuple[float, ...]] = {
    State.FIRST_DECISION.value: (180.0, 225.0, 135.0),
    State.AWAITING_RESULT.value: (0.0, 315.0, 45.0),
    State.RESULT_RECEIVED.value: (90.0, 45.0, 135.0),
    State.FINAL.value: (180.0, 135.0, 225.0),
    State.TOOL_EMITTED.value: (270.0, 315.0, 225.0),
}
#: a pair's curves are this far apart (px)
_SPREAD = 34.0
#: extra bend of a lone edge that would cross another pair's (px, along its left normal)
_BEND: dict[tuple[str, str], float] = {
    (State.TOOL_EMITTED.value, State.FINAL.value): -70.0,
    (State.AWAITING_RESULT.value, State.FINAL.value): -190.0,
    (State.RESULT_RECEIVED.value, State.FIRST_DECISION.value): 40.0,
}


def edge_key(source: str, dest: str, event: str) -> str:
    """The key the page uses for one edge (``source|dest|event``)."""
    return f"{source}|{dest}|{event}"


def _places(diagram: Diagram) -> dict[str, tuple[float, float]]:
    places = {n.state: POSITIONS[n.state] for n in diagram.nodes if n.state in POSITIONS}
    extra = [n.state for n in diagram.nodes if n.state not in POSITIONS]
    for i, state in enumerate(extra):
        places[state] = (170.0 + 310.0 * (i % 3), 540.0 + 110.0 * (i // 3))
    return places


def _border(center: tuple[float, float], toward: tuple[float, float], pad: float = 4.0) -> tuple[float, float]:
    """Where the segment from a box's centre toward a point leaves the box (plus ``pad``)."""
    cx, cy = center
    dx, dy = toward[0] - cx, toward[1] - cy
    if dx == 0 and dy == 0:
        return center
    sx = (NODE_W / 2 + pad) / abs(dx) if dx else math.inf
    sy = (NODE_H / 2 + pad) / abs(dy) if dy else math.inf
    s = min(sx, sy)
    return cx + dx * s, cy + dy * s


def _width(count: int | None) -> float:
    return 1.4 if not count else min(1.6 + 1.2 * math.log10(1 + count), 6.0)


def _label(edge: DiagramEdge) -> str:
    return edge.event if edge.count is None else f"{edge.event} ×{edge.count}"


def _edge_class(edge: DiagramEdge) -> str:
    if not edge.in_machine:
        return "edge foreign"
    return "edge unused" if edge.dimmed else "edge taken"


def _edge_svg(edge: DiagramEdge, path: str, lx: float, ly: float) -> str:
    key = escape(edge_key(edge.source, edge.dest, edge.event))
    label = escape(_label(edge))
    title = escape(f"{edge.source} → {edge.dest} on {edge.event}"
                   + (f": taken {edge.count} times" if edge.count is not None else "")
                   + ("" if edge.in_machine else " (not defined by the machine)")
                   + (f" [{', '.join(edge.guards)}]" if edge.guards else ""))
    marker = "arrow-foreign" if not edge.in_machine else ("arrow-unused" if edge.dimmed else "arrow")
    tw = 7.0 * len(_label(edge)) + 10
    return (
        f'<g class="{_edge_class(edge)}" data-edge="{key}" tabindex="0"><title>{title}</title>'
        f'<path d="{path}" fill="none" stroke-width="{_width(edge.count):.1f}" marker-end="url(#{marker})"/>'
        f'<rect class="label-bg" x="{lx - tw / 2:.1f}" y="{ly - 10:.1f}" width="{tw:.1f}" height="18" rx="4"/>'
        f'<text x="{lx:.1f}" y="{ly + 4:.1f}" text-anchor="middle">{label}</text></g>'
    )


def _pair_edges(edges: list[DiagramEdge], places: dict[str, tuple[float, float]]) -> list[str]:
    """Edges between two different states: one curve each, bent apart within the pair."""
    out: list[str] = []
    pairs: dict[tuple[str, str], list[DiagramEdge]] = defaultdict(list)
    for edge in edges:
        a, b = edge.source, edge.dest
        pairs[(a, b) if a <= b else (b, a)].append(edge)
    for (a, b), group in pairs.items():
        (ax, ay), (bx, by) = places[a], places[b]
        length = math.hypot(bx - ax, by - ay) or 1.0
        nx, ny = -(by - ay) / length, (bx - ax) / length  # the left normal of a -> b
        bend = _BEND.get((a, b), -_BEND.get((b, a), 0.0)) if len(group) == 1 else 0.0
        # labels are wide: curves of a pair stacked side by side need more room than stacked above
        spread = _SPREAD + 46.0 * abs(nx)
        for j, edge in enumerate(group):
            offset = bend + (j - (len(group) - 1) / 2) * spread
            (sx, sy), (dx, dy) = places[edge.source], places[edge.dest]
            mx, my = (sx + dx) / 2 + nx * offset, (sy + dy) / 2 + ny * offset
            cx, cy = 2 * mx - (sx + dx) / 2, 2 * my - (sy + dy) / 2  # the curve passes through (mx, my)
            p0, p2 = _border((sx, sy), (cx, cy)), _border((dx, dy), (cx, cy), pad=7.0)
            path = f"M{p0[0]:.1f},{p0[1]:.1f} Q{cx:.1f},{cy:.1f} {p2[0]:.1f},{p2[1]:.1f}"
            out.append(_edge_svg(edge, path, mx, my))
    return out


def _loops(edges: list[DiagramEdge], places: dict[str, tuple[float, float]]) -> list[str]:
    out: list[str] = []
    by_state: dict[str, list[DiagramEdge]] = defaultdict(list)
    for edge in edges:
        by_state[edge.source].append(edge)
    for state, group in by_state.items():
        x, y = places[state]
        sides = _LOOP_SIDES.get(state, (270.0, 0.0, 180.0))
        for j, edge in enumerate(group):
            angle = math.radians(sides[j % len(sides)] + 360.0 * (j // len(sides)) / 8)
            ux, uy = math.cos(angle), math.sin(angle)
            reach = 52.0 + 14.0 * (j // len(sides))
            tip = (x + ux * (NODE_W / 2 * abs(ux) + NODE_H / 2 * abs(uy) + reach),
                   y + uy * (NODE_W / 2 * abs(ux) + NODE_H / 2 * abs(uy) + reach))
            px, py = -uy, ux
            c1 = (tip[0] + px * 34, tip[1] + py * 34)
            c2 = (tip[0] - px * 34, tip[1] - py * 34)
            p0, p2 = _border((x, y), c1), _border((x, y), c2, pad=7.0)
            path = (f"M{p0[0]:.1f},{p0[1]:.1f} C{c1[0]:.1f},{c1[1]:.1f} "
                    f"{c2[0]:.1f},{c2[1]:.1f} {p2[0]:.1f},{p2[1]:.1f}")
            lx, ly = x + ux * (NODE_W / 2 * abs(ux) + NODE_H / 2 * abs(uy) + reach * 0.8), \
                y + uy * (NODE_W / 2 * abs(ux) + NODE_H / 2 * abs(uy) + reach * 0.8)
            out.append(_edge_svg(edge, path, lx + ux * 12, ly + uy * 6))
    return out


def _node_svg(node: DiagramNode, x: float, y: float) -> str:
    lines = [f"entered {node.entered}"] if node.entered is not None else []
    marks = [f"{name} {n}" for name, n in (("retries", node.retries), ("refusals", node.refusals)) if n]
    if marks:
        lines.append(", ".join(marks))
    cls = "node unused" if node.dimmed else "node"
    if node.state not in POSITIONS:
        cls += " foreign"
    text = f'<text x="{x:.1f}" y="{y - 6 - 7 * len(lines):.1f}" text-anchor="middle" class="state">{escape(node.state)}</text>'
    for i, line in enumerate(lines):
        text += f'<text x="{x:.1f}" y="{y + 10 + 15 * i - 7 * len(lines) + 4:.1f}" text-anchor="middle" class="count">{escape(line)}</text>'
    return (
        f'<g class="{cls}" data-state="{escape(node.state)}"><rect x="{x - NODE_W / 2:.1f}" '
        f'y="{y - NODE_H / 2:.1f}" width="{NODE_W}" height="{NODE_H}" rx="12"/>{text}</g>'
    )


def diagram_svg(diagram: Diagram) -> str:
    """The diagram as one ``<svg>`` element (styled by the page's CSS classes)."""
    places = _places(diagram)
    height = max(y for _, y in places.values()) + NODE_H / 2 + 90
    loops = [e for e in diagram.edges if e.source == e.dest]
    others = [e for e in diagram.edges if e.source != e.dest]
    parts = [
        f'<svg id="diagram" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_WIDTH:.0f} {height:.0f}" '
        f'role="img" aria-label="{escape(diagram.title)}">',
        "<defs>",
        *(f'<marker id="{name}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="11" markerHeight="11" '
          f'markerUnits="userSpaceOnUse" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" class="{name}"/></marker>'
          for name in ("arrow", "arrow-unused", "arrow-foreign")),
        "</defs>",
    ]
    for state, count in diagram.starts:
        if state in places:
            sx, sy = places[state]
            label = f"{count} run{'' if count == 1 else 's'}" if count is not None else "start"
            parts.append(
                f'<g class="start"><circle cx="{sx:.1f}" cy="{_START[1]:.1f}" r="7"/>'
                f'<path d="M{sx:.1f},{_START[1] + 8:.1f} L{sx:.1f},{sy - NODE_H / 2 - 7:.1f}" '
                f'marker-end="url(#arrow)"/><text x="{sx + 12:.1f}" y="{_START[1] + 5:.1f}">{escape(label)}</text></g>'
            )
    parts += _pair_edges(others, places)
    parts += _loops(loops, places)
    parts += [_node_svg(node, *places[node.state]) for node in diagram.nodes]
    parts.append("</svg>")
    return "".join(parts)
