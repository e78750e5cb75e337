"""``agentfsm report``: what the page is built from (transcripts, batch results, replay output)
and what its data says; the page in a real browser is tests/test_report_browser.py."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from agentfsm.cli import app
from agentfsm.core.errors import UsageError
from agentfsm.report import build_report, write_report
from agentfsm.report.build import page_data
from agentfsm.report.inputs import classify, gather
from agentfsm.report.page import embed_json
from agentfsm.report.runs import TEXT_LIMIT, clip
from agentfsm.runtime.agent import Agent
from agentfsm.replays.compare import replay
from agentfsm.testing import ScriptedBackend
from agentfsm.testing.sample_batch import OUTCOME_OF_KIND, write_sample_batch

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "transcripts"


def _data(*paths: Path | str) -> dict[str, Any]:
    data, _svg, _stats = page_data(gather(paths))
    return data


def _run(data: dict[str, Any], key: str) -> dict[str, Any]:
    return next(r for r in data["runs"] if key in (r["id"], r["task"], Path(r["file"]).name))


def _seconds(path: Path) -> float:
    """A transcript's first to last event, as its times were written."""
    from datetime import datetime

    times = [datetime.fromisoformat(json.loads(line)["t"]) for line in path.read_text().splitlines()]
    return round((times[-1] - times[0]).total_seconds(), 3)


def test_fixture_transcripts_make_rows_timelines_and_groups() -> None:
    data = _data(FIXTURES)
    assert len(data["runs"]) == 9 and data["kinds"] == {"transcript": 9}
    refused = _run(data, "hand-refusal-abort.jsonl")
    assert refused["outcome"] == "failed" and refused["reason"] == "RetryBudgetExceeded"
    assert (refused["steps"], refused["corrections"], refused["calls"]) == (3, 2, 3)
    # the tokens and time are the transcript's own, summed (fixtures/transcripts/make_hand.py)
    assert refused["tin"] == 1269 and refused["tout"] == 23
    assert refused["seconds"] == _seconds(FIXTURES / "hand-refusal-abort.jsonl")
    assert refused["reasons"] == ["refusal", "missing_call", "budget_spent"]
    kinds = [item["k"] for item in refused["items"]]
    assert kinds[:5] == ["request", "contract", "model", "parse", "guard"] and kinds[-2:] == ["error", "end"]
    retry = next(item for item in refused["items"] if item["k"] == "retry")
    assert retry["reason"] == "refusal" and retry["message"].startswith("You do have tools")
    # the failure summary groups runs by reason and points at them
    assert data["failures"] == [{"reason": "RetryBudgetExceeded", "runs": [data["runs"].index(refused)], "outcomes": {"failed": 1}}]
    by_reason = {g["reason"]: len(g["runs"]) for g in data["corrections"]}
    assert by_reason == {"refusal": 6, "schema_mismatch": 2, "budget_spent": 1, "missing_call": 1}
    # every run's edges index the diagram's edges
    assert all(0 <= e < len(data["edges"]) for r in data["runs"] for e in r["edges"])


def test_contracts_are_stored_once_and_requests_carry_no_prompt_copies() -> None:
    data = _data(FIXTURES / "v1")
    contracts = [item["hash"] for r in data["runs"] for item in r["items"] if item["k"] == "contract"]
    assert contracts and set(contracts) == set(data["contracts"])
    assert all("messages" not in item for r in data["runs"] for item in r["items"] if item["k"] == "model")


def test_the_svg_diagram_has_every_state_and_marks_unused_and_taken_edges() -> None:
    html, stats = build_report([FIXTURES])
    svg = re.search(r"<svg id=\"diagram\".*?</svg>", html, re.S)
    assert svg is not None
    assert svg.group(0).count('class="node') == 5
    assert 'class="edge taken"' in svg.group(0) and 'class="edge unused"' in svg.group(0)
    assert 'data-edge="first-decision|tool-emitted|emit"' in svg.group(0)
    assert "emit ×7" in svg.group(0)
    assert stats.runs == 9 and stats.failed == 1 and stats.size == len(html.encode())


def test_the_page_is_self_contained() -> None:
    html, _ = build_report([FIXTURES])
    assert "<link" not in html and "@import" not in html
    assert not re.search(r"\b(src|href)\s*=\s*[\"']?(https?:)?//", html)
    assert not re.search(r"url\(\s*['\"]?https?:", html)
    assert "fetch(" not in html and "XMLHttpRequest" not in html


def test_embedded_json_cannot_close_its_script_element() -> None:
    text = embed_json({"text": "</script><script>alert(1)</script> & <!--"})
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == {"text": "</script><script>alert(1)</script> & <!--"}


def test_long_texts_are_clipped_and_say_so() -> None:
    clipped = clip("x" * (TEXT_LIMIT + 10))
    assert clipped.startswith("x" * TEXT_LIMIT) and clipped.endswith("[10 more characters]")
    assert clip(None) == "" and clip("short") == "short"


