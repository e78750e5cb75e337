"""Claude Code, unmodified, in print mode with ANTHROPIC_BASE_URL at the proxy.

It asks for a file; the scripted upstream writes a Bash call as a json-action block,
Claude Code runs it for real, sends the tool_result back, and prints the final answer.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.clients._harness import Proxy, action, node_bin, run_client

pytestmark = pytest.mark.clients


def test_claude_code_print_mode(proxy: Proxy, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    proxy.upstream.script(
        "I will create the file.\n"
        + action("Bash", command="echo made by claude > claude.txt", description="Create claude.txt"),
        "Created claude.txt with the text 'made by claude'.",
    )
    ran = run_client(
        [node_bin("claude"), "-p", "Create a file claude.txt containing 'made by claude'.",
         "--allowedTools", "Bash"],
        env={
            "HOME": str(tmp_path / "home"),
            "ANTHROPIC_BASE_URL": proxy.url,
            "ANTHROPIC_API_KEY": "unused",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        },
        cwd=work,
    )
    assert ran.returncode == 0, ran.report(proxy)
    assert (work / "claude.txt").read_text().strip() == "made by claude", ran.report(proxy)
    assert "Created claude.txt" in ran.stdout, ran.report(proxy)
    assert len(proxy.upstream.seen) >= 2  # the call, then the answer after its result
