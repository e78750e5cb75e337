"""The command line on bad paths, bad modules, bad servers and bad settings: one line saying
what is wrong and exit code 2, never a traceback; and no warnings after a good run."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from rich.text import Text

from agentfsm.batch.controller import run_batch_sync
from agentfsm.batch.task import Task, ToolProvider
from agentfsm.cli import app
from agentfsm.core.config import RunConfig
from agentfsm.core.errors import ScriptExhausted, ToolSpecError, UsageError
from agentfsm.runtime.agent import Agent
from agentfsm.runtime.tools import ToolRegistry
from agentfsm.testing import FakeUpstream, ScriptedBackend, status

NOWHERE = "http://127.0.0.1:9/v1"  # nothing listens: these runs must fail before any request


def _cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
         flags: tuple[str, ...] = (), stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m agentfsm ARGS`` (``flags`` go to python itself)."""
    return subprocess.run(
        [sys.executable, *flags, "-m", "agentfsm", *args], capture_output=True, text=True, timeout=120,
        cwd=cwd, env={**os.environ, **(env or {})}, input=stdin,
    )


def _one_line_error(proc: subprocess.CompletedProcess[str], *fragments: str) -> str:
    """The process exited 2 with an ``agentfsm: error:`` line holding every fragment, and no traceback."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and "ExceptionGroup" not in proc.stderr, proc.stderr
    [line] = [ln for ln in proc.stderr.splitlines() if ln.startswith("agentfsm: error:")]
    for fragment in fragments:
        assert fragment in line, line
    return line


def _write_module(directory: Path, name: str, source: str) -> None:
    (directory / f"{name}.py").write_text(source, encoding="utf-8")


# --- 1, 2: outputs that cannot be written ---------------------------------------------


def _unwritable(tmp_path: Path, kind: str) -> tuple[Path, str]:
    """A transcript path that cannot be written, and what the error says about it."""
    if kind == "directory":
        return tmp_path, "is a directory"
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    return blocker / "t.jsonl", f"{blocker} exists and is not a directory"


@pytest.mark.parametrize("kind", ["directory", "under a file"])
@pytest.mark.parametrize("as_json", [False, True])
def test_run_transcript_that_cannot_be_written(tmp_path: Path, kind: str, as_json: bool) -> None:
    path, reason = _unwritable(tmp_path, kind)
    proc = _cli("run", "hi", "--backend", "openai", "--base-url", NOWHERE, "--transcript", str(path),
                *(["--json"] if as_json else []))
    if as_json:
        assert proc.returncode == 2, proc.stderr
        out = json.loads(proc.stdout)
        assert out["ok"] is False and out["error"] == "TranscriptError"
        assert out["message"] == f"cannot write transcript {path}: {reason}"
        assert "Traceback" not in proc.stderr
    else:
        _one_line_error(proc, f"cannot write transcript {path}: {reason}")


def _tasks(tmp_path: Path, *lines: dict[str, Any]) -> Path:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(line) + "\n" for line in lines or [{"id": "a", "prompt": "hi"}]))
    return tasks


@pytest.mark.parametrize("kind", ["directory", "under a file"])
def test_batch_output_that_cannot_be_written(tmp_path: Path, kind: str) -> None:
    tasks = _tasks(tmp_path)
    target = tmp_path / "out"
    target.mkdir()
    path, reason = _unwritable(target, kind)
    proc = _cli("batch", str(tasks), "-o", str(path), "--backend", "openai", "--base-url", NOWHERE, "--no-progress")
    _one_line_error(proc, f"cannot write results {path}: {reason}")


def test_batch_transcripts_in_a_file_are_refused_before_any_task(tmp_path: Path) -> None:
    tasks, out, blocker = _tasks(tmp_path), tmp_path / "results.jsonl", tmp_path / "runs"
    blocker.write_text("not a directory")
    proc = _cli("batch", str(tasks), "-o", str(out), "--transcripts", str(blocker), "--backend", "openai",
                "--base-url", NOWHERE, "--no-progress")
    _one_line_error(proc, f"cannot write transcripts into directory {blocker}", "exists and is not a directory")
    assert not out.exists()  # no task was run, nor recorded as failed


def test_run_batch_checks_the_transcripts_directory_first(tmp_path: Path) -> None:
    blocker, out = tmp_path / "runs", tmp_path / "results.jsonl"
    blocker.write_text("")
    with pytest.raises(UsageError, match="cannot write transcripts into directory"):
        run_batch_sync([{"id": "a", "prompt": "hi"}], output=out, backend=ScriptedBackend(["hi"]),
                       transcripts_dir=blocker)
    assert not out.exists()


def test_batch_transcripts_directory_is_created_when_missing(tmp_path: Path) -> None:
    runs = tmp_path / "new" / "runs"
    stats = run_batch_sync([{"id": "a", "prompt": "hi"}], output=tmp_path / "r.jsonl",
                           backend=ScriptedBackend(["hello"]), transcripts_dir=runs)
    assert stats.ok == 1 and (runs / "a.jsonl").is_file()


def test_serve_refuses_a_transcripts_path_it_cannot_write(tmp_path: Path) -> None:
    blocker = tmp_path / "runs"
    blocker.write_text("")
    proc = _cli("serve", "--backend", "openai", "--base-url", NOWHERE, "--port", "0", "--transcripts", str(blocker))
    _one_line_error(proc, f"cannot write transcripts into directory {blocker}")
    assert "agentfsm proxy on" not in proc.stderr  # refused before it served


# --- 3: MCP servers that do not start ---------------------------------------------------


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("nonexistent-binary-xyz --flag", "command not found: nonexistent-binary-xyz"),
        (f"{sys.executable} -c pass", "exited, or closed its output, before it answered"),
        ('python "unclosed', "No closing quotation"),
    ],
)
def test_mcp_server_that_does_not_start(command: str, reason: str) -> None:
    proc = _cli("run", "hi", "--backend", "openai", "--base-url", NOWHERE, "--mcp", command)
    _one_line_error(proc, command if "unclosed" in command else f"MCP server {command!r} did not start", reason)


MCP_SERVER = '''
from mcp.server.fastmcp import FastMCP

server = FastMCP("demo")


@server.tool()
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


server.run()
'''


def test_an_error_of_the_run_leaves_an_mcp_block_as_itself(tmp_path: Path) -> None:
    """The MCP client's task groups wrap what the block raised: it comes out unwrapped."""
    from agentfsm.runtime.mcp import mcp_tools

    script = tmp_path / "server.py"
    script.write_text(MCP_SERVER)

    async def go() -> None:
        async with mcp_tools(f"{sys.executable} {script}") as tools:
            assert [t.spec.name for t in tools] == ["multiply"]
            raise KeyError("the caller's own")

    with pytest.raises(KeyError, match="the caller's own"):
        asyncio.run(go())
    with pytest.raises(ScriptExhausted):  # through the agent as well
        Agent(ScriptedBackend([]), mcp=[f"{sys.executable} {script}"]).run("hi")


