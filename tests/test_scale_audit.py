"""The reviewer and batch tools at scale: what they hold in memory and how often they
read, checked without timings (the figures are in bench/)."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

from agentfsm.batch.controller import run_batch_sync
from agentfsm.report import build_report
from agentfsm.testing.sample_batch import sample_backend

#: characters of padding in each task's prompt: every model request repeats it, so each
#: transcript holds it several times over, and its events are large
PADDING = 300_000


def _padded_batch(directory: Path, runs: int) -> Path:
    """A batch of ``runs`` sample tasks (ok, corrected, failed, exhausted) with large prompts."""
    tasks = [
        {"id": f"task-{n:05d}", "prompt": f"task {n}: what is 2 times 3? " + "x" * PADDING}
        for n in range(runs)
    ]
    results = directory / "results.jsonl"
    run_batch_sync(
        tasks,
        output=results,
        backend=sample_backend(),
        tools_module="agentfsm.testing.example_tools:TOOLS",
        transcripts_dir=directory / "transcripts",
        concurrency=4,
        ramp=0,
    )
    return results


def _report_peak(results: Path) -> int:
    tracemalloc.start()
    try:
        build_report([results])
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_report_holds_one_transcripts_events_at_a_time(tmp_path: Path) -> None:
    """The report keeps its rows (texts clipped) and the diagram's counts, not every
    transcript's events until the end: 4x the runs is not 4x the peak memory."""
    small = _report_peak(_padded_batch(tmp_path / "small", 8))
    large = _report_peak(_padded_batch(tmp_path / "large", 32))
    # each transcript's events hold its prompt several times (>= 1 MB): held together,
    # 32 of them would peak some 30 MB higher than 8 do
    assert large < small + 2_000_000, (small, large)
