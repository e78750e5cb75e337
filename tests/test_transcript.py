"""Transcripts: typed events validated at write time, read back typed; version-1 files still read."""

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentfsm.core.backend import GenerationOptions
from agentfsm.core.errors import TranscriptError
from agentfsm.core.events import (
    EVENT_MODELS,
    LEGACY_POLICIES,
    SCHEMA_VERSION,
    AgentRunConfig,
    FinalEvent,
    GuardEvent,
    ModelRequestEvent,
    ProxyRunConfig,
    RequestEvent,
    RunStartEvent,
    ToolCallEvent,
    TransitionEvent,
    event_fields,
    parse_event,
)
from agentfsm.core.messages import ToolCall, UserMessage
from agentfsm.runtime.recorder import Recorder, run_config
from agentfsm.runtime.transcript import EVENT_TYPES, TranscriptWriter, read_events, read_transcript, redact

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "transcripts"

#: one valid field set per event type, as the writers pass them
EXAMPLES: dict[str, dict[str, Any]] = {
    "run_start": {"config": {"producer": "agent", "dialect": "json-action", "max_steps": 4}},
    "request": {"messages": [{"role": "user", "content": "hi"}], "tools": [{"name": "add"}], "tool_choice": "auto"},
    "contract": {"hash": "ab" * 32, "text": "You can call tools."},
    "choice": {"tools": ["add"], "scores": [-2.0, -0.5, -0.5], "baseline": [-3.0, -0.2, -0.2], "tool": None,
               "margin": -1.5},
    "model_request": {"attempt": 1, "messages": [{"role": "user", "content": "hi"}], "options": {"max_tokens": 9},
                      "enforcement": "prompt"},
    "model_output": {"text": "ok", "usage": {"prompt_tokens": 3, "completion_tokens": 1}, "finish_reason": "stop"},
    "parse": {"content": "ok", "tool_calls": [], "problems": [], "truncated": False},
    "guard": {"guard": "schema", "verdict": "correct", "reason": "schema_mismatch", "detail": "'b' is required"},
    "retry": {"reason": "schema_mismatch", "attempt": 1, "message": "Send it again."},
    "transition": {"from": "first-decision", "event": "answer", "to": "final"},
    "tool_call": {"call": {"id": "call_0", "name": "add", "arguments": {"a": 1}}},
    "tool_result": {"result": {"call_id": "call_0", "content": "2", "status": "ok", "name": "add"}},
    "final": {"content": "2"},
    "error": {"error": "LoopDetected", "message": "add repeated"},
    "run_end": {"status": "final", "steps": 2, "corrections": 0},
}


def test_every_event_type_is_written_typed_and_read_back_unchanged(tmp_path: Path) -> None:
    assert list(EXAMPLES) == list(EVENT_MODELS) == list(EVENT_TYPES)
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path, run_id="r1") as writer:
        written = [writer.write(EVENT_MODELS[name].model_validate(fields)) for name, fields in EXAMPLES.items()]
    read = read_events(path)
    assert read == written
    assert [type(e) for e in read] == list(EVENT_MODELS.values())
    assert [e.seq for e in read] == list(range(len(EXAMPLES)))
    assert all(e.v == SCHEMA_VERSION == 5 and e.run == "r1" and e.t.endswith("+00:00") for e in read)
    # the dict form is the same events, as written
    assert read_transcript(path) == [json.loads(line) for line in path.read_text().splitlines()]
    assert read_transcript(path)[9]["from"] == "first-decision"
    transition = read[9]
    assert isinstance(transition, TransitionEvent) and (transition.from_, transition.to) == ("first-decision", "final")