# --- 4, 10: tools modules ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "fragments"),
    [
        ("raise RuntimeError('kaboom at import')\n", ["cannot import tools module 'badmod'", "RuntimeError: kaboom at import"]),
        ("def f(:\n    pass\n", ["cannot import tools module 'badmod'", "SyntaxError"]),
        ("import no_such_dependency_xyz\n", ["cannot import tools module 'badmod'", "no_such_dependency_xyz"]),
        ("TOOLS = [1, 2]\n", ["'badmod:TOOLS'[0] is 1 (int), not a tool"]),
        ("TOOLS = [{'name': 'f'}]\n", ["'badmod:TOOLS'[0] is a tool definition with nothing to run"]),
    ],
)
def test_a_broken_tools_module_is_one_line(tmp_path: Path, source: str, fragments: list[str]) -> None:
    _write_module(tmp_path, "badmod", source)
    _one_line_error(_cli("tools", "badmod:TOOLS", env={"PYTHONPATH": str(tmp_path)}), *fragments)


@pytest.mark.parametrize("command", ["run", "batch"])
def test_run_and_batch_name_a_tools_module_that_raises(tmp_path: Path, command: str) -> None:
    _write_module(tmp_path, "badmod", "raise RuntimeError('kaboom at import')\n")
    env, upstream = {"PYTHONPATH": str(tmp_path)}, ("--backend", "openai", "--base-url", NOWHERE)
    if command == "run":
        proc = _cli("run", "hi", "--tools", "badmod:TOOLS", *upstream, env=env)
    else:
        proc = _cli("batch", str(_tasks(tmp_path)), "-o", str(tmp_path / "r.jsonl"), "--tools-module",
                    "badmod:TOOLS", "--no-progress", *upstream, env=env)
    _one_line_error(proc, "cannot import tools module 'badmod': RuntimeError: kaboom at import")


def test_a_plain_tools_module_that_raises_is_one_line(tmp_path: Path) -> None:
    _write_module(tmp_path, "badplain", "raise ValueError('no config')\n")
    proc = _cli("batch", str(_tasks(tmp_path)), "-o", str(tmp_path / "r.jsonl"), "--tools-module", "badplain",
                "--no-progress", "--backend", "openai", "--base-url", NOWHERE, env={"PYTHONPATH": str(tmp_path)})
    _one_line_error(proc, "cannot import tools module 'badplain': ValueError: no config")


