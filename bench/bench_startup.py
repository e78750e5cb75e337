"""Benchmark: start-up time of ``import agentfsm`` and of the CLI, against bare Python.

Each command runs in a fresh interpreter, best of :data:`REPEATS`, beside ``python -c
pass`` measured in the same run (the interpreter's own start, the floor). Wall time is
reported, and CPU time (user + system) too: on a shared machine the wall time carries
whatever else is running, the CPU time much less. ``import agentfsm`` is also given as
the cumulative microseconds ``python -X importtime`` reports for it. ``agentfsm replay``
is also timed on a transcript written just before by a scripted run (a tool call, a
correction, an answer): replaying one loads the engine, the guards and the parser.
"""

from __future__ import annotations

import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["run"]

REPEATS = 7

#: what is timed: a label and the interpreter arguments
COMMANDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("python -c pass (floor)", ("-c", "pass")),
    ("import agentfsm", ("-c", "import agentfsm")),
    ("agentfsm --help", ("-m", "agentfsm", "--help")),
    ("agentfsm replay --help", ("-m", "agentfsm", "replay", "--help")),
    ("agentfsm serve --help", ("-m", "agentfsm", "serve", "--help")),
)


def _transcript(path: Path) -> int:
    """Write a short agent run's transcript to ``path`` (a call, a correction, an answer);
    the number of its events."""
    from agentfsm import Agent, ScriptedBackend

    def multiply(a: float, b: float) -> float:
        """Multiply two numbers."""
        return a * b

    replies = [
        '{"action": {"tool": "multiply", "args": {"a": 12.5, "b": 4}}}',
        '{"action": {"tool": "divide", "args": {"a": 50}}}',
        '{"final": {"content": "12.5 times 4 is 50."}}',
    ]
    Agent(ScriptedBackend(replies), [multiply], transcript=path).run("What is 12.5 times 4?")
    return len(path.read_text(encoding="utf-8").splitlines())


def _once(args: tuple[str, ...]) -> tuple[float, float]:
    """Wall and CPU seconds of one fresh interpreter running ``args``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def _import_us() -> int:
    """Cumulative microseconds of ``import agentfsm`` by ``-X importtime`` (best of the repeats)."""
    best = None
    for _ in range(REPEATS):
        err = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", "import agentfsm"], check=True, capture_output=True, text=True
        ).stderr
        match = re.search(r"\|\s*(\d+)\s*\|\s*agentfsm\s*$", err, re.M)
        if match:
            value = int(match.group(1))
            best = value if best is None else min(best, value)
    return best or 0


def run() -> list[dict[str, Any]]:
    """One table: each command's best wall and CPU time, and its wall time over the floor."""
    measured: list[tuple[str, float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        transcript = Path(tmp) / "run.jsonl"
        events = _transcript(transcript)
        replay = (f"agentfsm replay FILE ({events} events)", ("-m", "agentfsm", "replay", str(transcript)))
        for label, args in (*COMMANDS, replay):
            runs = [_once(args) for _ in range(REPEATS)]
            measured.append((label, min(w for w, _ in runs), min(c for _, c in runs)))
    floor = measured[0][1]
    rows = [
        [label, f"{wall * 1000:.0f}", f"{cpu * 1000:.0f}", f"{wall / floor:.1f}x"] for label, wall, cpu in measured
    ]
    return [
        {
            "title": "Start-up: import agentfsm and the CLI",
            "columns": ["command", "wall ms (best)", "CPU ms (best)", "wall vs python -c pass"],
            "rows": rows,
            "notes": (
                f"Best of {REPEATS} fresh interpreters each. `import agentfsm`: {_import_us() / 1000:.0f} ms "
                "cumulative by `python -X importtime` (best). Targets: import <= 150 ms, `agentfsm --help` "
                "< 300 ms wall. The CLI registers its commands without importing the server, batch, eval "
                "or rendering code (tests/test_cli.py checks which modules --help loads)."
            ),
        }
    ]


if __name__ == "__main__":
    from run import print_tables  # bench/run.py

    print_tables(run(), __file__)
