"""A ``model_request`` line writes only what its prompt adds to the run's previous one.

Defect: every ``model_request`` recorded the whole prompt, so a run of k model calls over
a growing conversation wrote the shared prefix k times (a 10-call ``agentfsm run`` was
58 KB, 41 KB of it ``model_request`` lines; a proxied request of a 43 KB conversation
corrected twice wrote 137 KB of prompts). Since version 5 a line refers to the previous
request (``messages_from``, ``messages_kept``); the readers, replay, the report and the
``on_event`` hook all see whole events, as before.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import openai
import pytest

from agentfsm import Agent
from agentfsm.backends.scripted import ScriptedBackend
from agentfsm.core.errors import TranscriptError, UsageError
from agentfsm.core.events import FinalEvent, ModelRequestEvent, RunEndEvent, TranscriptEvent, event_fields
from agentfsm.core.messages import PromptMessage
from agentfsm.replays.compare import replay
from agentfsm.report.build import page_data
from agentfsm.report.inputs import gather
from agentfsm.runtime.transcript import TranscriptWriter, read_events, read_transcript
from agentfsm.testing import FakeUpstream
from agentfsm.testing.example_tools import calculate, convert_units
from tests._proxy import TOOLS_OPENAI, proxy, upstream_backend

V4 = Path(__file__).resolve().parent.parent / "fixtures" / "transcripts_v4"


def _act(tool: str, **args: Any) -> str:
    return "```json action\n" + json.dumps({"tool": tool, "args": args}) + "\n```"


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _requests(path: Path) -> list[dict[str, Any]]:
    return [e for e in _lines(path) if e["type"] == "model_request"]


def _full_size(events: list[TranscriptEvent]) -> int:
    """The bytes of the file had every event been written whole (as version 4 did)."""
    return sum(len(json.dumps(event_fields(e, envelope=True), ensure_ascii=False).encode()) + 1 for e in events)


def _run(path: Path, steps: int, **settings: Any) -> list[TranscriptEvent]:
    """An agent run of ``steps`` tool calls and an answer; the events its hook saw."""
    seen: list[TranscriptEvent] = []
    replies = [_act("calculate", expression=f"{i}*7") for i in range(steps)] + ["Done."]
    backend = ScriptedBackend(replies)
    Agent(backend, [calculate, convert_units], transcript=path, on_event=seen.append, enforcement="prompt",
          max_steps=steps + 2, **settings).run("Compute each of 0*7 up to 8*7, one call each.")
    assert backend.remaining == 0
    return seen


def test_a_ten_call_run_reads_back_as_recorded_in_under_half_the_bytes(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    seen = _run(path, 9)
    read = read_events(path)
    assert read == seen  # what the Recorder built, and the hook saw, whole
    prompts = [e for e in read if isinstance(e, ModelRequestEvent)]
    assert len(prompts) == 10 and [len(e.messages) for e in prompts] == list(range(2, 22, 2))
    # on disk: each request after the first names the one before it and adds two messages
    lines = _requests(path)
    assert "messages_from" not in lines[0] and len(lines[0]["messages"]) == 2
    for before, line in zip(prompts, lines[1:]):
        assert (line["messages_from"], line["messages_kept"], len(line["messages"])) == (before.seq, len(before.messages), 2)
    assert path.stat().st_size * 2 < _full_size(read)
    assert replay(path).identical


def test_a_corrected_proxied_request_writes_the_clients_prompt_once(tmp_path: Path) -> None:
    """Through the proxy, each attempt after a refused reply refers to the one before: the
    prompts read back are those the upstream received, and the file holds the client's
    conversation once in the prompts (and once in ``request``), not once per attempt."""
    history: list[dict[str, str]] = []
    for i in range(30):
        history += [{"role": "user", "content": f"Turn {i}: what is the weather like somewhere? " * 8},
                    {"role": "assistant", "content": f"Answer {i}: sunny and mild, as it was. " * 8}]
    history.append({"role": "user", "content": "And in Paris?"})
    not_json = '```json action\n{"tool": "get_weather", "parameters": {"city": "Paris",}\n```'
    call = '```json action\n{"tool": "get_weather", "parameters": {"city": "Paris"}}\n```'
    with FakeUpstream([not_json, not_json, call]) as fake:
        with proxy(upstream_backend(fake), transcripts_dir=tmp_path) as url:
            with openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0) as client:
                answer = client.chat.completions.create(model="m", messages=history, tools=TOOLS_OPENAI)  # type: ignore[arg-type]
        received = [r.body["messages"] for r in fake.chat_requests]
    assert answer.choices[0].message.tool_calls is not None
    (path,) = tmp_path.glob("*.jsonl")
    events = read_events(path)
    prompts = [[m.model_dump() for m in e.messages] for e in events if isinstance(e, ModelRequestEvent)]
    assert len(prompts) == 3 and prompts == received
    lines = _requests(path)
    assert [line.get("messages_kept") for line in lines] == [None, len(prompts[0]), len(prompts[1])]
    assert all(len(line["messages"]) == 2 for line in lines[1:])  # the reply refused and its correction
    prompt_bytes = sum(len(json.dumps(line)) for line in lines)
    assert prompt_bytes < 1.5 * len(json.dumps(prompts[0]))
    assert replay(path).identical


def test_a_secret_in_an_early_message_stays_redacted_where_later_requests_refer_to_it(tmp_path: Path) -> None:
    """``password=...`` in the user's message is redacted in every prompt, the ones that
    refer to it included; a value learned later (a call's ``password``) is redacted in the
    prompts after it, which then write that message again rather than refer to the
    earlier, unredacted one."""
    learned = "hunter2-correct-horse"

    def login(user: str, password: str) -> str:
        """Log in."""
        return f"logged in as {user}"

    path = tmp_path / "run.jsonl"
    seen: list[TranscriptEvent] = []
    backend = ScriptedBackend([
        json.dumps({"tool": "login", "args": {"user": "bob", "password": learned}}).join(["```json action\n", "\n```"]),
        json.dumps({"tool": "login", "args": {"user": "eve", "password": learned}}).join(["```json action\n", "\n```"]),
        "Both logged in.",
    ])
    Agent(backend, [login], transcript=path, on_event=seen.append, enforcement="prompt").run(
        f"Log in as bob with password=swordfish-42, then as eve; their old one was {learned}."
    )
    assert backend.remaining == 0
    text = path.read_text(encoding="utf-8")
    assert "swordfish-42" not in text
    read = read_events(path)
    assert read == seen
    users = [e.messages[1].content for e in read if isinstance(e, ModelRequestEvent)]
    assert len(users) == 3 and all("password=[redacted]" in u for u in users)
    assert all(learned not in u for u in users[1:])  # redacted since the first call's arguments
    lines = _requests(path)
    assert lines[1]["messages_kept"] == 1  # the user's message changed (redacted): written again
    assert lines[2]["messages_kept"] == 4 and learned not in json.dumps(lines[2])  # refers to the redacted one


def test_interleaved_runs_in_one_file_each_refer_to_their_own(tmp_path: Path) -> None:
    """Two writers appending to one file (``Agent(transcript=same)`` run concurrently):
    each request refers to its own run's previous one, and reads back whole."""
    path = tmp_path / "shared.jsonl"
    prompts = {run: [PromptMessage(role="system", content=f"contract of {run} " * 20)] for run in ("a", "b")}
    written: list[TranscriptEvent] = []
    with TranscriptWriter(path, run_id="a") as a, TranscriptWriter(path, run_id="b") as b:
        for step in range(4):
            for run, writer in (("a", a), ("b", b)):
                prompts[run] += [PromptMessage(role="user", content=f"{run} step {step}")]
                written.append(writer.write(ModelRequestEvent(attempt=1, messages=tuple(prompts[run]))))
                written.append(writer.write(FinalEvent(content=f"{run} {step}")))
        written += [a.write(RunEndEvent(status="final", steps=4, corrections=0)),
                    b.write(RunEndEvent(status="final", steps=4, corrections=0))]
    assert read_events(path) == written
    assert [(line["run"], line.get("messages_from")) for line in _requests(path)][2:4] == [("a", 0), ("b", 0)]


def test_the_same_prompt_again_refers_to_all_of_it_and_an_unrelated_one_is_whole(tmp_path: Path) -> None:
    """A consensus candidate asks the same prompt again (``messages`` empty); a prompt that
    begins differently (a new system message) is written whole."""
    path = tmp_path / "t.jsonl"
    first = (PromptMessage(role="system", content="s"), PromptMessage(role="user", content="u"))
    other = (PromptMessage(role="system", content="t"), PromptMessage(role="user", content="u"))
    with TranscriptWriter(path, run_id="r") as writer:
        written = [writer.write(ModelRequestEvent(attempt=1, messages=first)),
                   writer.write(ModelRequestEvent(attempt=1, messages=first, candidate=1)),
                   writer.write(ModelRequestEvent(attempt=2, messages=other))]
    assert read_events(path) == written
    lines = _requests(path)
    assert (lines[1]["messages_from"], lines[1]["messages_kept"], lines[1]["messages"]) == (0, 2, [])
    assert "messages_from" not in lines[2] and len(lines[2]["messages"]) == 2


def test_a_request_whose_reference_is_not_in_the_file_is_an_error_naming_the_line(tmp_path: Path) -> None:
    # the run's first model_request filtered out, as grep -v or a file that starts mid-run
    # leaves it: the second refers to nothing read
    path = tmp_path / "run.jsonl"
    _run(path, 3)
    lines = path.read_text(encoding="utf-8").splitlines()
    first = next(e["seq"] for e in map(json.loads, lines) if e["type"] == "model_request")
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(line + "\n" for line in lines if json.loads(line)["seq"] != first), encoding="utf-8")
    number = next(n for n, e in enumerate(_lines(cut), start=1) if e.get("messages_from") == first)
    says = f"cut.jsonl:{number}: model_request refers to the messages of the model_request at seq {first}"
    with pytest.raises(TranscriptError, match=says):
        read_events(cut)
    done = subprocess.run([sys.executable, "-m", "agentfsm", "replay", str(cut)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and f"cut.jsonl:{number}" in done.stderr and "Traceback" not in done.stderr
    with pytest.raises(UsageError, match=f"no runs to report: .*cut.jsonl:{number}: model_request refers"):
        page_data(gather([cut]))  # the report says which file and line it could not read


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"messages_kept": 99}, "keeps 99 messages of event seq"),
        ({"messages_kept": 0}, "messages_kept a count from 1"),
        ({"messages_from": "3"}, "messages_from must be an event's seq"),
        ({"messages": "x"}, "messages a list"),
        ({"v": 4}, "messages_from: Extra inputs are not permitted"),  # no version before 5 wrote one
    ],
    ids=["too many kept", "none kept", "seq not a number", "messages not a list", "version 4"],
)
def test_a_tampered_reference_is_an_error_naming_the_line(tmp_path: Path, change: dict[str, Any], says: str) -> None:
    path = tmp_path / "run.jsonl"
    _run(path, 2)
    lines = _lines(path)
    number = next(n for n, e in enumerate(lines) if "messages_from" in e)
    lines[number] |= change
    path.write_text("".join(json.dumps(e) + "\n" for e in lines), encoding="utf-8")
    with pytest.raises(TranscriptError, match=f"run.jsonl:{number + 1}: .*{says}"):
        read_events(path)


