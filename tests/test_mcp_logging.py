"""The ``mcp`` library's logs after a server has started, with a real stdio MCP server
that sends a notification no MCP client knows: the library's warning is neither hidden
nor a reason to configure the embedding program's root logger (``logging.warning(...)``
at module level runs ``logging.basicConfig()`` in a program with no root handler). The
command line hands it to its one loguru sink, named."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from agentfsm.runtime.agent import Agent
from agentfsm.testing import FakeUpstream, ScriptedBackend
from tests.test_cli_robustness import _cli

#: a FastMCP server whose tool, before it answers, writes a notification no MCP client knows
NOISY_SERVER = '''
from mcp.server.fastmcp import FastMCP

server = FastMCP("noisy")


@server.tool()
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    print('{"jsonrpc": "2.0", "method": "notifications/not_in_mcp"}', flush=True)
    return a * b


server.run()
'''
ACTION = '```json action\n{"tool": "multiply", "args": {"a": 6, "b": 7}}\n```'
WARNING = "Failed to validate notification"

#: a program that embeds agentfsm, runs a tool of the server, then configures its own logging
PROGRAM = f'''
import logging, sys
from agentfsm import Agent
from agentfsm.testing import ScriptedBackend

result = Agent(ScriptedBackend([{ACTION!r}, "42"]), mcp=[sys.argv[1]], enforcement="prompt").run("6*7?")
print("answer", result.content)
print("root handlers", logging.getLogger().handlers)
logging.basicConfig(format="mine %(levelname)s %(message)s", stream=sys.stdout)
logging.getLogger("app").warning("configured")
'''


@pytest.fixture
def server(tmp_path: Path) -> str:
    script = tmp_path / "noisy.py"
    script.write_text(NOISY_SERVER)
    return f"{sys.executable} {script}"


def test_a_library_user_keeps_an_unconfigured_root_logger(server: str, tmp_path: Path) -> None:
    # defect: the first warning of the mcp client ran logging.basicConfig(): root handlers
    # [<StreamHandler <stderr>>], and the program's own basicConfig was then ignored
    program = tmp_path / "program.py"
    program.write_text(PROGRAM)
    proc = subprocess.run([sys.executable, str(program), server], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["answer 42", "root handlers []", "mine WARNING configured"]
    assert WARNING in proc.stderr  # not hidden: Python's last resort printed it
    assert "WARNING:root:" not in proc.stderr


def test_the_warning_reaches_the_programs_handlers_named(server: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    result = Agent(ScriptedBackend([ACTION, "42"]), mcp=[server], enforcement="prompt").run("6*7?")
    assert result.content == "42"
    [record] = [r for r in caplog.records if WARNING in r.getMessage()]
    assert (record.name, record.levelno) == ("mcp.shared.session", logging.WARNING)
    assert record.pathname.endswith("session.py")  # the mcp line that logged it


def test_the_cli_logs_it_on_its_own_sink(server: str) -> None:
    with FakeUpstream([ACTION, "42"]) as fake:
        proc = _cli("run", "6*7?", "--backend", "openai", "--base-url", fake.base_url, "--enforcement", "prompt",
                    "--mcp", server)
    assert proc.returncode == 0, proc.stderr
    assert "answer: 42" in proc.stdout
    warnings = [line for line in proc.stderr.splitlines() if WARNING in line]
    assert warnings and all(line.startswith(f"WARNING: mcp.shared.session: {WARNING}") for line in warnings)
    assert "WARNING:root:" not in proc.stderr