def test_a_batch_directory_pairs_results_with_their_transcripts(tmp_path: Path) -> None:
    write_sample_batch(tmp_path / "batch", 40)
    data = _data(tmp_path / "batch")
    assert data["kinds"] == {"tasks": 1, "results": 1, "transcript": 40} and data["notes"] == []
    assert len(data["runs"]) == 40  # each transcript once, with its result
    for row in data["runs"]:
        number = int(row["task"].removeprefix("task-"))
        assert row["outcome"] == OUTCOME_OF_KIND[number % 8], row["task"]
        assert row["producer"] == "batch" and row["items"]
    failed = [g for g in data["failures"] if g["reason"] == "RetryBudgetExceeded"]
    assert failed and len(failed[0]["runs"]) == 5
    exhausted = next(g for g in data["failures"] if g["reason"] == "exhausted")
    assert len(exhausted["runs"]) == 5
    assert {g["reason"] for g in data["corrections"]} >= {"refusal", "unknown_tool", "schema_mismatch", "budget_spent"}


def test_batch_results_without_transcripts_are_rows_without_timelines(tmp_path: Path) -> None:
    write_sample_batch(tmp_path / "batch", 8)
    results = tmp_path / "batch" / "results.jsonl"
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    bare = tmp_path / "bare.jsonl"
    bare.write_text("".join(json.dumps({**line, "transcript": None}) + "\n" for line in lines))
    data = _data(bare)
    assert len(data["runs"]) == 8
    failed = _run(data, "task-00006")
    assert failed["outcome"] == "failed" and failed["reason"] == "RetryBudgetExceeded" and failed["corrections"] == 3
    assert failed["items"][0]["k"] == "note"


def test_replay_output_marks_the_diverged_event(tmp_path: Path) -> None:
    def add(a: float, b: float) -> float:
        """Add two numbers."""
        return a + b

    call = '```json action\n{"tool": "add", "args": {"a": 1, "b": 2}}\n```'
    same, changed = tmp_path / "same.jsonl", tmp_path / "changed.jsonl"
    for path in (same, changed):
        Agent(ScriptedBackend([call, "It is 3."]), [add], transcript=path).run("Add 1 and 2")
    lines = changed.read_text().splitlines()
    index = next(i for i, line in enumerate(lines) if json.loads(line)["type"] == "final")
    event = json.loads(lines[index])
    lines[index] = json.dumps({**event, "content": "It is 4."})
    changed.write_text("\n".join(lines) + "\n")
    out = tmp_path / "replay.jsonl"
    out.write_text("".join(replay(p).model_dump_json() + "\n" for p in (same, changed)))
    data = _data(out)
    assert data["replayed"] is True and len(data["runs"]) == 2
    identical = next(r for r in data["runs"] if r["file"].endswith("same.jsonl"))
    diverged = next(r for r in data["runs"] if r["file"].endswith("changed.jsonl"))
    assert identical["replay"] == "identical" and "divergence" not in identical
    assert diverged["replay"] == "diverged"
    assert diverged["divergence"]["index"] == index and diverged["divergence"]["then"]["content"] == "It is 4."
    assert diverged["divergence"]["now"]["content"] == "It is 3."
    assert any(item["k"] == "final" and item["i"] == index for item in diverged["items"])


def test_files_it_cannot_read_are_noted_and_the_rest_is_shown(tmp_path: Path) -> None:
    (tmp_path / "good.jsonl").write_text((FIXTURES / "hand-one-tool.jsonl").read_text())
    (tmp_path / "other.jsonl").write_text('{"hello": 1}\n')
    (tmp_path / "broken.jsonl").write_text('{"v": 2, "run": "r", "seq": 0, "t": "x", "type": "nonsense"}\n{}\n')
    data = _data(tmp_path)
    assert len(data["runs"]) == 1
    assert any("other.jsonl" in note for note in data["notes"])
    assert any("broken.jsonl" in note for note in data["notes"])
    assert classify(tmp_path / "other.jsonl") == "unknown"


def test_nothing_to_report_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such"):
        gather([tmp_path / "missing"])
    with pytest.raises(UsageError, match=r"no \*\.jsonl"):
        gather([tmp_path])
    (tmp_path / "x.jsonl").write_text('{"hello": 1}\n')
    with pytest.raises(UsageError, match="no runs to report"):
        write_report([tmp_path], tmp_path / "r.html")


