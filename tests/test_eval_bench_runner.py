"""``bench/run.py``: each module in a child process; a failing one is reported, not fatal."""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

RUNNER = Path(__file__).parent.parent / "bench" / "run.py"


@pytest.fixture(scope="module")
def bench_run() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_run_under_test", RUNNER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_run_under_test"] = module
    spec.loader.exec_module(module)
    return module


GOOD = '''
def run():
    return [{"title": "demo", "columns": ["case", "ratio"], "rows": [["a|b", 1.5]], "notes": "n"}]
'''


def test_a_module_runs_in_a_child_and_renders(bench_run: ModuleType, tmp_path: Path) -> None:
    good = tmp_path / "bench_good.py"
    good.write_text(GOOD)
    tables, seconds = bench_run.run_module(good, timeout=60)
    assert tables == [{"title": "demo", "columns": ["case", "ratio"], "rows": [["a|b", 1.5]], "notes": "n"}]
    meta = {"date": "2026-01-01T00:00:00+00:00", "machine": "test box", "command": "make bench", "seconds": 1.0}
    text = bench_run.render_markdown([{"module": "bench_good.py", "seconds": seconds, "tables": tables}], meta)
    assert "- machine: test box" in text
    assert "## demo" in text and "| a\\|b | 1.5 |" in text


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("def run():\n    raise RuntimeError('boom')\n", "RuntimeError: boom"),
        ("import os\ndef run():\n    os._exit(3)\n", "exit 3"),
        ("def run():\n    return 42\n", "did not return a list of tables"),
        ("import time\ndef run():\n    time.sleep(30)\n", "timed out"),
    ],
)
def test_a_failing_module_becomes_a_failure_table(
    bench_run: ModuleType, tmp_path: Path, source: str, reason: str
) -> None:
    bad = tmp_path / "bench_bad.py"
    bad.write_text(source)
    tables, _ = bench_run.run_module(bad, timeout=3)
    assert tables[0]["failed"] is True and tables[0]["title"] == "bench_bad: FAILED"
    assert reason in tables[0]["rows"][0][1]


def test_discover_orders_known_areas_first(bench_run: ModuleType) -> None:
    names = [p.stem for p in bench_run.discover()]
    known = [n for n in names if n.removeprefix("bench_") in bench_run.ORDER]
    assert known == sorted(known, key=lambda n: bench_run.ORDER.index(n.removeprefix("bench_")))
    assert all(n.startswith("bench_") for n in names)


def test_a_partial_run_never_replaces_the_full_tables(bench_run: ModuleType) -> None:
    assert bench_run.result_stem(None) == "latest"
    assert bench_run.result_stem({"states", "parser"}) == "partial-parser-states"


def test_a_timed_out_module_takes_the_processes_it_started_with_it(
    bench_run: ModuleType, tmp_path: Path
) -> None:
    pid_file = tmp_path / "server.pid"
    bad = tmp_path / "bench_bad.py"
    bad.write_text(
        "import subprocess, sys, time\n"
        "def run():\n"
        "    server = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
        f"    open({str(pid_file)!r}, 'w').write(str(server.pid))\n"
        "    time.sleep(60)\n"
    )
    tables, _ = bench_run.run_module(bad, timeout=3)
    assert "timed out" in tables[0]["rows"][0][1]
    pid = int(pid_file.read_text())
    # the server is gone (a zombie reaped by init may linger a moment: poll briefly)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.05)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
