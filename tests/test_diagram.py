"""Diagrams: the machine's mermaid text, observed paths with counts, graphviz, the CLI command."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest
import typer
from syrupy.assertion import SnapshotAssertion
from typer.testing import CliRunner

from agentfsm.cli.diagram import register
from agentfsm.diagram.build import (
    GraphvizMissing,
    document_markdown,
    machine_diagram,
    machine_mermaid,
    observe,
    observed_diagram,
    observed_mermaid,
    render,
    to_graphviz_dot,
    transcript_files,
)
from agentfsm.core.errors import TranscriptError, UsageError
from agentfsm.core.events import parse_event
from agentfsm.core.machine import TRANSITIONS

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "transcripts"
HAND = sorted(FIXTURES.glob("hand-*.jsonl"))

#: (source, event, dest) -> times taken, over the four hand-written fixtures.
HAND_COUNTS = {
    ("first-decision", "answer", "final"): 1,
    ("first-decision", "emit", "tool-emitted"): 2,
    ("tool-emitted", "dispatch", "awaiting-result"): 2,
    ("awaiting-result", "receive", "awaiting-result"): 1,
    ("awaiting-result", "receive", "result-received"): 2,
    ("result-received", "answer", "final"): 2,
    ("first-decision", "correct", "first-decision"): 3,
    ("result-received", "correct", "result-received"): 1,
    ("first-decision", "abort", "final"): 1,
}


def _event(run: str, seq: int, type_: str, **fields: object) -> str:
    return json.dumps({"v": 1, "run": run, "seq": seq, "t": "2025-01-06T09:00:00.000+00:00", "type": type_, **fields})


def _transition(run: str, seq: int, source: str, event: str, dest: str) -> str:
    return _event(run, seq, "transition", **{"from": source, "event": event, "to": dest})


# --- the machine ------------------------------------------------------------------------

def test_machine_mermaid_snapshot(snapshot: SnapshotAssertion) -> None:
    assert machine_mermaid() == snapshot


def test_machine_mermaid_shows_every_transition_with_its_guards() -> None:
    text = machine_mermaid()
    assert text.splitlines()[3] == "stateDiagram-v2"
    for spec in TRANSITIONS:
        label = spec["trigger"] + (f" [{', '.join(spec['conditions'])}]" if spec["conditions"] else "")
        assert label in text
    assert "receive [not all_results_in]" in text
    assert "[*] --> s_first_decision" in text


def test_machine_dot_snapshot(snapshot: SnapshotAssertion) -> None:
    assert to_graphviz_dot(machine_diagram()) == snapshot


@pytest.mark.parametrize(
    ("committed", "args"),
    [("agent.md", None), ("observed.md", [FIXTURES])],
    ids=["machine", "observed"],
)
def test_committed_diagrams_are_current(committed: str, args: list[Path] | None) -> None:
    fresh = document_markdown(observed_diagram(args) if args else machine_diagram())
    current = (ROOT / "diagrams" / committed).read_text(encoding="utf-8")
    assert current == fresh, f"diagrams/{committed} is stale: run make diagrams"


# --- observed paths ---------------------------------------------------------------------

def test_observed_edge_counts_for_the_fixture_batch() -> None:
    diagram = observed_diagram(HAND)
    counts = {(e.source, e.event, e.dest): e.count for e in diagram.edges if e.count}
    assert counts == HAND_COUNTS
    assert (diagram.runs, diagram.transcripts) == (4, 4)
    assert diagram.starts == (("first-decision", 4),)
    assert all(edge.in_machine for edge in diagram.edges)
    never = {(e.source, e.event) for e in diagram.edges if e.dimmed}
    assert ("final", "user") in never and ("result-received", "emit") in never


def test_observed_retries_and_refusals_per_state() -> None:
    nodes = {n.state: n for n in observed_diagram(HAND).nodes}
    assert (nodes["first-decision"].retries, nodes["first-decision"].refusals) == (3, 2)
    assert (nodes["result-received"].retries, nodes["result-received"].refusals) == (1, 1)
    assert nodes["first-decision"].entered == 7
    assert nodes["final"].entered == 4


def test_observed_mermaid_snapshot(snapshot: SnapshotAssertion) -> None:
    assert observed_mermaid(HAND) == snapshot


def test_observed_mermaid_dims_edges_never_taken() -> None:
    lines = observed_mermaid(HAND).splitlines()
    links = [line.strip() for line in lines if "-->|" in line]
    style = next(line for line in lines if line.strip().startswith("linkStyle"))
    dimmed = {int(i) for i in style.split()[1].split(",")}
    assert {links[i] for i in dimmed} == {link for link in links if "×0" in link}
    assert 'run_start -->|"4 runs"| s_first_decision' in links


def test_a_directory_aggregates_its_transcripts(tmp_path: Path) -> None:
    for path in HAND:
        shutil.copy(path, tmp_path / path.name)
    (tmp_path / "notes.txt").write_text("not a transcript")
    assert transcript_files([tmp_path]) == sorted(tmp_path / p.name for p in HAND)
    assert observed_diagram([tmp_path]) == observed_diagram(HAND)


def test_runs_are_told_apart_within_one_file() -> None:
    lines = [
        _transition("r1", 0, "first-decision", "emit", "tool-emitted"),
        _event("r2", 0, "retry", reason="json_invalid", attempt=1, message="again"),
        _transition("r1", 1, "tool-emitted", "abort", "final"),
        _transition("r2", 1, "result-received", "answer", "final"),
    ]
    diagram = observe([[parse_event(json.loads(line)) for line in lines]])
    assert diagram.runs == 2
    assert dict(diagram.starts) == {"first-decision": 1, "result-received": 1}
    nodes = {n.state: n for n in diagram.nodes}
    assert nodes["first-decision"].retries == 1  # before r2's first transition: the default state
    assert nodes["final"].entered == 2


def test_a_transition_outside_the_machine_is_drawn_in_red() -> None:
    diagram = observe([[parse_event(json.loads(_transition("r", 0, "final", "emit", "limbo")))]])
    foreign = [e for e in diagram.edges if not e.in_machine]
    assert [(e.source, e.event, e.dest, e.count) for e in foreign] == [("final", "emit", "limbo", 1)]
    assert "limbo" in {n.state for n in diagram.nodes}
    page = document_markdown(diagram)
    assert "stroke:#d62728" in page and "s_limbo" in page


def test_a_torn_last_line_is_tolerated_and_a_broken_middle_line_is_not(tmp_path: Path) -> None:
    good = _transition("r", 0, "first-decision", "answer", "final")
    torn = tmp_path / "torn.jsonl"
    torn.write_text(good + "\n" + '{"v": 1, "run": "r", "seq": 1, "ty')
    assert observed_diagram([torn]).runs == 1
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"v": 1, "ty\n' + good + "\n")
    with pytest.raises(TranscriptError):
        observed_diagram([broken])


def test_missing_paths_and_empty_directories_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such transcript"):
        transcript_files([tmp_path / "nope.jsonl"])
    with pytest.raises(UsageError, match="no \\*.jsonl"):
        transcript_files([tmp_path])
    with pytest.raises(UsageError, match="no transcripts"):
        observed_diagram([])
    # empty files drew "0 runs in 2 transcripts" and exited 0, where replay and report refuse them
    (tmp_path / "a.jsonl").write_text("")
    (tmp_path / "b.jsonl").write_text("\n")
    with pytest.raises(UsageError, match="^no runs to draw: the transcripts hold no events$"):
        observed_diagram([tmp_path])


def test_observed_dot_dims_and_counts() -> None:
    dot = to_graphviz_dot(observed_diagram(HAND))
    assert '"first-decision" -> "tool-emitted" [label="emit ×2"];' in dot
    assert '"final" -> "first-decision" [label="user ×0", style=dashed, color=gray70, fontcolor=gray60];' in dot
    assert '"first-decision" [label="first-decision\\nentered 7\\nretries 3, refusals 2"];' in dot


# --- graphviz -----------------------------------------------------------------------------

def _fake_dot(directory: Path, script: str) -> None:
    dot = directory / "dot"
    dot.write_text("#!/bin/sh\n" + script)
    dot.chmod(dot.stat().st_mode | stat.S_IEXEC)


def test_render_without_graphviz_says_how_to_install_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(GraphvizMissing) as info:
        render("svg", to_graphviz_dot(machine_diagram()))
    assert isinstance(info.value, UsageError)
    assert "apt-get install graphviz" in str(info.value) and "brew install graphviz" in str(info.value)


def test_render_runs_dot_and_writes_its_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_dot(tmp_path, 'test "$1" = -Tsvg || exit 3\ncat >/dev/null\nprintf "<svg/>"\n')
    monkeypatch.setenv("PATH", str(tmp_path) + os.pathsep + os.environ.get("PATH", ""))
    out = tmp_path / "m.svg"
    assert render("svg", to_graphviz_dot(machine_diagram()), out) == b"<svg/>"
    assert out.read_bytes() == b"<svg/>"


def test_a_failing_dot_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_dot(tmp_path, 'cat >/dev/null\necho "syntax error in line 1" >&2\nexit 1\n')
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UsageError, match="syntax error in line 1"):
        render("png", "digraph {")


# --- the command --------------------------------------------------------------------------

@pytest.fixture
def cli() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """Test app."""

    register(app)
    return app


def test_cli_draws_the_machine_to_stdout(cli: typer.Typer) -> None:
    result = CliRunner().invoke(cli, ["diagram"])
    assert result.exit_code == 0, result.output
    assert result.stdout == machine_mermaid()


def test_cli_writes_markdown_pages(cli: typer.Typer, tmp_path: Path) -> None:
    out = tmp_path / "sub" / "agent.md"
    result = CliRunner().invoke(cli, ["diagram", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_text() == document_markdown(machine_diagram())
    observed = tmp_path / "observed.md"
    result = CliRunner().invoke(cli, ["diagram", *map(str, HAND), "--output", str(observed)])
    assert result.exit_code == 0, result.output
    assert observed.read_text() == document_markdown(observed_diagram(HAND))


def test_cli_observed_mermaid_from_a_directory(cli: typer.Typer, tmp_path: Path) -> None:
    for path in HAND:
        shutil.copy(path, tmp_path / path.name)
    out = tmp_path / "observed.mmd"
    result = CliRunner().invoke(cli, ["diagram", str(tmp_path), "-o", str(out), "--format", "mermaid"])
    assert result.exit_code == 0, result.output
    assert out.read_text() == observed_mermaid(HAND)


def test_cli_svg_without_graphviz_exits_2(cli: typer.Typer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    result = CliRunner().invoke(cli, ["diagram", "--format", "svg", "-o", str(tmp_path / "m.svg")])
    assert result.exit_code == 2
    assert "apt-get install graphviz" in result.stderr and "brew install graphviz" in result.stderr
    assert not (tmp_path / "m.svg").exists()


def test_cli_infers_svg_from_the_suffix(cli: typer.Typer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_dot(tmp_path, 'cat >/dev/null\nprintf "<svg>$1</svg>"\n')
    monkeypatch.setenv("PATH", str(tmp_path))
    out = tmp_path / "observed.svg"
    result = CliRunner().invoke(cli, ["diagram", str(HAND[0]), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_text() == "<svg>-Tsvg</svg>"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--format", "gif"], "--format must be one of"),
        (["--format", "png"], "give -o FILE.png"),
        (["missing.jsonl"], "no such transcript"),
    ],
    ids=["bad-format", "png-to-stdout", "missing-file"],
)
def test_cli_usage_errors_exit_2(cli: typer.Typer, args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, ["diagram", *args])
    assert result.exit_code == 2
    assert message in result.stderr


def test_cli_leaves_out_a_file_that_does_not_read_and_draws_the_rest(cli: typer.Typer, tmp_path: Path) -> None:
    # one broken file of a directory drew nothing (exit 2), where report notes it and shows the rest
    for path in HAND:
        shutil.copy(path, tmp_path / path.name)
    (tmp_path / "broken.jsonl").write_text('{"v": 1, "ty\n' + _transition("r", 0, "first-decision", "answer", "final") + "\n")
    (tmp_path / "empty.jsonl").write_text("")
    out = tmp_path / "observed.mmd"
    result = CliRunner().invoke(cli, ["diagram", str(tmp_path), "-o", str(out)])
    assert result.exit_code == 0, result.output
    notes = [line for line in result.stderr.splitlines() if line.startswith("note: ")]
    assert notes == [
        f"note: {tmp_path / 'broken.jsonl'}:1: the line is not valid JSON: Invalid control character at: "
        "line 1 column 13 (char 12); left out",
        f"note: {tmp_path / 'empty.jsonl'}: no events; left out",
    ]
    assert out.read_text() == observed_mermaid(HAND)  # the rest, as if the two were not there
    with pytest.raises(TranscriptError):  # from Python, without on_skip, a file that does not read is an error
        observed_diagram([tmp_path])
    # nothing left to draw is one line, exit 2
    result = CliRunner().invoke(cli, ["diagram", str(tmp_path / "broken.jsonl"), str(tmp_path / "empty.jsonl")])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"agentfsm: error: no runs to draw: {tmp_path / 'broken.jsonl'}:1: ")
    assert result.stderr.endswith(f"; {tmp_path / 'empty.jsonl'}: no events\n")


def test_a_file_named_twice_is_counted_once_as_the_report_counts_it(tmp_path: Path) -> None:
    # "diagram runs/ runs/a.jsonl" drew a's runs twice (13 runs in 9 transcripts) where the
    # report of the same arguments showed 10 runs from 8; "runs/../runs/a.jsonl" doubled both
    from agentfsm.report.build import page_data
    from agentfsm.report.inputs import gather

    for path in HAND:
        shutil.copy(path, tmp_path / path.name)
    again = tmp_path / ".." / tmp_path.name / HAND[0].name
    assert transcript_files([tmp_path, again, tmp_path / HAND[0].name]) == sorted(tmp_path.glob("*.jsonl"))
    diagram = observed_diagram([tmp_path, again])
    assert (diagram.runs, diagram.transcripts) == (observed_diagram(HAND).runs, len(HAND))
    _data, _svg, stats = page_data(gather([tmp_path, again]))
    assert (stats.runs, stats.transcripts) == (diagram.runs, diagram.transcripts)


def test_a_file_joined_to_itself_is_two_runs_as_the_report_and_replay_read_it(tmp_path: Path) -> None:
    # "cat a.jsonl a.jsonl > b.jsonl": the diagram said "1 run" with every edge taken twice
    # (and one start), where the report showed 2 runs and replay replayed 2
    from agentfsm.report.build import page_data
    from agentfsm.report.inputs import gather

    twice = tmp_path / "twice.jsonl"
    twice.write_text(HAND[0].read_text() * 2)
    once = observed_diagram([HAND[0]])
    diagram = observed_diagram([twice])
    assert diagram.runs == 2 * once.runs == page_data(gather([twice]))[2].runs
    assert [(s, 2 * n) for s, n in once.starts] == list(diagram.starts)
    assert [e.count for e in diagram.edges] == [2 * e.count for e in once.edges]