def test_a_module_in_the_current_directory_gets_a_hint(tmp_path: Path) -> None:
    """The console script ``agentfsm`` does not put the current directory on the import
    path (``-P`` makes ``python -m`` do the same): the message says so."""
    _write_module(tmp_path, "mymod", "def add(a: int, b: int) -> int:\n    return a + b\n\nTOOLS = [add]\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-P", "-m", "agentfsm", "tools", "mymod:TOOLS"], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path, env=env)
    _one_line_error(proc, "No module named 'mymod'", "current directory", "PYTHONPATH=.")
    proc = subprocess.run([sys.executable, "-P", "-m", "agentfsm", "tools", "mymod:TOOLS"], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path, env={**env, "PYTHONPATH": "."})
    assert proc.returncode == 0 and "add" in proc.stdout, proc.stderr


def test_a_registry_names_what_is_not_a_tool() -> None:
    with pytest.raises(ToolSpecError, match=r"^1 \(int\) is not a tool"):
        ToolRegistry([1])
    with pytest.raises(ToolSpecError, match="nothing to run"):  # a definition: the message it had
        ToolRegistry([{"name": "f"}])


def test_a_task_tool_without_a_tools_module_names_the_option() -> None:
    task = Task(id="a", prompt="hi", tools=[{"type": "function", "function": {"name": "add", "parameters": {}}}])
    with pytest.raises(UsageError) as caught:
        ToolProvider(None).registry(task)
    assert str(caught.value) == ("task 'a' offers tool 'add', but no tools module was given to run it "
                                 "(pass --tools-module MODULE, or tools_module= from Python)")


# --- 8: a task without tools, and a module without a TOOLS list -------------------------

FUNCTIONS = '''
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def helper(text: str) -> str:
    """Not meant for the model."""
    return text
'''


