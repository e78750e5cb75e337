"""Snapshot-test your own transcripts with pytest and syrupy.

Keep the transcripts of runs you care about next to your tests: an agent's
(``Agent(..., transcript="runs/x.jsonl")``), the proxy's (``agentfsm serve --transcripts``),
a batch's or an eval's; each replays the way its producer ran. Then either assert that today's code still decides the same::

    from agentfsm.testing.pytest_replay import assert_replays

    @pytest.mark.parametrize("path", sorted(Path("runs").glob("*.jsonl")), ids=str)
    def test_runs_still_decide_the_same(path):
        assert_replays(path)

or snapshot today's decisions with syrupy's ``snapshot`` fixture, so that a change in
the parser, a guard or the engine shows up as a reviewable snapshot diff::

    from agentfsm.testing.pytest_replay import replay_snapshot

    def test_checkout_run(snapshot):
        assert replay_snapshot("runs/checkout.jsonl") == snapshot

``replay_snapshot`` holds the report and today's decision events (parse, guard, retry,
transition, tool_call, tool_result, final, error), normalized: run ids, sequence
numbers and timestamps removed, the path reduced to the file name, so it is stable
across machines and runs.
Both are synchronous; from an ``async`` test use :func:`areplay_snapshot` or
:func:`agentfsm.replays.compare.areplay`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from agentfsm.replays.compare import ReplayReport, areplay, replay

__all__ = ["areplay_snapshot", "assert_replays", "replay_snapshot"]


def _explain(report: ReplayReport) -> str:
    d = report.divergence
    if d is None:
        return f"{report.path}: not identical"
    then = json.dumps(d.then, ensure_ascii=False, sort_keys=True)
    now = json.dumps(d.now, ensure_ascii=False, sort_keys=True)
    return (
        f"{report.path}: replay diverged at event {d.index} ({d.event_type}, run {d.run})\n"
        f"  then: {then}\n  now:  {now}"
    )


def assert_replays(path: str | os.PathLike[str]) -> ReplayReport:
    """Fail (AssertionError with then/now) unless the transcript replays identical."""
    report = replay(path)
    assert report.identical, _explain(report)
    return report


def _snapshot(report: ReplayReport) -> dict[str, Any]:
    data: dict[str, Any] = report.model_dump(mode="json", exclude={"path"})
    data["file"] = Path(report.path).name
    return data


def replay_snapshot(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The replay report as a normalized dict, to compare with syrupy's ``snapshot``."""
    return _snapshot(replay(path, keep_decisions=True))


async def areplay_snapshot(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Async twin of :func:`replay_snapshot`."""
    return _snapshot(await areplay(path, keep_decisions=True))
