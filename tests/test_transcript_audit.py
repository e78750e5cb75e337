"""A run's transcript is whole at its edges: a failing ``on_event`` hook, a newer schema
version, a client that leaves mid-stream, a process stopped by SIGTERM."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import openai
import pytest

from agentfsm.backends.scripted import ScriptedBackend
from agentfsm.core.events import SCHEMA_VERSION, TranscriptEvent
from agentfsm.replays.compare import replay
from agentfsm.report.build import page_data
from agentfsm.report.inputs import gather
from agentfsm.runtime.agent import Agent
from agentfsm.runtime.transcript import read_transcript
from agentfsm.testing import FakeUpstream
from agentfsm.testing.fake_script import drip, flood, stream_no_terminator
from tests._proxy import TOOLS_OPENAI, proxy, upstream_backend

USER: list[Any] = [{"role": "user", "content": "What is the weather in Paris?"}]


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
    assert {e["v"] for e in events} == {SCHEMA_VERSION} and SCHEMA_VERSION >= 4
    assert [e["config"]["result_max_chars"] for e in events if e["type"] == "run_start"] == [500, 500]
    assert [e["status"] for e in events if e["type"] == "run_end"] == ["final", "cancelled"]


# -- a stream cut off: what the client saw is in the transcript ------------------------------

_PROSE = "The weather in Paris is mild today, with a light breeze from the west and some sun. " * 3


def _ended_transcript(folder: Path) -> Path:
    deadline = time.monotonic() + 15
    while not any('"run_end"' in p.read_text() for p in folder.glob("*.jsonl")):
        assert time.monotonic() < deadline, "the proxy never ended the request's transcript"
        time.sleep(0.05)
    (transcript,) = folder.glob("*.jsonl")
    return transcript


@pytest.mark.parametrize("tools", [True, False], ids=["tool-mode", "pass-through"])
def test_a_client_that_leaves_mid_stream_finds_what_it_saw_in_the_transcript(tmp_path: Path, tools: bool) -> None:
    """The model's text already streamed to a client that then closed the stream was not in
    the transcript: its model_output is written when the call ends, and it never did. (In
    tool mode prose streams as the model writes only under --stream-prose live; by default a
    client sees the turn once it is decided.)"""
    extra: dict[str, Any] = {"tools": TOOLS_OPENAI} if tools else {}
    with FakeUpstream([drip(0.0005, _PROSE)]) as fake:  # a slow upstream: the stream is under way
        with proxy(upstream_backend(fake, total=60, read=30), transcripts_dir=tmp_path, stream_prose="live") as url:
            with openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0) as client:
                stream = client.chat.completions.create(model="m", messages=USER, stream=True, **extra)
                seen = ""
                for chunk in stream:
                    seen += (chunk.choices[0].delta.content or "") if chunk.choices else ""
                    if len(seen) > 30:
                        break
                stream.close()
            transcript = _ended_transcript(tmp_path)
    events = read_transcript(transcript)
    assert [e["type"] for e in events][-3:] == ["model_request", "model_output", "run_end"]
    output, end = events[-2], events[-1]
    assert output["cut"] is True and output["finish_reason"] == "cut"
    assert output["text"].startswith(seen) and output["text"] != _PROSE  # what had arrived, no more
    assert end["status"] == "cancelled"
    report = replay(transcript)  # cut off: compared as far as it goes
    assert report.identical and any("cancelled" in note for note in report.notes)


@pytest.mark.parametrize("tools", [True, False], ids=["tool-mode", "pass-through"])
def test_a_stream_the_upstream_cut_replays_as_that_failure(tmp_path: Path, tools: bool) -> None:
    """The text a failed stream had sent is recorded as cut; replay serves no cut output, so
    today's run stops for want of one, as the recorded failure did (served as a whole reply,
    it was parsed into an answer: 'diverged', then error, now final)."""
    extra: dict[str, Any] = {"tools": TOOLS_OPENAI} if tools else {}
    with FakeUpstream([stream_no_terminator("It is sunny in Paris today.")]) as fake:
        with proxy(upstream_backend(fake), transcripts_dir=tmp_path) as url:
            with openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0) as client:
                seen = ""
                with pytest.raises(openai.APIError, match="stream ended without a finish_reason"):
                    for chunk in client.chat.completions.create(model="m", messages=USER, stream=True, **extra):
                        seen += (chunk.choices[0].delta.content or "") if chunk.choices else ""
            transcript = _ended_transcript(tmp_path)
    events = read_transcript(transcript)
    assert [e["type"] for e in events][-3:] == ["model_output", "error", "run_end"]
    assert events[-3]["cut"] is True and events[-3]["text"] == "It is sunny in Paris today."
    # tool mode holds prose until the turn is decided (--stream-prose exact): the client saw
    # none of it, and got the failure as an HTTP error; a pass-through stream saw it all
    assert seen == ("" if tools else "It is sunny in Paris today.")
    assert replay(transcript).identical


def test_a_pass_through_stream_notices_its_client_leaving_under_a_fast_upstream(tmp_path: Path) -> None:
    """Found with the test above: with no tools, an upstream whose chunks were all buffered
    already held the proxy's loop, so the client's leaving went unseen and the proxy read on
    until its 64 MiB reply bound (then recorded a BackendProtocolError, not a cancellation)."""
    with FakeUpstream([flood("word " * 50)]) as fake:  # as fast as the proxy reads, forever
        with proxy(upstream_backend(fake, total=60, read=30), transcripts_dir=tmp_path) as url:
            with openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0) as client:
                stream = client.chat.completions.create(model="m", messages=USER, stream=True)
                for _ in zip(range(5), stream):
                    pass
                stream.close()
            transcript = _ended_transcript(tmp_path)
    events = read_transcript(transcript)
    assert events[-1]["status"] == "cancelled" and "error" not in [e["type"] for e in events]
    assert events[-2]["cut"] is True and len(events[-2]["text"]) < 10_000_000


# -- a client that left, as a release before version 4 recorded it ---------------------------

V3 = Path(__file__).resolve().parent.parent / "fixtures" / "transcripts_v3"


@pytest.mark.parametrize("path", sorted(V3.glob("proxy_client_left_*.jsonl")), ids=lambda p: p.stem)
def test_a_client_that_left_recorded_as_an_error_reads_as_cut_off(path: Path) -> None:
    """Written by the proxy at 2f977cb~1 (fixtures/transcripts_v3/README.md): replay said
    'diverged' (then ConnectionAbortedError, now ScriptExhausted) where nothing was decided,
    and the report counted a failed run."""
    events = read_transcript(path)
    assert (events[-2]["error"], events[-1]["status"]) == ("ConnectionAbortedError", "error")  # as written then
    report = replay(path)
    assert report.identical and report.compared == 0
    assert any("was cancelled" in note for note in report.notes)
    data, _svg, stats = page_data(gather([path]))
    (run,) = data["runs"]
    assert (run["outcome"], run["reason"]) == ("incomplete", "cancelled") and stats.failed == 0


def test_only_the_proxys_own_record_of_a_client_that_left_is_read_as_cut_off(tmp_path: Path) -> None:
    """The same error from elsewhere (an agent run, a version-4 file) is what it says."""
    (source,) = sorted(V3.glob("proxy_client_left_whole.jsonl"))
    lines = [json.loads(line) for line in source.read_text().splitlines()]
    for name, change in {"agent": lambda e: e | {"config": {"producer": "agent"}} if e["type"] == "run_start" else e,
                         "v4": lambda e: e | {"v": 4}}.items():
        other = tmp_path / f"{name}.jsonl"
        other.write_text("".join(json.dumps(change(e)) + "\n" for e in lines))
        data, _svg, stats = page_data(gather([other]))
        assert data["runs"][0]["outcome"] == "failed" and stats.failed == 1, name