def test_events_are_flushed_per_event(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    writer = TranscriptWriter(path, run_id="r1")
    writer.write(RunStartEvent(config=AgentRunConfig()))
    # flushed before close: another reader sees it already
    assert json.loads(path.read_text().splitlines()[0])["type"] == "run_start"
    writer.close()


def test_the_writer_stamps_the_envelope_and_on_event_sees_every_event() -> None:
    seen: list[object] = []
    writer = TranscriptWriter(None, run_id="r9", on_event=seen.append)
    event = writer.write(RequestEvent(messages=(UserMessage(content="hi"),), tools=(), tool_choice="auto"))
    call = writer.write(ToolCallEvent(call=ToolCall(id="c", name="add", arguments={"a": 1})))
    assert seen == [event, call] and isinstance(event, RequestEvent)
    assert event.messages == (UserMessage(content="hi"),)
    assert [(e.run, e.seq) for e in (event, call)] == [("r9", 0), ("r9", 1)] and call.t.endswith("+00:00")


def test_a_recorder_builds_events_only_when_it_records() -> None:
    """A run that records nothing builds no event: a misfit is not even noticed there,
    and is a TranscriptError naming the field as soon as something records."""
    Recorder().emit(GuardEvent, guard="g", verdict="maybe", reason="r", detail="d")  # type: ignore[arg-type]
    seen: list[object] = []
    hooked = Recorder(on_event=seen.append, wants={"final"}.__contains__)
    hooked.emit(GuardEvent, guard="g", verdict="maybe", reason="r", detail="d")  # type: ignore[arg-type]  # not wanted
    hooked.answer("done")
    assert [type(e) for e in seen] == [FinalEvent]
    with pytest.raises(TranscriptError, match="bad guard event: verdict"):
        Recorder(on_event=seen.append).emit(GuardEvent, guard="g", verdict="maybe", reason="r", detail="d")  # type: ignore[arg-type]


def test_an_event_read_without_its_envelope_is_refused() -> None:
    with pytest.raises(TranscriptError, match="bad final event: run: Field required"):
        parse_event({"v": 3, "seq": 0, "t": "2026-01-01T00:00:00.000+00:00", "type": "final", "content": "x"})


@pytest.mark.parametrize(
    ("type_", "fields", "match"),
    [
        ("guard", {**EXAMPLES["guard"], "verdict": "maybe"}, "verdict"),
        ("final", {}, "content"),
        ("final", {"content": "x", "surprise": 1}, "surprise"),
        ("run_end", {**EXAMPLES["run_end"], "steps": "many"}, "steps"),
        ("run_start", {"config": {"producer": "agent", "max_steps": None}}, "max_steps"),
        ("run_start", {"config": {"producer": "proxy", "max_steps": None}}, "protocol"),
        ("run_start", {"config": {"producer": "robot"}}, "producer"),
        ("tool_call", {"call": {"name": "add"}}, "id"),
    ],
)
def test_a_bad_event_is_a_typed_error_at_write_time(type_: str, fields: dict[str, Any], match: str) -> None:
    with pytest.raises(TranscriptError, match=match):
        Recorder(on_event=lambda _: None).emit(EVENT_MODELS[type_], **fields)


def test_the_run_config_is_typed_by_producer(tmp_path: Path) -> None:
    agent = RunStartEvent.model_validate({"config": {"producer": "agent", "max_steps": 3}})
    proxy = RunStartEvent(config=run_config({"producer": "proxy", "protocol": "anthropic", "stream": True, "max_steps": None}))
    assert isinstance(agent, RunStartEvent) and isinstance(agent.config, AgentRunConfig) and agent.config.max_steps == 3
    assert isinstance(proxy, RunStartEvent) and isinstance(proxy.config, ProxyRunConfig)
    assert proxy.config.max_steps is None and proxy.config.protocol == "anthropic"


def test_extension_is_written_only_when_true() -> None:
    plain = ModelRequestEvent(attempt=1, enforcement="constrained")
    extension = ModelRequestEvent(attempt=1, enforcement="constrained", extension=True)
    assert isinstance(extension, ModelRequestEvent) and extension.extension
    assert "extension" not in event_fields(plain) and event_fields(extension)["extension"] is True


def test_secrets_are_redacted_before_writing(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path) as writer:
        written = writer.write(RequestEvent(messages=(), normalized={"protocol": "openai",
                               "raw_extra": {"api_key": "sk-SECRET", "headers": {"Authorization": "Bearer sk-SECRET"}}}))
    text = path.read_text()
    assert "sk-SECRET" not in text and "sk-SECRET" not in str(written)  # the hook's event too
    assert "[redacted]" in text
    assert redact({"x-api-key": "k", "nested": [{"token": "t"}]}) == {"x-api-key": "[redacted]", "nested": [{"token": "[redacted]"}]}


def test_torn_last_line_is_skipped_but_corruption_inside_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path) as writer:
        writer.write(FinalEvent(content="a"))
    with path.open("a") as fh:
        fh.write('{"v": 2, "type": "fin')
    assert [type(e) for e in read_events(path)] == [FinalEvent]
    good = path.read_text().splitlines()[0]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(f"{good}\nnot json\n{good}\n")
    with pytest.raises(TranscriptError, match="bad.jsonl:2"):
        read_events(bad)
    misfit = tmp_path / "misfit.jsonl"
    misfit.write_text(good + "\n" + good.replace('"content": "a"', '"content": 5') + "\n")
    with pytest.raises(TranscriptError, match="misfit.jsonl:2: bad final event: content"):
        read_events(misfit)



