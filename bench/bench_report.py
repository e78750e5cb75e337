"""Benchmark: ``agentfsm report`` on a 1,000-run batch directory: build time, size, load time in a browser.

The batch is :func:`agentfsm.testing.sample_batch.write_sample_batch` (the real batch
controller on a scripted model: ok, corrected, failed and exhausted runs, transcripts
on). Figures, each beside a reference measured in the same run:

- build: ``agentfsm report DIR -o FILE`` in-process (best of :data:`REPEATS`), against
  reading the same transcripts into typed events alone (what any reader of them pays);
- size: the HTML file, against the stated limit :data:`SIZE_LIMIT`;
- load: headless Chromium (Debian's, driven by Playwright) opening the file from disk
  until the page's script has built the table (``body[data-ready]``), median of
  :data:`LOADS` fresh pages, against the 3 s target and against an empty page opened the
  same way (the browser's own floor).

``AGENTFSM_BENCH_REPORT_RUNS`` changes the number of runs (default 1,000).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from agentfsm.report import write_report
from agentfsm.report.inputs import gather
from agentfsm.runtime.transcript import iter_events
from agentfsm.testing.browser import chromium_page
from agentfsm.testing.sample_batch import write_sample_batch

__all__ = ["run"]

RUNS = int(os.environ.get("AGENTFSM_BENCH_REPORT_RUNS", "1000"))
REPEATS = 3
LOADS = 5
#: the size a report of 1,000 runs stays under (bytes)
SIZE_LIMIT = 8 * 1024 * 1024
#: seconds a report of 1,000 runs may take to open
LOAD_TARGET = 3.0


def _read_only(directory: Path) -> float:
    start = time.perf_counter()
    for source in gather([directory]).sources:
        if source.path is not None:
            for _ in iter_events(source.path):
                pass
    return time.perf_counter() - start


def _load(page: Any, path: Path) -> tuple[float, float]:
    """Wall seconds from navigation to the built table, and the page's own clock at that point."""
    start = time.perf_counter()
    page.goto(path.as_uri())
    page.wait_for_selector("body[data-ready=true]", state="attached", timeout=60_000)
    wall = time.perf_counter() - start
    return wall, float(page.get_attribute("body", "data-ready-ms") or 0) / 1000


def _empty_load(page: Any, path: Path) -> float:
    start = time.perf_counter()
    page.goto(path.as_uri())
    page.wait_for_selector("body[data-ready=true]", state="attached", timeout=60_000)
    return time.perf_counter() - start


def run() -> list[dict[str, Any]]:
    """One table: build, size and browser load of a report of :data:`RUNS` runs."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        batch = root / "batch"
        start = time.perf_counter()
        write_sample_batch(batch, RUNS, concurrency=32)
        generate = time.perf_counter() - start
        out = root / "report.html"
        builds, reads = [], []
        for _ in range(REPEATS):
            reads.append(_read_only(batch))
            start = time.perf_counter()
            stats = write_report([batch], out)
            builds.append(time.perf_counter() - start)
        size = out.stat().st_size
        empty = root / "empty.html"
        empty.write_text('<!doctype html><body data-ready="true"></body>', encoding="utf-8")
        loads: list[tuple[float, float]] = []
        floors: list[float] = []
        for _ in range(LOADS):
            with chromium_page() as page:
                floors.append(_empty_load(page, empty))
            with chromium_page() as page:
                loads.append(_load(page, out))
    wall = statistics.median(w for w, _ in loads)
    script = statistics.median(s for _, s in loads)
    floor = statistics.median(floors)
    build, read = min(builds), min(reads)
    rows = [
        [f"build ({stats.runs} runs)", f"{build:.2f} s", f"{build / read:.1f}x reading the transcripts ({read:.2f} s)"],
        ["size", f"{size / 1024 / 1024:.2f} MiB", f"{size / SIZE_LIMIT:.2f}x the {SIZE_LIMIT // 1024 // 1024} MiB limit"],
        ["load in Chromium (to the built table)", f"{wall:.2f} s", f"{wall / LOAD_TARGET:.2f}x the {LOAD_TARGET:.0f} s target; empty page {floor:.2f} s"],
        ["  of which the page's own clock", f"{script:.2f} s", "navigation start to the table built (performance.now)"],
    ]
    return [
        {
            "title": f"Report: agentfsm report on a {RUNS:,}-run batch directory",
            "columns": ["what", "measured", "against"],
            "rows": rows,
            "notes": (
                f"Sample batch (agentfsm.testing.sample_batch: {RUNS} tasks, {stats.failed} failed, written in "
                f"{generate:.1f} s). Build best of {REPEATS}; load median of {LOADS} fresh headless Chromium "
                "pages, from disk, until the script has built the table (timelines are built when a run is "
                "opened). Targets: under 3 s to open, under 8 MiB."
            ),
        }
    ]


if __name__ == "__main__":
    from run import print_tables  # bench/run.py

    print_tables(run(), __file__)
