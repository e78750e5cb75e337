"""Text renderings of a :class:`~agentfsm.diagram.model.Diagram`: mermaid, graphviz DOT, markdown.

Pure functions, value in and text out. The machine is drawn as a mermaid
``stateDiagram-v2`` (edges between the same two states merged, labels
``event [guard]``); observed paths as a mermaid ``flowchart``, because only
flowcharts can style single edges: every edge is labelled ``event ×count``, edges
never taken are dashed grey, and edges the machine does not define are red.
"""

from __future__ import annotations

import re
from agentfsm.core.machine import GUARDS
from agentfsm.diagram.model import Diagram, DiagramEdge, DiagramNode

__all__ = ["document_markdown", "to_graphviz_dot", "to_mermaid"]

_DIM_STYLE = "stroke:#bbb,color:#bbb,stroke-dasharray:4 4"
_FOREIGN_STYLE = "stroke:#d62728,color:#d62728"
_INDENT = "    "


def _node_id(state: str) -> str:
    return "s_" + re.sub(r"[^A-Za-z0-9_]", "_", state)


def _edge_label(edge: DiagramEdge) -> str:
    if edge.count is not None:
        return f"{edge.event} ×{edge.count}"
    if edge.guards:
        return f"{edge.event} [{', '.join(edge.guards)}]"
    return edge.event


def _node_lines(node: DiagramNode) -> list[str]:
    lines = [node.state]
    if node.entered is not None:
        lines.append(f"entered {node.entered}")
    marks = [f"{name} {n}" for name, n in (("retries", node.retries), ("refusals", node.refusals)) if n]
    if marks:
        lines.append(", ".join(marks))
    return lines


def _runs(count: int | None) -> str:
    return "" if count is None else f"{count} run{'' if count == 1 else 's'}"


def _mermaid_text(text: str) -> str:
    return text.replace('"', "#quot;")


def to_mermaid(diagram: Diagram) -> str:
    """Mermaid text: a ``stateDiagram-v2`` for the machine, a ``flowchart`` for observed paths."""
    title = diagram.title.replace("\\", "\\\\").replace('"', '\\"')
    head = ["---", f'title: "{title}"', "---"]
    body = _observed_mermaid(diagram) if diagram.observed else _machine_mermaid(diagram)
    return "\n".join(head + body) + "\n"


def _machine_mermaid(diagram: Diagram) -> list[str]:
    lines = ["stateDiagram-v2"]
    lines += [f'{_INDENT}state "{node.state}" as {_node_id(node.state)}' for node in diagram.nodes]
    lines += [f"{_INDENT}[*] --> {_node_id(state)}" for state, _ in diagram.starts]
    merged: dict[tuple[str, str], list[str]] = {}
    for edge in diagram.edges:
        merged.setdefault((edge.source, edge.dest), []).append(_edge_label(edge))
    for (source, dest), labels in merged.items():
        lines.append(f"{_INDENT}{_node_id(source)} --> {_node_id(dest)}: {' | '.join(labels)}")
    return lines


def _observed_mermaid(diagram: Diagram) -> list[str]:
    lines = ["flowchart LR"]
    if diagram.starts:
        lines.append(f"{_INDENT}run_start((start))")
    for node in diagram.nodes:
        label = _mermaid_text("<br/>".join(_node_lines(node)))
        lines.append(f'{_INDENT}{_node_id(node.state)}("{label}")')
    links: list[str] = []
    dimmed: list[int] = []
    foreign: list[int] = []
    for state, count in diagram.starts:
        links.append(f'run_start -->|"{_runs(count)}"| {_node_id(state)}')
    for edge in diagram.edges:
        if edge.dimmed:
            dimmed.append(len(links))
        if not edge.in_machine:
            foreign.append(len(links))
        label = _mermaid_text(_edge_label(edge))
        links.append(f'{_node_id(edge.source)} -->|"{label}"| {_node_id(edge.dest)}')
    lines += [_INDENT + link for link in links]
    lines.append(f"{_INDENT}classDef dimmed {_DIM_STYLE}")
    unvisited = [_node_id(node.state) for node in diagram.nodes if node.dimmed]
    if unvisited:
        lines.append(f"{_INDENT}class {','.join(unvisited)} dimmed")
    if dimmed:
        lines.append(f"{_INDENT}linkStyle {','.join(map(str, dimmed))} {_DIM_STYLE}")
    if foreign:
        lines.append(f"{_INDENT}linkStyle {','.join(map(str, foreign))} {_FOREIGN_STYLE}")
    return lines


def _dot_quote(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def to_graphviz_dot(diagram: Diagram) -> str:
    """Graphviz DOT text for the same graph (for ``dot -Tsvg`` / ``-Tpng``)."""
    lines = [
        f"digraph {_dot_quote(diagram.title)} {{",
        f'{_INDENT}graph [rankdir=LR, label={_dot_quote(diagram.title)}, labelloc=t, fontname="Helvetica"];',
        f'{_INDENT}node [shape=box, style=rounded, fontname="Helvetica"];',
        f'{_INDENT}edge [fontname="Helvetica", fontsize=10];',
        f'{_INDENT}"__start__" [shape=point, label=""];',
    ]
    for node in diagram.nodes:
        attrs = f"label={_dot_quote(chr(10).join(_node_lines(node)))}"
        if node.dimmed:
            attrs += ', style="rounded,dashed", color=gray70, fontcolor=gray60'
        lines.append(f"{_INDENT}{_dot_quote(node.state)} [{attrs}];")
    for state, count in diagram.starts:
        lines.append(f'{_INDENT}"__start__" -> {_dot_quote(state)} [label={_dot_quote(_runs(count))}];')
    for edge in diagram.edges:
        attrs = f"label={_dot_quote(_edge_label(edge))}"
        if edge.dimmed:
            attrs += ", style=dashed, color=gray70, fontcolor=gray60"
        if not edge.in_machine:
            attrs += ", color=red3, fontcolor=red3"
        lines.append(f"{_INDENT}{_dot_quote(edge.source)} -> {_dot_quote(edge.dest)} [{attrs}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def document_markdown(diagram: Diagram) -> str:
    """A markdown page with the mermaid diagram and a legend, as written by ``make diagrams``."""
    parts = [f"# {diagram.title}", ""]
    if diagram.observed:
        parts += [
            "Generated by `make diagrams` from transcripts; do not edit by hand. Each edge is "
            "labelled with how often runs took it; dashed grey edges and states were never "
            "reached; red edges are transitions the machine does not define.",
            "",
        ]
    else:
        parts += [
            "Generated by `make diagrams` from `agentfsm.core.machine.TRANSITIONS`; do not edit by hand.",
            "",
        ]
    parts += ["```mermaid", to_mermaid(diagram).rstrip("\n"), "```", ""]
    if diagram.observed:
        parts += ["| state | entered | retries | refusals |", "|---|---|---|---|"]
        parts += [
            f"| `{node.state}` | {node.entered} | {node.retries} | {node.refusals} |"
            for node in diagram.nodes
        ]
    else:
        parts += ["| guard | holds when |", "|---|---|"]
        parts += [f"| `{name}` | {meaning} |" for name, meaning in GUARDS.items()]
    return "\n".join(parts) + "\n"
