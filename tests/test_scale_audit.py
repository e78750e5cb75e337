"""The reviewer and batch tools at scale: what they hold in memory and how often they
read, checked without timings (the figures are in bench/)."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agentfsm.batch.controller import run_batch_sync
from agentfsm.core.errors import TranscriptError
from agentfsm.core.events import TranscriptEvent, parse_event
from agentfsm.core.runs import runs_in_order
from agentfsm.replays.compare import ReplayReport, replay
from agentfsm.report import build_report
from agentfsm.runtime.transcript import iter_events
from agentfsm.testing.sample_batch import sample_backend

#: characters of padding in each task's prompt: every model request repeats it, so each
#: transcript holds it several times over, and its events are large
PADDING = 300_000


def _padded_batch(directory: Path, runs: int, padding: int = PADDING) -> Path:
    """A batch of ``runs`` sample tasks (ok, corrected, failed, exhausted) with large prompts."""
    tasks = [
        {"id": f"task-{n:05d}", "prompt": f"task {n}: what is 2 times 3? " + "x" * padding}
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


def _one_file(batch: Path) -> Path:
    """The batch's transcripts appended into one file, as a proxy writes its runs."""
    one = batch / "all.jsonl"
    one.write_bytes(b"".join(p.read_bytes() for p in sorted((batch / "transcripts").glob("*.jsonl"))))
    return one


def _peak(work: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        work()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_runs_of_one_file_are_reported_and_replayed_one_at_a_time(tmp_path: Path) -> None:
    """Thousands of runs appended to one transcript: the report and replay hold a run
    at a time (and each replayed turn's stream is closed, not left to the loop)."""
    small = _one_file(_padded_batch(tmp_path / "small", 8, 100_000).parent)
    large = _one_file(_padded_batch(tmp_path / "large", 24, 100_000).parent)
    # each run's events hold its prompt several times (>= 0.3 MB): held together, 24 runs
    # would peak some 5 MB higher than 8 do
    report = [_peak(lambda: build_report([path])) for path in (small, large)]
    assert report[1] < report[0] + 1_500_000, report
    reports: list[ReplayReport] = []
    replayed = [_peak(lambda: reports.append(replay(path))) for path in (small, large)]
    assert replayed[1] < replayed[0] + 1_500_000, replayed
    assert [(r.runs, r.identical) for r in reports] == [(8, True), (24, True)]


def _event(run: str, seq: int, end: bool = False) -> TranscriptEvent:
    fields = {"type": "run_end", "status": "final", "steps": 1, "corrections": 0} if end else {"type": "final", "content": "x"}
    return parse_event({"v": 3, "run": run, "seq": seq, "t": "2026-01-01T00:00:00.000+00:00", **fields})


def test_runs_in_order_gives_each_run_once_it_and_those_before_it_ended() -> None:
    a0, b0, a1, b1, c0 = _event("a", 0), _event("b", 0), _event("a", 1, end=True), _event("b", 1, end=True), _event("c", 0)
    given: list[list[str]] = []
    events = [b0, a0, a1, c0, b1]  # b begins first and ends last; c never ends (cut off)

    def watched() -> Iterator[TranscriptEvent]:
        for event in events:
            given.append([])  # a mark per event read
            yield event

    runs = []
    for run in runs_in_order(watched()):
        runs.append([(i, e.run) for i, e in run])
        given[-1].append(run[0][1].run)
    assert runs == [[(0, "b"), (4, "b")], [(1, "a"), (2, "a")], [(3, "c")]]
    # nothing is given before b's run_end is read (a waits behind b), then b and a; c at the end
    assert given == [[], [], [], [], ["b", "a", "c"]]
