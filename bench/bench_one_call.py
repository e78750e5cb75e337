"""Benchmark: seconds per one-call task of the suite on the embedded model, this tree
against a reference commit checked out beside it, in the same run.

The reference is :data:`REFERENCE` (``AGENTFSM_BENCH_REFERENCE``; default ``9c0bf68``,
the code landed when issue 32 asked for half its seconds per one-call task), checked out
with ``git worktree`` into a temporary folder. Each round runs
``bench/one_call_seconds.py`` on :data:`TASKS` (tuned English one-call tasks, defaults)
once with the reference's code on ``PYTHONPATH`` and once with this tree's, each in a
fresh process (the model loaded anew; its load is not counted); a row shows every
round's seconds, the median, the model calls and the tasks passed. Needs the git history
(a shallow clone without the reference commit reports that as a failure).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["run"]

REFERENCE = os.environ.get("AGENTFSM_BENCH_REFERENCE", "9c0bf68")
#: two one-call tasks (an add and a unit conversion), as the quality suite writes them
TASKS = "add_8_5.en1,km_100.en1"
ROUNDS = 3
_ROOT = Path(__file__).resolve().parent.parent
_SCRIPT = _ROOT / "bench" / "one_call_seconds.py"


def _once(code: Path) -> dict[str, Any]:
    """One run of the tasks with ``code`` on the path: seconds, model calls, passed."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    done = subprocess.run(
        [sys.executable, str(_SCRIPT), TASKS], env=env, cwd=_ROOT, capture_output=True, text=True, timeout=900, check=True
    )
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    total = lines[-1]
    return {"s": float(total["total_s"]), "calls": int(total["calls"]), "passed": sum(bool(t.get("ok")) for t in lines[:-1])}


def run() -> list[dict[str, Any]]:
    """One table: the reference's and this tree's seconds for the same tasks."""
    with tempfile.TemporaryDirectory() as tmp:
        reference = Path(tmp) / "reference"
        subprocess.run(["git", "worktree", "add", "--detach", str(reference), REFERENCE],
                       cwd=_ROOT, check=True, capture_output=True)
        try:
            runs: dict[str, list[dict[str, Any]]] = {"reference": [], "this tree": []}
            for _ in range(ROUNDS):  # in turn, round after round: a slow spell hits both
                runs["reference"].append(_once(reference))
                runs["this tree"].append(_once(_ROOT))
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(reference)], cwd=_ROOT, capture_output=True)
            subprocess.run(["git", "worktree", "prune"], cwd=_ROOT, capture_output=True)
    base = statistics.median(r["s"] for r in runs["reference"])
    rows = []
    for name, label in (("reference", f"{REFERENCE} (reference)"), ("this tree", "this tree")):
        seconds = [r["s"] for r in runs[name]]
        median = statistics.median(seconds)
        rows.append([
            label, ", ".join(f"{s:.1f}" for s in seconds), f"{median:.1f}", runs[name][-1]["calls"],
            f"{runs[name][-1]['passed']} of {len(TASKS.split(','))}", f"{median / base:.2f}x",
        ])
    return [{
        "title": "Seconds per one-call task on the embedded model: this tree against the landed code",
        "columns": ["code", "runs (s, all tasks)", "median (s)", "model calls", "tasks passed", "vs reference"],
        "rows": rows,
        "notes": (
            f"bench/one_call_seconds.py {TASKS} (eval.suite.run_suite_task, defaults, greedy), {ROUNDS} rounds, "
            f"the reference ({REFERENCE}, a git worktree beside this tree) and this tree in turn each round, each "
            "run a fresh process; seconds are the tasks' own (the model's load not counted). Ratios are "
            "medians against the reference's median, measured in the same run."
        ),
    }]


if __name__ == "__main__":
    from run import print_tables  # bench/run.py

    print_tables(run(), __file__)