def test_a_run_appended_after_a_crash_mid_line_reads_with_the_run_before_it(tmp_path: Path) -> None:
    # a writer killed mid-line, then the same --transcript again: the next run's first line
    # was glued to the torn one, and the whole file (both runs) was "not valid JSON"
    from agentfsm.replays.compare import replay
    from agentfsm.testing import FakeUpstream

    path = tmp_path / "t.jsonl"
    with FakeUpstream(["hello there", "hi again"]) as fake:
        for n in (1, 2):
            proc = subprocess.run(
                [sys.executable, "-m", "agentfsm", "run", "hi", "--backend", "openai", "--base-url", fake.base_url,
                 "--transcript", str(path)],
                capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parent.parent,
            )
            assert proc.returncode == 0, proc.stderr
            if n == 1:  # killed while writing its run_end
                path.write_bytes(path.read_bytes()[:-20])
    events = read_events(path)
    first, second = events[0].run, events[-1].run
    assert first != second and [e.type for e in events if e.run == first][-1] == "final"
    assert [e.type for e in events if e.run == second][0] == "run_start" and events[-1].type == "run_end"
    assert replay(path).identical
    # a file that is nothing but a torn line is cut to nothing before it is written to
    torn = tmp_path / "torn.jsonl"
    torn.write_text('{"v": 5, "run": "x", "se' + "x" * 70_000)
    with TranscriptWriter(torn, "second") as writer:
        writer.write(FinalEvent(content="b"))
    assert [(e.run, e.seq) for e in read_events(torn)] == [("second", 0)]
    # whole lines are kept as they are, and a blank last line is a whole line
    whole = path.read_bytes() + b"\n"
    path.write_bytes(whole)
    TranscriptWriter(path).close()
    assert path.read_bytes() == whole

def test_a_newer_schema_version_is_refused_by_name(tmp_path: Path) -> None:
    event = {"v": 6, "run": "r", "seq": 0, "t": "2026-01-01T00:00:00.000+00:00", "type": "final", "content": "x"}
    with pytest.raises(TranscriptError, match=r"schema version 6 is not one this release reads \(1, 2, 3, 4, 5\)"):
        parse_event(event)
    # whatever a newer version adds (an event type, a field, a value) is not read as a misfit
    for newer in ({**event, "type": "thought", "text": "x"}, {**event, "content": "x", "weight": 2},
                  {**event, "type": "run_end", "status": "paused", "steps": 1, "corrections": 0}):
        with pytest.raises(TranscriptError, match="v: schema version 6 is not one this release reads"):
            parse_event(newer)