def test_cli_writes_the_report(tmp_path: Path) -> None:
    out = tmp_path / "nested" / "report.html"
    result = CliRunner().invoke(app, ["report", str(FIXTURES), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "9 runs (1 failed) from 9 transcripts" in result.output
    assert out.read_text().startswith("<!doctype html>")
    missing = CliRunner().invoke(app, ["report", str(tmp_path / "none"), "-o", str(out)])
    assert missing.exit_code != 0


def test_write_report_is_public_api(tmp_path: Path) -> None:
    import agentfsm

    stats = agentfsm.write_report([FIXTURES / "hand-one-tool.jsonl"], tmp_path / "one.html")
    assert agentfsm.write_report is write_report and stats.runs == 1 and stats.failed == 0


def test_a_byte_that_is_not_utf8_costs_its_line_not_the_file_nor_a_traceback(tmp_path: Path) -> None:
    # a results file with one bad byte in its first 8 KB was "not a transcript, batch
    # results or replay output; left out"; past them, it was a UnicodeDecodeError traceback
    write_sample_batch(tmp_path / "batch", 8)
    results = tmp_path / "batch" / "results.jsonl"
    whole = results.read_bytes()
    for name, repeat in (("near.jsonl", 1), ("far.jsonl", 40)):
        bad = tmp_path / name
        bad.write_bytes(whole * repeat + b'{"id": "x\xff", "ok": true}\n')
        proc = CliRunner().invoke(app, ["report", str(bad), "-o", str(tmp_path / "r.html")])
        assert proc.exit_code == 0, proc.output
        assert f"note: {bad}:{8 * repeat + 1}: not UTF-8; line left out" in proc.output
        assert "wrote" in proc.output and "8 runs" in proc.output
    # a transcript's bad byte after its first line is the reader's to name, not "unknown"
    transcript = tmp_path / "t.jsonl"
    lines = (FIXTURES / "hand-one-tool.jsonl").read_bytes().splitlines(True)
    transcript.write_bytes(b"".join(lines[:2]) + b"\xe9" + b"".join(lines[2:]))
    assert classify(transcript) == "transcript"
    notes = gather([tmp_path / "t.jsonl", tmp_path / "batch"]).notes
    data = _data(tmp_path / "t.jsonl", tmp_path / "batch")
    assert any(note.startswith(f"cannot read transcript {transcript}: line 3:") for note in data["notes"]), data["notes"]
    assert notes == []  # gathering names nothing yet: reading the transcript does


@pytest.mark.skipif(sys.platform == "win32", reason="needs a file size limit (POSIX)")
def test_a_page_that_cannot_be_written_whole_leaves_the_one_that_was_there(tmp_path: Path) -> None:
    # a full disk (here a 16 KB file size limit) left the first 16 KB of the new page in
    # place of the old one, a page that opens broken
    import resource

    def limited() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (16_384, 16_384))

    out = tmp_path / "report.html"
    out.write_text("the page of yesterday")
    proc = subprocess.run([sys.executable, "-m", "agentfsm", "report", str(FIXTURES), "-o", str(out)],
                          capture_output=True, text=True, timeout=120, preexec_fn=limited,
                          cwd=Path(__file__).resolve().parent.parent)
    assert proc.returncode == 2
    assert proc.stderr == f"agentfsm: error: cannot write {out}: File too large\n"
    assert out.read_text() == "the page of yesterday" and [p.name for p in tmp_path.iterdir()] == ["report.html"]


def test_a_page_written_to_a_link_or_a_pipe_goes_where_it_points(tmp_path: Path) -> None:
    # written whole (beside, then renamed), the page must not replace a link with a file,
    # nor a device or a pipe with one (-o /dev/stdout)
    (tmp_path / "pages").mkdir()
    target = tmp_path / "pages" / "real.html"
    target.write_text("old")
    link = tmp_path / "report.html"
    link.symlink_to(target)
    assert CliRunner().invoke(app, ["report", str(FIXTURES), "-o", str(link)]).exit_code == 0
    assert link.is_symlink() and target.read_text().startswith("<!doctype html>")
    assert sorted(p.name for p in (tmp_path / "pages").iterdir()) == ["real.html"]
    if hasattr(os, "mkfifo"):  # a pipe in tmp_path, not /dev/stdout: a broken write must not replace a node of /dev
        fifo = tmp_path / "page.fifo"
        os.mkfifo(fifo)
        read: list[str] = []
        reader = threading.Thread(target=lambda: read.append(fifo.read_text()), daemon=True)
        reader.start()
        write_report([FIXTURES], fifo)
        reader.join(timeout=60)
        assert fifo.is_fifo() and read and read[0].startswith("<!doctype html>")


def test_an_integer_past_64_bits_in_a_transcript_is_shown_not_a_traceback(tmp_path: Path) -> None:
    # a line reads with integers of up to 4,300 digits; orjson writes 64 bits at most:
    # "TypeError: Integer exceeds 64-bit range" ended agentfsm report
    lines = [json.loads(line) for line in (FIXTURES / "hand-one-tool.jsonl").read_text().splitlines()]
    at = next(i for i, event in enumerate(lines) if "attempt" in event)
    lines[at]["attempt"] = 10**30
    path = tmp_path / "big.jsonl"
    path.write_text("".join(json.dumps(event) + "\n" for event in lines))
    out = tmp_path / "report.html"
    result = CliRunner().invoke(app, ["report", str(path), "-o", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads(re.search(r'id="report-data">(.*?)</script>', out.read_text(), re.S).group(1))  # type: ignore[union-attr]
    assert len(data["runs"]) == 1 and 10**30 in [item.get("attempt") for item in data["runs"][0]["items"]]
    assert embed_json({"n": 10**30, "<": 1}) == '{"n":' + str(10**30) + ',"\\u003c":1}'
