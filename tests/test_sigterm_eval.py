"""Ctrl-C and SIGTERM stop ``agentfsm eval bfcl``, ``eval quality`` and ``calibrate`` as they
stop ``run`` and ``batch``: exit 130 / 143, one line on stderr (the evals say how many runs
were done), each run under way ends its transcript with ``run_end`` status ``cancelled``,
and no report or profile is written (one already there is left as it was). Before, SIGTERM
killed them where they stood (a transcript without ``run_end``, nothing said) and Ctrl-C
left the evals silent. Real parts: the CLI as a subprocess, a FakeUpstream that answers
slowly, real signals."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentfsm.core.profile import Profile
from agentfsm.runtime.transcript import read_transcript
from agentfsm.testing import FakeUpstream
from tests._fake import HoldAfter

REPO = Path(__file__).resolve().parent.parent
UPSTREAM = ("--backend", "openai", "--base-url")
COMMANDS = {
    "eval-bfcl": (["eval", "bfcl", "--limit", "20", "--no-baseline", "-o", "{out}/bfcl", "--transcripts", "{out}/t"],
                  ["bfcl.json", "bfcl.md"]),
    "eval-quality": (["eval", "quality", "--fast", "--categories", "none", "--live-categories", "none",
                      "-o", "{out}/quality.md", "--transcripts", "{out}/t"], ["quality.md"]),
    "calibrate": (["calibrate", "-o", "{out}/profile.json", "--transcripts", "{out}/t"], ["profile.json", "profile.md"]),
}
SIGNALS = {"SIGTERM": (signal.SIGTERM, 143, "terminated"), "SIGINT": (signal.SIGINT, 130, "interrupted")}

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


#: each command under SIGTERM and Ctrl-C from a terminal, and SIGTERM to a script's background
#: job (SIGINT ignored: SIGTERM cannot take asyncio's SIGINT path)
CASES = [(c, s, signal.SIG_DFL) for c in COMMANDS for s in SIGNALS] + [(c, "SIGTERM", signal.SIG_IGN) for c in COMMANDS]


@pytest.mark.parametrize(("command", "sent", "sigint"), CASES,
                         ids=[f"{c}-{s}-{'background' if i == signal.SIG_IGN else 'terminal'}" for c, s, i in CASES])
def test_a_stopped_eval_ends_its_runs_and_writes_nothing(
    tmp_path: Path, command: str, sent: str, sigint: signal.Handlers
) -> None:
    signum, code, word = SIGNALS[sent]
    args, reports = COMMANDS[command]
    earlier = {name: json.dumps(Profile().to_json()) if name.endswith(".json") else "earlier\n" for name in reports}
    for name, text in earlier.items():  # an earlier report or profile: left as it was
        (tmp_path / name).write_text(text)
    # three requests answered, the fourth held: the signal lands while its run is under way
    with FakeUpstream(HoldAfter(3, "The answer is 42.", latency=0.3)) as fake:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agentfsm", *(a.format(out=tmp_path) for a in args), *UPSTREAM, fake.base_url],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)}, preexec_fn=lambda: signal.signal(signal.SIGINT, sigint))
        try:
            deadline = time.monotonic() + 60
            while len(fake.chat_requests) < 4:
                assert time.monotonic() < deadline and proc.poll() is None, "the command never asked the upstream"
                time.sleep(0.05)
            proc.send_signal(signum)
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()
    assert proc.returncode == code, err
    assert "Traceback" not in err, err
    line = err.strip().splitlines()[-1]
    assert line.startswith(f"agentfsm: {word}: ") and "was not written" in line, err
    assert all((tmp_path / name).read_text() == text for name, text in earlier.items())
    ends = [read_transcript(p)[-1] for p in (tmp_path / "t").rglob("*.jsonl")]
    assert ends and all(e["type"] == "run_end" for e in ends)
    statuses = [e["status"] for e in ends]
    assert "cancelled" in statuses
    if command != "calibrate":  # how far it got: the runs whose transcripts ended
        said = re.search(r": (\d+) of (\d+) runs were done;", line)
        assert said is not None, line
        assert int(said.group(1)) == len(statuses) - statuses.count("cancelled") < int(said.group(2))