def test_a_version_2_run_start_ran_the_legacy_policies() -> None:
    """Before version 3 the policies were not recorded: they were the ones of that time."""
    event = parse_event({"v": 2, "run": "r", "seq": 0, "t": "2026-01-01T00:00:00.000+00:00", "type": "run_start",
                         "config": {"producer": "agent", "grounding": True}})
    assert isinstance(event, RunStartEvent)
    assert event.config.policies == LEGACY_POLICIES == ("refusal", "answers", "clauses", "grounding", "relevance", "coverage")


def test_missing_file_is_a_typed_error(tmp_path: Path) -> None:
    # said in words, once: not "[Errno 2] No such file or directory: '.../nope.jsonl'" after the path
    with pytest.raises(TranscriptError, match=r"^cannot read transcript .*nope\.jsonl: no such file or directory$"):
        read_events(tmp_path / "nope.jsonl")
    with pytest.raises(TranscriptError, match=r"^cannot read transcript .*: is a directory$"):
        read_events(tmp_path)


def test_an_unknown_event_type_is_named_in_one_short_line(tmp_path: Path) -> None:
    # pydantic's "Input tag 'heartbeat' found using 'type' does not match any of the
    # expected tags: 'run_start', ..." listed all fifteen
    event = {"v": 5, "run": "r", "seq": 0, "t": "2026-01-01T00:00:00.000+00:00", "type": "heartbeat"}
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(event) + "\n")
    with pytest.raises(TranscriptError) as raised:
        read_events(path)
    assert str(raised.value) == f"{path}:1: bad heartbeat event: type: 'heartbeat' is not an event type of schema version 5"
    with pytest.raises(TranscriptError, match=r"^bad heartbeat event: type: 'heartbeat' is not an event type$"):
        parse_event({k: v for k, v in event.items() if k != "v"})


# fixtures/transcripts/v1 holds what version 1 wrote; the hand-*.jsonl beside it are today's
# recordings (fixtures/transcripts/make_hand.py)
@pytest.mark.parametrize("path", sorted(FIXTURES.glob("v1/*.jsonl")), ids=lambda p: p.name)
def test_version_1_transcripts_of_this_release_still_read(path: Path) -> None:
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    events = read_events(path)
    assert len(events) == len(lines) and all(line["v"] == 1 for line in lines)
    start = events[0]
    assert isinstance(start, RunStartEvent)
    # a version-1 config names no producer: the proxy's is the one with a protocol
    expected = ProxyRunConfig if "protocol" in lines[0]["config"] else AgentRunConfig
    assert isinstance(start.config, expected) and start.config.max_corrections == 3
    # every other event reads back as it was written; options added to GenerationOptions
    # since then take their defaults
    defaults = GenerationOptions().model_dump(mode="json")
    for line, event in zip(lines[1:], events[1:], strict=True):
        back = event_fields(event, envelope=True)
        if line["type"] == "model_request":
            assert back.pop("options") == {**defaults, **line.pop("options")}
        assert back == line


def test_the_documented_event_list_matches_the_models() -> None:
    design = (Path(__file__).resolve().parent.parent / "agentfsm" / "core" / "events.py").read_text()
    for name in EVENT_MODELS:
        assert f"``{name}``" in design


def test_the_proxy_config_knows_every_wire_protocol() -> None:
    from typing import get_args

    from agentfsm.protocols import WireProtocol

    assert set(get_args(ProxyRunConfig.model_fields["protocol"].annotation)) == set(get_args(WireProtocol))