def test_a_module_without_tools_list_refuses_a_task_without_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Which of a plain module's functions are tools is not said anywhere: rather than
    offering the model every one (helpers included) or none in silence, the batch stops."""
    _write_module(tmp_path, "unlisted_tools_mod", FUNCTIONS)
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "r.jsonl"
    with pytest.raises(UsageError, match=r"task 'a' names no tools, and tools module 'unlisted_tools_mod' has no TOOLS list"):
        run_batch_sync([{"id": "a", "prompt": "hi"}], output=out, backend=ScriptedBackend(["x"]),
                       tools_module="unlisted_tools_mod")
    assert not out.exists()
    # "tools": [] asks for none; a task naming its tools finds the functions by name
    named = {"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {}}}}
    stats = run_batch_sync([{"id": "a", "prompt": "hi", "tools": []}, {"id": "b", "prompt": "hi", "tools": [named]}],
                           output=out, backend=ScriptedBackend(["x", "y"]), tools_module="unlisted_tools_mod")
    assert stats.ok == 2


def test_a_task_without_tools_gets_the_tools_list_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A function another task named is not added to what a task without tools is offered."""
    _write_module(tmp_path, "listed_tools_mod", FUNCTIONS + "\nTOOLS = [add]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    provider = ToolProvider("listed_tools_mod")
    named = Task(id="n", prompt="x", tools=[{"type": "function", "function": {"name": "helper", "parameters": {}}}])
    assert provider.registry(named).names == ("helper",)
    assert provider.registry(Task(id="all", prompt="x")).names == ("add",)


# --- 5: the log level -------------------------------------------------------------------


@pytest.mark.parametrize("level", ["debug", "Info", " WARNING "])
def test_log_level_in_any_case(level: str) -> None:
    proc = _cli("--help", env={"AGENTFSM_LOG_LEVEL": level})
    assert proc.returncode == 0, proc.stderr
    assert "AGENTFSM_LOG_LEVEL" in proc.stdout  # the top-level help documents it


def test_unknown_log_level_is_one_line() -> None:
    proc = _cli("replay", "--help", env={"AGENTFSM_LOG_LEVEL": "bogus"})
    _one_line_error(proc, "AGENTFSM_LOG_LEVEL", "'bogus'", "debug", "warning")


# --- 6: connections closed with the run's loop -------------------------------------------

API_RUNS = """
import asyncio, gc, sys
from agentfsm import Agent, OpenAICompatBackend
backend = OpenAICompatBackend(sys.argv[1], model="fake")
agent = Agent(backend=backend)
print(agent.run("one").content)
print(agent.run("two").content)                 # the same backend, a new loop
print(asyncio.run(agent.arun("three")).content)  # the caller's own loops
print(asyncio.run(agent.arun("four")).content)
asyncio.run(backend.aclose())  # the caller who ran the loops closes the pool, after they ended
gc.collect()
"""


def test_no_unclosed_connections_after_runs(tmp_path: Path) -> None:
    script = tmp_path / "runs.py"
    script.write_text(API_RUNS)
    with FakeUpstream(["a1", "a2", "a3", "a4", "b1", "c1", "c2"]) as fake:
        api = subprocess.run([sys.executable, str(script), fake.base_url], capture_output=True, text=True, timeout=120)
        cli = _cli("run", "hi", "--backend", "openai", "--base-url", fake.base_url, "--enforcement", "prompt")
        chat = _cli("chat", "--backend", "openai", "--base-url", fake.base_url, "--enforcement", "prompt",
                    stdin="hello\nagain\n\n")
    assert api.returncode == 0, api.stderr
    assert api.stdout.split() == ["a1", "a2", "a3", "a4"]
    assert cli.returncode == 0 and "b1" in cli.stdout, cli.stderr
    assert chat.returncode == 0 and "c2" in chat.stdout, chat.stderr
    for proc in (api, cli, chat):
        assert "Unclosed" not in proc.stderr, proc.stderr


THREADED_RUNS = """
import gc, sys, threading
from agentfsm import Agent, OpenAICompatBackend
backend = OpenAICompatBackend(sys.argv[1], model="fake")
answers = []
def work():
    agent = Agent(backend=backend)
    for _ in range(3):
        answers.append(agent.run("hi").content)
threads = [threading.Thread(target=work) for _ in range(2)]
for t in threads: t.start()
for t in threads: t.join()
print(len(answers))
gc.collect()
"""


def test_threads_sharing_one_backend_leave_no_unclosed_connections(tmp_path: Path) -> None:
    """Each thread's loop has its own pool: one thread's run no longer replaces (and
    leaks) the other's."""
    script = tmp_path / "threads.py"
    script.write_text(THREADED_RUNS)
    with FakeUpstream(lambda _request: "fine") as fake:
        proc = subprocess.run([sys.executable, str(script), fake.base_url], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["6"]
    assert "Unclosed" not in proc.stderr, proc.stderr


# --- 7: replay of a directory without transcripts ---------------------------------------


def test_replay_of_a_directory_without_transcripts(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a transcript")
    _one_line_error(_cli("replay", str(tmp_path)), f"no *.jsonl transcripts in directory {tmp_path}")


# --- 9, 12: help text -------------------------------------------------------------------


def _help_texts() -> list[tuple[str, str]]:
    """Every command's and option's help text, by where it is."""
    found: list[tuple[str, str]] = []

    def walk(command: Any, where: str) -> None:
        found.append((where, command.help or ""))
        found.extend((f"{where} --{p.name}", getattr(p, "help", None) or "") for p in command.params)
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, f"{where} {name}")

    walk(typer.main.get_command(app), "agentfsm")
    return found


def test_help_texts_survive_rich_markup() -> None:
    """Help is rendered as rich markup: an unescaped ``[otel]`` would vanish from it."""
    for where, text in _help_texts():
        assert Text.from_markup(text).plain == text.replace("\\[", "["), where
    proc = _cli("serve", "--help", env={"COLUMNS": "400"})
    assert "pip install 'agentfsm[otel]'" in proc.stdout


def test_model_help_says_what_is_sent_without_it() -> None:
    texts = dict(_help_texts())
    for command in ("run", "chat", "serve", "batch"):
        assert 'requests name the model "default"' in texts[f"agentfsm {command} --model"], command


# --- 11: run --json exits as run does ----------------------------------------------------


def test_run_json_failure_exits_2_like_run() -> None:
    with FakeUpstream([status(400), status(400)]) as fake:
        plain = _cli("run", "hi", "--backend", "openai", "--base-url", fake.base_url, "--enforcement", "prompt")
        as_json = _cli("run", "hi", "--backend", "openai", "--base-url", fake.base_url, "--enforcement", "prompt",
                       "--json")
    _one_line_error(plain, "400")
    assert as_json.returncode == 2, as_json.stderr
    out = json.loads(as_json.stdout)
    assert out["ok"] is False and out["error"] == "BackendHTTPError"


# --- 13: the Agent's docstring ------------------------------------------------------------


def test_agent_docstring_names_every_config_field() -> None:
    doc = " ".join((Agent.__doc__ or "").split())
    listed = re.search(r"RunConfig`: ([a-z_, ]+)\)", doc)
    assert listed is not None, doc
    assert [name.strip() for name in listed.group(1).split(",")] == [f.name for f in dataclasses.fields(RunConfig)]
