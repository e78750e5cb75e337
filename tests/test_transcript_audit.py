"""A run's transcript is whole at its edges: a failing ``on_event`` hook, a newer schema
version, a client that leaves mid-stream, a process stopped by SIGTERM."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentfsm.backends.scripted import ScriptedBackend
from agentfsm.core.events import TranscriptEvent
from agentfsm.runtime.agent import Agent
from agentfsm.runtime.transcript import read_transcript


class HookBroke(RuntimeError):
    pass


#: when the hook fails -> the event types it raises on
_FAILS_ON = {"always": None, "final": ("final", "error"), "error": ("error",), "run_end": ("run_end",)}


@pytest.mark.parametrize("fails_on", list(_FAILS_ON))
def test_a_failing_hook_leaves_the_transcript_ended(tmp_path: Path, fails_on: str) -> None:
    """A hook that raised on the ``error`` event (one that failed on the answer and again on
    the error it caused, one that always fails, one that fails on a run's own error) left the
    transcript without ``run_end``: a run that ended read as a killed writer."""
    path = tmp_path / "t.jsonl"
    seen: list[str] = []
    raises_on = _FAILS_ON[fails_on]

    def hook(event: TranscriptEvent) -> None:
        seen.append(event.type)
        if raises_on is None or event.type in raises_on:
            raise HookBroke(f"hook broke on {event.type}")

    # "error": the run fails on its own (no reply left), and the hook on that error
    replies = [] if fails_on == "error" else ["42."]
    agent = Agent(ScriptedBackend(replies), transcript=path, on_event=hook, enforcement="prompt")
    with pytest.raises(HookBroke):  # the hook's failure still reaches the caller
        agent.run("what is 6*7?")
    events = read_transcript(path)
    assert events[-1]["type"] == "run_end" and seen[-1] == "run_end"  # the hook saw the end too
    if fails_on == "run_end":
        assert events[-1]["status"] == "final"
        return
    assert [e["type"] for e in events][-2:] == ["error", "run_end"] and events[-1]["status"] == "error"
    assert events[-2]["error"] == ("ScriptExhausted" if fails_on == "error" else "HookBroke")


def test_what_version_4_added_is_written_as_version_4(tmp_path: Path) -> None:
    """``run_end`` status ``cancelled`` and run_start's ``result_max_chars`` were written as
    version 3: the release before them (which reads 1 to 3) refused such a line as a misfit
    ("config.agent.result_max_chars: Extra inputs are not permitted", "status: Input should
    be 'final' or 'error'") rather than as a version it does not read."""
    path = tmp_path / "t.jsonl"

    def interrupt_at_the_model_call(event: TranscriptEvent) -> None:
        if event.type == "model_request":
            raise KeyboardInterrupt  # as Ctrl-C would, there

    Agent(ScriptedBackend(["42."]), transcript=path, enforcement="prompt", result_max_chars=500).run("hi")
    interrupted = Agent(ScriptedBackend(["42."]), transcript=path, enforcement="prompt", result_max_chars=500,
                        on_event=interrupt_at_the_model_call)
    with pytest.raises(KeyboardInterrupt):
        interrupted.run("hi")
    events = read_transcript(path)
    assert {e["v"] for e in events} == {4}
    assert [e["config"]["result_max_chars"] for e in events if e["type"] == "run_start"] == [500, 500]
    assert [e["status"] for e in events if e["type"] == "run_end"] == ["final", "cancelled"]
