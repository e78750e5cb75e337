"""MCP servers at start-up, with real processes: one that runs but never answers is
stopped at the start-up deadline (no process left behind), with one line naming the
command and the deadline; the ``mcp`` library's own logs of output that is not MCP stay
off the terminal; a real server still starts, under the CLI's ``--mcp-timeout`` too."""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import math
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentfsm.cli.run import run
from agentfsm.core.errors import UsageError
from agentfsm.runtime.agent import Agent
from agentfsm.runtime.mcp import START_TIMEOUT, mcp_tools
from agentfsm.testing import FakeUpstream, ScriptedBackend
from tests.test_cli_robustness import MCP_SERVER, NOWHERE, _cli, _one_line_error

#: a server that never answers: it writes its pid to argv[1], the rest of argv to its
#: output, and sleeps (it does not read its input, so closing it does not end it)
MUTE_SERVER = """
import os, sys, time
with open(sys.argv[1], "w") as f:
    f.write(str(os.getpid()))
if sys.argv[2:]:
    print(*sys.argv[2:], flush=True)
time.sleep(1000)
"""


def _running(pid: int) -> bool:
    """Whether process ``pid`` still runs (a zombie nobody reaped does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] == "Z")


@pytest.fixture
def mute(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The mute server's command line (output words appended by the test) and its pid file;
    a server still running afterwards is killed, so a failing test leaves none behind."""
    script, pidfile = tmp_path / "mute.py", tmp_path / "mute.pid"
    script.write_text(MUTE_SERVER)
    yield f"{sys.executable} {script} {pidfile}", pidfile
    if pidfile.exists() and _running(pid := int(pidfile.read_text())):
        os.kill(pid, signal.SIGKILL)


def _stopped(pidfile: Path) -> bool:
    """The server wrote its pid (it did start), and that process is gone."""
    return not _running(int(pidfile.read_text()))


@pytest.mark.parametrize("output", ["", " hello"])
def test_the_cli_stops_a_server_that_never_answers_at_the_deadline(mute: tuple[str, Path], output: str) -> None:
    command, pidfile = mute[0] + output, mute[1]
    proc = _cli("run", "hi", "--backend", "openai", "--base-url", NOWHERE, "--mcp", command, "--mcp-timeout", "2")
    line = _one_line_error(proc, f"MCP server {command!r} did not start",
                           "no MCP answer within the start-up timeout of 2 s")
    assert proc.stderr.strip() == line  # the mcp library logged nothing above it
    assert ("its output was not MCP: 'hello'" in line) == bool(output), line
    assert _stopped(pidfile)


def test_cat_is_one_line() -> None:
    """``cat`` echoes the client's own requests back: one line, none of the library's warnings."""
    proc = _cli("run", "hi", "--backend", "openai", "--base-url", NOWHERE, "--mcp", "cat", "--mcp-timeout", "2")
    line = _one_line_error(proc, "MCP server 'cat' did not start")
    assert proc.stderr.strip() == line


def test_the_library_stops_a_server_that_never_answers(
    mute: tuple[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    command, pidfile = mute[0] + " hello", mute[1]

    async def go() -> None:
        async with mcp_tools(command, start_timeout=1):
            pass

    with pytest.raises(UsageError) as raised:
        asyncio.run(go())
    assert str(raised.value) == (
        f"MCP server {command!r} did not start: no MCP answer within the start-up timeout of 1 s; "
        "its output was not MCP: 'hello'"
    )
    assert _stopped(pidfile)
    assert not [r for r in caplog.records if r.name.startswith("mcp") or "JSONRPC" in r.getMessage()]
    logging.getLogger("mcp.client.stdio").error("after the start")  # held only while a server starts
    assert [r.getMessage() for r in caplog.records if r.name == "mcp.client.stdio"] == ["after the start"]


def test_an_agent_takes_its_mcp_start_timeout(mute: tuple[str, Path]) -> None:
    command, pidfile = mute
    with pytest.raises(UsageError, match="no MCP answer within the start-up timeout of 1 s"):
        Agent(ScriptedBackend([]), mcp=[command], mcp_start_timeout=1).run("hi")
    assert _stopped(pidfile)


@pytest.mark.parametrize("seconds", [0, -1, math.nan])
def test_a_start_up_timeout_is_more_than_zero(seconds: float) -> None:
    async def go() -> None:
        async with mcp_tools("cat", start_timeout=seconds):
            pass

    with pytest.raises(UsageError, match="more than 0 seconds"):
        asyncio.run(go())
    with pytest.raises(UsageError, match="more than 0 seconds"):
        Agent(ScriptedBackend([]), mcp=["cat"], mcp_start_timeout=seconds)


def test_the_cli_refuses_a_start_up_timeout_of_zero() -> None:
    proc = _cli("run", "hi", "--backend", "openai", "--base-url", NOWHERE, "--mcp-timeout", "0")
    _one_line_error(proc, "the MCP start-up timeout must be more than 0 seconds")


def test_the_cli_default_is_the_library_default() -> None:
    assert inspect.signature(run).parameters["mcp_timeout"].default == START_TIMEOUT


def test_a_real_server_that_prints_a_banner_first_starts_under_the_cli(tmp_path: Path) -> None:
    script = tmp_path / "server.py"
    script.write_text('print("starting the demo server", flush=True)\n' + MCP_SERVER)
    with FakeUpstream(["the answer"]) as fake:
        proc = _cli("run", "hi", "--backend", "openai", "--base-url", fake.base_url, "--enforcement", "prompt",
                    "--mcp", f"{sys.executable} {script}", "--mcp-timeout", "30")
    assert proc.returncode == 0, proc.stderr
    assert "the answer" in proc.stdout
    assert "multiply" in json.dumps(fake.requests[0].body)  # the server's tool was offered
    assert "Traceback" not in proc.stderr and "JSONRPC" not in proc.stderr, proc.stderr
