"""Click's usage errors (a bad option value, an unknown option or command, a missing
argument) as the CLI's own errors are: one ``agentfsm: error:`` line, then click's hint
to try ``--help``; exit status 2. Real subprocess runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTFSM_")}
    return subprocess.run([sys.executable, "-m", "agentfsm", *args], capture_output=True, text=True, timeout=120,
                          env=env)


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["run", "hi", "--dialect", "bogus"],
         "Invalid value for '--dialect' (env var: 'AGENTFSM_DIALECT'): 'bogus' is not one of "
         "'json-action', 'json-protocol', 'command', 'smiley'."),
        (["run", "hi", "--no-such-option"], "No such option: --no-such-option"),
        (["run"], "Missing argument 'prompt'."),
        (["run", "hi", "--max-steps", "0"],
         "Invalid value for '--max-steps' (env var: 'AGENTFSM_MAX_STEPS'): Input should be greater than or equal to 1"),
        (["batch", "tasks.jsonl"], "Missing option '--output' / '-o'."),
        (["no-such-command"], "No such command 'no-such-command'."),
    ],
    ids=["choice", "unknown-option", "missing-argument", "minimum", "missing-option", "unknown-command"],
)
def test_a_usage_error_is_one_line_and_the_help_hint(args: list[str], line: str) -> None:
    # defect: click's usage line and a boxed message, unlike every other error of the CLI
    proc = _cli(*args)
    assert proc.returncode == 2
    path = " ".join(["python -m agentfsm", *args[:1]]) if args[0] != "no-such-command" else "python -m agentfsm"
    assert proc.stderr.splitlines() == [f"agentfsm: error: {line}", f"Try '{path} --help' for help."]
    assert proc.stdout == ""


def test_no_command_still_shows_the_help() -> None:
    proc = _cli()
    assert proc.returncode == 2  # click's status for it
    assert "Usage:" in proc.stdout and "run" in proc.stdout and "agentfsm: error" not in proc.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["eval", "quality", "--fast", "--categories", "none", "--live-categories", "none", "-o", "{d}/q.md"],
         "-o {d}/q.md: {d}/q.md is a folder"),
        (["eval", "bfcl", "--limit", "1", "--no-baseline", "-o", "{d}/q"], "-o {d}/q: {d}/q.md is a folder"),
        (["eval", "quality", "--fast", "--categories", "none", "--live-categories", "none", "-o", "{d}/f.txt/q.md"],
         "-o {d}/f.txt/q.md: cannot write in {d}/f.txt: {d}/f.txt exists and is not a directory"),
    ],
    ids=["quality-folder", "bfcl-folder", "quality-parent-a-file"],
)
def test_an_eval_output_that_cannot_be_written_is_refused_before_any_model_call(
    tmp_path: Path, args: list[str], message: str
) -> None:
    # defect: the eval ran to its end (half an hour on the embedded model), then failed
    # with a traceback writing its report into a folder
    from agentfsm.testing import FakeReply, FakeUpstream

    (tmp_path / "q.md").mkdir()
    (tmp_path / "f.txt").write_text("not a folder")
    with FakeUpstream(lambda request: FakeReply(text="The answer is 42.")) as fake:
        proc = _cli(*(a.format(d=tmp_path) for a in args), "--backend", "openai", "--base-url", fake.base_url)
        assert fake.chat_requests == []
    assert proc.returncode == 2
    assert proc.stderr.strip() == "agentfsm: error: " + message.format(d=tmp_path)
