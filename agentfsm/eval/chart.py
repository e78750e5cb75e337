"""A PNG chart of accuracy by run (dialect x enforcement level), per category.

Grouped bars: one group per category (and the ``mean``), one bar per run, the BFCL
prompt-mode baseline first and grey. Needs matplotlib (the ``eval`` extra); the Agg
backend is used, so no display is required.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from agentfsm.core.errors import MissingExtraError
from agentfsm.eval.report import ReportRow
from agentfsm.eval.runner import BASELINE

__all__ = ["write_chart"]


def write_chart(rows: Sequence[ReportRow], path: Path, title: str = "BFCL accuracy through agentfsm") -> Path:
    """Draw the rows' accuracies to ``path`` (PNG) and return it."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingExtraError("eval", "the chart (matplotlib)") from exc

    categories = list(dict.fromkeys(r.category for r in rows))
    specs = list(dict.fromkeys(r.spec for r in rows))
    specs.sort(key=lambda s: 0 if s == BASELINE else 1)
    acc = {(r.category, r.spec): r.accuracy for r in rows}

    width = 0.8 / max(1, len(specs))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(categories) * max(1, len(specs)) ** 0.5 + 2), 4.5))
    cmap = plt.get_cmap("tab10")
    for i, spec in enumerate(specs):
        xs = [c + (i - (len(specs) - 1) / 2) * width for c in range(len(categories))]
        ys = [acc.get((cat, spec), 0.0) for cat in categories]
        color = "0.6" if spec == BASELINE else cmap((i - 1) % 10)
        bars = ax.bar(xs, ys, width * 0.95, label=spec.label, color=color)
        for bar, y in zip(bars, ys, strict=True):
            ax.annotate(
                f"{y:.0f}",
                (bar.get_x() + bar.get_width() / 2, y),
                ha="center",
                va="bottom",
                fontsize=7,
                xytext=(0, 1),
                textcoords="offset points",
            )
    ax.set_xticks(range(len(categories)))
    ax.set_xticklabels(categories)
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(0, 105)
    ax.set_title(title)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