def _tampered(tmp_path: Path, raw_content: str) -> Path:
    """A transcript whose ``final`` event's content is ``raw_content`` (raw JSON text)."""
    path = tmp_path / "tampered.jsonl"
    with TranscriptWriter(path) as writer:
        writer.write(FinalEvent(content="a"))
    good = path.read_text().splitlines()[0]
    path.write_text(good.replace('"content": "a"', f'"content": {raw_content}') + "\n" + good + "\n")
    return path


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ("7" * 5000, "5000 digits"),
        ("[" * 100_000 + "]" * 100_000, "nests deeper than"),
        ('"\\ud800"', "lone surrogate"),
        ("NaN", "not a JSON number"),
    ],
    ids=["5000-digit integer", "100k deep", "lone surrogate", "NaN"],
)
def test_a_tampered_line_is_an_error_naming_it_in_the_reader_and_in_replay(tmp_path: Path, raw: str, says: str) -> None:
    # defect: `agentfsm replay` printed a traceback for each of these
    path = _tampered(tmp_path, raw)
    with pytest.raises(TranscriptError, match=f"tampered.jsonl:1: .*{says}"):
        read_events(path)
    done = subprocess.run([sys.executable, "-m", "agentfsm", "replay", str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and says in done.stderr
    assert "Traceback" not in done.stderr


def test_a_value_as_deep_as_the_proxy_accepts_still_reads_inside_its_event(tmp_path: Path) -> None:
    deep: Any = "x"
    for _ in range(127):
        deep = {"k": deep}
    path = tmp_path / "deep.jsonl"
    with TranscriptWriter(path) as writer:
        writer.write(RequestEvent.model_validate({"messages": [{"role": "assistant", "content": None,
                     "tool_calls": [{"id": "c", "name": "f", "arguments": deep}]}], "tools": [], "tool_choice": "auto"}))
    assert len(read_events(path)) == 1


# --- redaction by key name reaches the raw text of the same file (issue 29, item 15) --------

_PASSWORD = "hunter2-correct-horse"


def login(user: str, password: str) -> str:
    """Log in."""
    return f"logged in as {user}"


@pytest.mark.parametrize(
    "written",
    [
        '```json action\n{"tool": "login", "parameters": {"user": "bob", "password": "PW"}}\n```',
        "<tool_call>\n<function=login>\n<parameter=user>\nbob\n</parameter>\n<parameter=password>\nPW\n</parameter>\n</function>\n</tool_call>",
        "[login(user='bob', password='PW')]",
        '@tool login {"user": "bob", "password": "PW"}',
    ],
    ids=["json-action", "xml", "pythonic", "command"],
)
def test_a_password_in_a_call_is_in_no_event_of_the_file(tmp_path: Path, written: str) -> None:
    # defect: the tool_call event said [redacted] while model_output and the prompts of
    # later model requests carried the value in their raw text
    from agentfsm import Agent
    from agentfsm.backends.scripted import ScriptedBackend

    path = tmp_path / "run.jsonl"
    backend = ScriptedBackend([written.replace("PW", _PASSWORD), f"Done: logged in (password {_PASSWORD})."])
    result = Agent(backend, [login], transcript=path).run("log me in as bob")
    assert result.content and backend.remaining == 0
    text = path.read_text()
    assert _PASSWORD not in text
    events = read_transcript(path)
    call = next(e for e in events if e["type"] == "tool_call")
    assert call["call"]["arguments"] == {"user": "bob", "password": "[redacted]"}
    assert any("[redacted]" in e.get("text", "") for e in events if e["type"] == "model_output")


def test_a_value_written_beside_a_secret_key_is_redacted_in_any_string() -> None:
    path_less = TranscriptWriter(None)
    event = path_less.write(FinalEvent(content='{"api_key": "sk-1234567", "x": 1} and token=abcd&y=2 and max_tokens=5'))
    assert event.content == '{"api_key": "[redacted]", "x": 1} and token=[redacted]&y=2 and max_tokens=5'  # type: ignore[attr-defined]


@pytest.mark.skipif(not Path("/dev/stdout").exists(), reason="needs /dev/stdout")
def test_a_transcript_written_into_a_pipe_is_not_looked_at_for_a_torn_tail() -> None:
    # a pipe cannot be read back nor cut: --transcript /dev/stdout | ... streams the events
    from agentfsm.testing import FakeUpstream

    with FakeUpstream(["hello there"]) as fake:
        proc = subprocess.run(
            [sys.executable, "-m", "agentfsm", "run", "hi", "--backend", "openai", "--base-url", fake.base_url,
             "--transcript", "/dev/stdout"],
            capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parent.parent,
        )
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith('{"v"')]
    assert events[0]["type"] == "run_start" and events[-1]["type"] == "run_end"
