import json
from pathlib import Path

import pytest

from agentfsm.errors import TranscriptError
from agentfsm.transcript import EVENT_TYPES, TranscriptWriter, read_transcript, redact


def test_events_are_flushed_per_event_with_sequence(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    writer = TranscriptWriter(path, run_id="r1")
    writer.emit("run_start", config={"dialect": "json-action"})
    # flushed before close: another reader sees it already
    assert json.loads(path.read_text().splitlines()[0])["type"] == "run_start"
    writer.emit("final", content="done")
    writer.close()
    events = read_transcript(path)
    assert [e["seq"] for e in events] == [0, 1]
    assert {e["run"] for e in events} == {"r1"}
    assert all(e["v"] == 1 and e["t"].endswith("+00:00") for e in events)


def test_unknown_event_type_is_a_typed_error(tmp_path: Path) -> None:
    with TranscriptWriter(tmp_path / "t.jsonl") as writer, pytest.raises(TranscriptError):
        writer.emit("nonsense")


def test_secrets_are_redacted_before_writing(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path) as writer:
        writer.emit("run_start", config={"api_key": "sk-SECRET", "headers": {"Authorization": "Bearer sk-SECRET"}})
    text = path.read_text()
    assert "sk-SECRET" not in text
    assert "[redacted]" in text
    assert redact({"x-api-key": "k", "nested": [{"token": "t"}]}) == {"x-api-key": "[redacted]", "nested": [{"token": "[redacted]"}]}


def test_torn_last_line_is_skipped_but_corruption_inside_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path) as writer:
        writer.emit("final", content="a")
    with path.open("a") as fh:
        fh.write('{"v": 1, "type": "fin')
    assert [e["type"] for e in read_transcript(path)] == ["final"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "final"}\nnot json\n{"type": "final"}\n')
    with pytest.raises(TranscriptError, match="bad.jsonl:2"):
        read_transcript(bad)


def test_missing_file_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(TranscriptError):
        read_transcript(tmp_path / "nope.jsonl")


def test_every_documented_event_type_is_writable(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path) as writer:
        for name, fields in EVENT_TYPES.items():
            writer.emit(name, **{f: None for f in fields})
    assert [e["type"] for e in read_transcript(path)] == list(EVENT_TYPES)
