"""The reviewer and batch tools at scale: what they hold in memory and how often they
read, checked without timings (the figures are in bench/)."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from agentfsm.batch.controller import run_batch_sync
from agentfsm.core.errors import TranscriptError
from agentfsm.report import build_report
from agentfsm.runtime.transcript import iter_events
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


FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "transcripts"


def _events_peak(path: Path) -> int:
    tracemalloc.start()
    try:
        for _ in iter_events(path):
            pass
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_reading_a_transcript_holds_one_line_at_a_time(tmp_path: Path) -> None:
    """A reader of a transcript of many megabytes (a proxy's, thousands of runs
    appended) holds a line of it at a time, not the file and its lines."""
    lines = (FIXTURES / "hand-one-tool.jsonl").read_bytes()
    path = tmp_path / "long.jsonl"
    path.write_bytes(lines * 2000)  # 7 MB
    assert sum(1 for _ in iter_events(path)) == 2000 * lines.count(b"\n")
    assert _events_peak(path) < 1_000_000 < path.stat().st_size


def test_a_last_line_torn_inside_a_character_is_skipped(tmp_path: Path) -> None:
    """A writer killed in the middle of a multi-byte character tears its last line
    there: that line is skipped like any torn one, the file still reads."""
    whole = (FIXTURES / "hand-one-tool.jsonl").read_bytes()
    torn = '{"v": 3, "run": "r", "seq": 9, "t": "2026-01-01T00:00:00.000+00:00", "type": "final", "content": "é'
    path = tmp_path / "torn.jsonl"
    path.write_bytes(whole + torn.encode()[:-1])  # the last byte of "é" never written
    assert len(list(iter_events(path))) == whole.count(b"\n")
    path.write_bytes(whole + b"\xff\n" + whole)  # not UTF-8 inside the file: an error naming the line
    bad = whole.count(b"\n") + 1
    with pytest.raises(TranscriptError, match=f"line {bad}:"):
        list(iter_events(path))
