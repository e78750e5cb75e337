"""Every committed transcript fixture replays identical through today's code, with the
real ``agentfsm replay`` as a subprocess.

The four ``fixtures/transcripts/hand-*.jsonl`` were written by hand (77d82da) with
decisions the runtime never made (call id ``call_1``, a parse ``content`` of ``""``, a
guard reason of a refusal guard that no longer exists), so replay found three of them
diverged and no test looked; they are now recordings of today's runtime
(``fixtures/transcripts/make_hand.py``). The others are kept as earlier releases wrote
them (version 1, 3 and 4): replay still reads them and decides as they record.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
COMMITTED = sorted(p for p in REPO.glob("fixtures/transcripts*/**/*.jsonl"))


def test_there_are_committed_fixtures_of_every_release() -> None:
    names = {p.relative_to(REPO).as_posix() for p in COMMITTED}
    assert {"fixtures/transcripts/hand-one-tool.jsonl", "fixtures/transcripts/v1/agent.jsonl"} <= names
    assert any(n.startswith("fixtures/transcripts_v3/") for n in names)
    assert any(n.startswith("fixtures/transcripts_v4/") for n in names)


def test_every_committed_fixture_transcript_replays_identical() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agentfsm", "replay", "--json", *map(str, COMMITTED)],
        capture_output=True, text=True, cwd=REPO, timeout=600, check=False,
    )
    reports = [json.loads(line) for line in done.stdout.splitlines()]
    verdicts = {Path(r["path"]).relative_to(REPO).as_posix(): r["identical"] for r in reports}
    assert verdicts == {p.relative_to(REPO).as_posix(): True for p in COMMITTED}, done.stdout
    assert done.returncode == 0 and done.stderr == "", done.stderr
    # a run that decided something was compared: a verdict, not an empty file passed over
    assert all(r["runs"] >= 1 for r in reports)
    assert sum(r["compared"] for r in reports) > 0


def test_the_hand_fixtures_are_what_make_hand_writes(tmp_path: Path) -> None:
    """The script that wrote them still writes the same decisions (run ids and times aside)."""
    subprocess.run(
        [sys.executable, str(REPO / "fixtures" / "transcripts" / "make_hand.py"), str(tmp_path)],
        capture_output=True, cwd=REPO, timeout=300, check=True,
    )

    def decisions(path: Path) -> list[dict[str, object]]:
        lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        return [{k: v for k, v in e.items() if k not in ("run", "t")} for e in lines]

    for fresh in sorted(tmp_path.glob("hand-*.jsonl")):
        assert decisions(fresh) == decisions(REPO / "fixtures" / "transcripts" / fresh.name), fresh.name
    assert len(list(tmp_path.glob("hand-*.jsonl"))) == 4