def test_files_joined_end_to_end_read_as_each_did(tmp_path: Path) -> None:
    one, two = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    _run(one, 2)
    _run(two, 3)
    joined = tmp_path / "joined.jsonl"
    joined.write_text(one.read_text() + two.read_text())
    assert read_events(joined) == read_events(one) + read_events(two)


@pytest.mark.parametrize("path", sorted(V4.glob("*.jsonl")), ids=lambda p: p.stem)
def test_version_4_transcripts_still_read_and_replay(path: Path, tmp_path: Path) -> None:
    """Written by the release before version 5 (fixtures/transcripts_v4/README.md): whole
    prompts on every line, read as written; written again today, the prompts read back the
    same from a smaller file."""
    lines = _lines(path)
    assert {line["v"] for line in lines} == {4}
    events = read_events(path)
    assert [event_fields(e, envelope=True) for e in events] == lines
    assert read_transcript(path) == lines
    assert replay(path).identical
    again = tmp_path / "again.jsonl"
    with TranscriptWriter(again, run_id=events[0].run) as writer:
        rewritten = [writer.write(e) for e in events]
    assert [e.messages for e in read_events(again) if isinstance(e, ModelRequestEvent)] == [
        e.messages for e in events if isinstance(e, ModelRequestEvent)
    ] == [e.messages for e in rewritten if isinstance(e, ModelRequestEvent)]
    assert again.stat().st_size < path.stat().st_size


def test_a_file_a_crash_cut_inside_a_request_reads_up_to_it(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    whole = _run(path, 3)
    text = path.read_text(encoding="utf-8")
    last = text.rindex('"messages_from"')  # inside the last request's line
    path.write_text(text[:last], encoding="utf-8")
    read = read_events(path)
    assert read == whole[: len(read)] and isinstance(whole[len(read)], ModelRequestEvent)
