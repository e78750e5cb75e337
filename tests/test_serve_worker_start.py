"""``agentfsm serve --workers N`` whose workers cannot start exits non-zero, with one line
saying why: an operator's supervisor restarts a command that failed, not one that ended 0.

Defect (found by the CLI audit): a worker whose app could not be built (a transcripts
folder it cannot write, a models file gone) died with a traceback and uvicorn started
another, which died alike, for ever; and one that failed in uvicorn's own start-up made
uvicorn stop and serve exit 0. Real parts: the CLI as a subprocess, its workers spawned by
uvicorn. The fault is put in the workers only, by a ``sitecustomize`` that the parent runs
before it starts serving (its checks pass) and each worker runs again, where it points the
transcripts folder at a path under a file.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SERVE = [sys.executable, "-m", "agentfsm", "serve", "--backend", "openai", "--base-url", "http://127.0.0.1:9/v1",
         "--workers", "2"]

#: in a worker of serve (the parent sets AGENTFSM_SERVE_PARENT for them only), a transcripts
#: folder that cannot be made
BREAK_WORKERS = '''
import json, os

if os.environ.get("AGENTFSM_SERVE_PARENT"):
    options = json.loads(os.environ["AGENTFSM_SERVE_OPTIONS"])
    options["transcripts"] = os.path.join(__file__, "transcripts")
    os.environ["AGENTFSM_SERVE_OPTIONS"] = json.dumps(options)
'''

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="uvicorn's workers on POSIX")


def _serve(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """serve run to its end (it must end by itself: past two minutes the test fails)."""
    return subprocess.run([*SERVE, *args], capture_output=True, text=True, cwd=REPO, env=env, timeout=120,
                          start_new_session=True)


def test_a_worker_that_cannot_start_makes_serve_exit_non_zero_saying_why(tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text(BREAK_WORKERS)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    done = _serve("--port", "0", env=env)  # before: workers replaced for ever (the run timed out)
    assert done.returncode == 3, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[0].startswith("agentfsm proxy on http://127.0.0.1:")
    assert lines[1:] == [
        "agentfsm: error: a worker failed to start: cannot write transcripts into directory "
        f"{tmp_path / 'sitecustomize.py' / 'transcripts'}: a part of the path is not a directory"
    ], done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("workers", ["1", "2"])
def test_serve_on_a_port_already_taken_exits_non_zero_naming_it(workers: str) -> None:
    # before: "agentfsm proxy on ..." first, then uvicorn's line without the address
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _serve("--port", str(port), "--workers", workers, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 3, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"agentfsm: error: cannot listen on http://127.0.0.1:{port}: Address already in use"
    ], done.stderr


#: in a worker of serve, a thread that writes the collector's state (young threshold, heap
#: frozen) to WATCH_DIR/gc-PID.json, again and again, until the worker ends (multiprocessing's
#: resource tracker, a child of the parent too, is no worker)
WATCH_GC = '''
import gc, json, os, threading, time

with open("/proc/self/cmdline", "rb") as f:
    TRACKER = b"resource_tracker" in f.read()
if os.environ.get("AGENTFSM_SERVE_PARENT") and not TRACKER:
    def _watch() -> None:
        out = os.path.join(os.environ["WATCH_DIR"], f"gc-{os.getpid()}.json")
        while True:
            with open(out + ".part", "w") as f:
                json.dump([gc.get_threshold()[0], gc.get_freeze_count() > 0], f)
            os.replace(out + ".part", out)
            time.sleep(0.05)

    threading.Thread(target=_watch, daemon=True).start()
'''


def test_each_worker_tunes_its_collector_as_one_process_does(tmp_path: Path) -> None:
    # before: only the single process froze its start-up heap and raised the young
    # threshold; each worker of --workers kept Python's 700 and walked its whole heap
    from agentfsm.cli.serve import YOUNG_COLLECTION_THRESHOLD

    (tmp_path / "sitecustomize.py").write_text(WATCH_GC)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)]), "WATCH_DIR": str(tmp_path)}
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen([*SERVE, "--port", str(port)], cwd=REPO, env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    states: dict[str, list[object]] = {}
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and proc.poll() is None:
            states = {p.name: json.loads(p.read_text()) for p in tmp_path.glob("gc-*.json")}
            if len(states) == 2 and all(s == [YOUNG_COLLECTION_THRESHOLD, True] for s in states.values()):
                break
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.communicate(timeout=60)
    assert len(states) == 2, states
    assert all(s == [YOUNG_COLLECTION_THRESHOLD, True] for s in states.values()), states
