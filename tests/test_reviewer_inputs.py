"""How ``replay``, ``diagram`` and ``report`` take their inputs, each run as a subprocess:
errors in JSON when ``--json`` is asked, ``-`` for standard input, directories searched
the same way by all three, ``diagram -o`` written whole, and a run whose events are out
of order named where it happens.

Each test is a failure found by running the commands: ``replay --json`` said nothing on
standard output for a transcript that did not read (its error was on stderr only); ``-``
was "no such transcript file or directory: -"; ``report`` searched subdirectories where
``replay`` and ``diagram`` said "no *.jsonl transcripts in directory"; ``diagram -o`` on a
full disk left half a diagram in place of the old one; and a run with two events swapped
was drawn starting in the wrong state, without a word.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
ONE_TOOL = REPO / "fixtures" / "transcripts" / "hand-one-tool.jsonl"

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX files, pipes and limits")


def agentfsm(*args: str, stdin: str | None = None, limit: int | None = None) -> subprocess.CompletedProcess[str]:
    def limited() -> None:  # a disk that fills up: writes past `limit` bytes fail (EFBIG)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))  # type: ignore[arg-type]

    return subprocess.run(
        [sys.executable, "-m", "agentfsm", *args], input=stdin, capture_output=True, text=True,
        timeout=300, cwd=REPO, check=False, preexec_fn=limited if limit is not None else None,
    )


# --- replay --json: an error is a JSON line too -----------------------------------------

@pytest.mark.parametrize(
    ("content", "says"),
    [(b"not json\n", ":1: the line is not valid JSON"), (b"\xff\xfe\n", "line 1: 'utf-8' codec"), (b"", "no events to replay")],
    ids=["not-json", "not-utf8", "empty"],
)
def test_replay_json_names_a_transcript_that_does_not_read_in_json(tmp_path: Path, content: bytes, says: str) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(content)
    done = agentfsm("replay", "--json", str(bad), str(ONE_TOOL))
    assert done.returncode == 2
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines[0]["path"] == str(bad) and lines[0]["error"] == "TranscriptError" and says in lines[0]["message"]
    assert lines[1]["path"] == str(ONE_TOOL) and lines[1]["identical"] is True  # the others still replayed
    assert done.stderr == f"agentfsm: error: {lines[0]['message']}\n"


def test_replay_json_says_a_missing_path_in_json_before_replaying_anything(tmp_path: Path) -> None:
    done = agentfsm("replay", "--json", str(ONE_TOOL), str(tmp_path / "nope.jsonl"))
    assert done.returncode == 2
    message = f"no such transcript file or directory: {tmp_path / 'nope.jsonl'}"
    assert [json.loads(line) for line in done.stdout.splitlines()] == [{"error": "UsageError", "message": message}]
    assert done.stderr == f"agentfsm: error: {message}\n"


def test_a_report_of_replay_output_names_what_replay_could_not_read(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    replayed = tmp_path / "out" / "replay.jsonl"
    replayed.parent.mkdir()
    replayed.write_text(agentfsm("replay", "--json", str(bad), str(ONE_TOOL)).stdout)
    done = agentfsm("report", str(replayed), "-o", str(tmp_path / "r.html"))
    assert done.returncode == 0, done.stderr
    assert f"note: {replayed}:1: replay could not read {bad}: {bad}:1: the line is not valid JSON" in done.stderr
    assert "1 run (0 failed) from 1 transcript" in done.stderr


# --- '-' is standard input ----------------------------------------------------------------

@pytest.mark.skipif(not Path("/dev/stdin").exists(), reason="needs /dev/stdin")
def test_a_dash_reads_standard_input_for_replay_and_diagram_and_report_says_why_not(tmp_path: Path) -> None:
    text = ONE_TOOL.read_text()
    done = agentfsm("replay", "-", stdin=text)
    assert done.returncode == 0 and done.stdout.startswith("identical  /dev/stdin"), done.stderr
    drawn = agentfsm("diagram", "-", stdin=text)
    assert drawn.returncode == 0 and "(1 run in 1 transcript)" in drawn.stdout, drawn.stderr
    assert drawn.stdout == agentfsm("diagram", str(ONE_TOOL)).stdout
    refused = agentfsm("report", "-", "-o", str(tmp_path / "r.html"), stdin=text)
    assert refused.returncode == 2 and not (tmp_path / "r.html").exists()
    assert refused.stderr == (
        "agentfsm: error: - (standard input) is not taken: a report reads each input twice; "
        "write it to a file first (zcat run.jsonl.gz > run.jsonl)\n"
    )


def test_a_file_named_dash_is_read_as_dot_slash_dash(tmp_path: Path) -> None:
    shutil.copy(ONE_TOOL, tmp_path / "-")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "agentfsm", "replay", "./-"], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path, check=False, env=env)
    assert done.returncode == 0 and done.stdout.startswith("identical  -"), done.stderr


# --- directories: searched the same way by all three --------------------------------------

def test_replay_diagram_and_report_all_search_subdirectories(tmp_path: Path) -> None:
    (tmp_path / "day1" / "late").mkdir(parents=True)
    shutil.copy(ONE_TOOL, tmp_path / "day1" / "late" / "a.jsonl")
    shutil.copy(ONE_TOOL, tmp_path / "b.jsonl")
    replayed = agentfsm("replay", str(tmp_path))
    assert replayed.returncode == 0, replayed.stderr
    assert [line.split()[1] for line in replayed.stdout.splitlines()] == [
        str(tmp_path / "b.jsonl"), str(tmp_path / "day1" / "late" / "a.jsonl")
    ]
    drawn = agentfsm("diagram", str(tmp_path))
    assert drawn.returncode == 0 and "(2 runs in 2 transcripts)" in drawn.stdout, drawn.stderr
    reported = agentfsm("report", str(tmp_path), "-o", str(tmp_path / "r.html"))
    assert reported.returncode == 0 and "2 runs (0 failed) from 2 transcripts" in reported.stderr


def test_a_directory_with_no_transcripts_at_any_depth_is_said_alike(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "notes.txt").write_text("x")
    said = f"agentfsm: error: no *.jsonl transcripts in directory {tmp_path} (nor in its subdirectories)\n"
    for args in (("replay",), ("diagram",), ("report", "-o", str(tmp_path / "r.html"))):
        done = agentfsm(args[0], str(tmp_path), *args[1:])
        assert (done.returncode, done.stderr) == (2, said), args


# --- diagram -o: whole or not at all --------------------------------------------------------

def test_diagram_output_on_a_full_disk_keeps_the_old_diagram(tmp_path: Path) -> None:
    out = tmp_path / "observed.md"
    out.write_text("the diagram of yesterday\n")
    done = agentfsm("diagram", str(REPO / "fixtures" / "transcripts"), "-o", str(out), limit=300)
    assert done.returncode == 2
    assert done.stderr == f"agentfsm: error: cannot write {out}: File too large\n"
    assert out.read_text() == "the diagram of yesterday\n"  # not the first 300 bytes of the new one
    assert sorted(p.name for p in tmp_path.iterdir()) == ["observed.md"]  # nothing left beside it
    whole = agentfsm("diagram", str(REPO / "fixtures" / "transcripts"), "-o", str(out))
    assert whole.returncode == 0 and out.read_text().startswith("# agentfsm observed paths")


@pytest.mark.skipif(shutil.which("dot") is None, reason="needs graphviz")
def test_a_png_diagram_is_written_whole_as_bytes(tmp_path: Path) -> None:
    out = tmp_path / "observed.png"
    done = agentfsm("diagram", str(ONE_TOOL), "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert out.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


# --- a run out of order ---------------------------------------------------------------------

def _swapped(tmp_path: Path) -> tuple[Path, str]:
    """hand-one-tool with its first and second transitions swapped (seq 8 written before 6)."""
    lines = ONE_TOOL.read_text().splitlines(True)
    at = [i for i, line in enumerate(lines) if json.loads(line)["type"] == "transition"]
    lines[at[0]], lines[at[1]] = lines[at[1]], lines[at[0]]
    path = tmp_path / "swapped.jsonl"
    path.write_text("".join(lines))
    first, second = json.loads(lines[at[0]]), json.loads(lines[at[0] + 1])
    said = (f"{path}:{at[0] + 2}: run {first['run']}: seq {second['seq']} after seq {first['seq']}: "
            "its events are out of order; read in file order")
    return path, said


def test_events_out_of_order_are_named_by_diagram_replay_and_report(tmp_path: Path) -> None:
    path, said = _swapped(tmp_path)
    drawn = agentfsm("diagram", str(path))
    assert drawn.returncode == 0 and drawn.stderr == f"note: {said}\n"
    replayed = agentfsm("replay", "--json", str(path))
    assert said in json.loads(replayed.stdout)["notes"]
    human = agentfsm("replay", str(path))
    assert f"note: {said}" in human.stdout
    reported = agentfsm("report", str(path), "-o", str(tmp_path / "r.html"))
    assert reported.returncode == 0 and f"note: {said}\n" in reported.stderr
    assert said in (tmp_path / "r.html").read_text()


def test_a_run_in_order_says_nothing_even_with_gaps_and_its_id_again_after_its_end(tmp_path: Path) -> None:
    # a writer that keeps only some event types leaves gaps; a file joined to itself
    # begins the run id again, from seq 0, after its run_end
    lines = [line for line in ONE_TOOL.read_text().splitlines(True) if json.loads(line)["type"] != "tool_call"]
    path = tmp_path / "gaps.jsonl"
    path.write_text("".join(lines) * 2)
    drawn = agentfsm("diagram", str(path))
    assert drawn.returncode == 0 and drawn.stderr == "", drawn.stderr


def test_many_runs_out_of_order_are_named_once_and_counted(tmp_path: Path) -> None:
    path, said = _swapped(tmp_path)
    (tmp_path / "three.jsonl").write_text(path.read_text() * 3)  # the same run id, begun again after its end
    three = tmp_path / "three.jsonl"
    drawn = agentfsm("diagram", str(three))
    assert drawn.returncode == 0
    assert drawn.stderr == f"note: {said.replace(str(path), str(three))}\nnote: {three}: 2 more runs out of order; read in file order\n"
