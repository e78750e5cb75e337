"""Codex CLI, unmodified, in exec mode with the proxy as a custom Responses provider.

It asks for a file; the scripted upstream writes a shell call as a json-action block,
Codex runs it for real, sends the result back, and prints the final answer.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.clients._harness import Proxy, action, node_bin, run_client

pytestmark = pytest.mark.clients


CODEX_CONFIG = """\
model = "fake-model"
model_provider = "agentfsm"

[model_providers.agentfsm]
name = "agentfsm"
base_url = "{url}/v1"
wire_api = "responses"
env_key = "AGENTFSM_CLIENT_KEY"
"""


def test_codex_exec(proxy: Proxy, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    home = tmp_path / "codex-home"
    home.mkdir()
    (home / "config.toml").write_text(CODEX_CONFIG.format(url=proxy.url))
    proxy.upstream.script(
        action("exec_command", cmd="echo made by codex > codex.txt"),
        "Created codex.txt with the text 'made by codex'.",
    )
    ran = run_client(
        [node_bin("codex"), "exec", "--skip-git-repo-check",
         "--sandbox", "workspace-write",
         "Create a file codex.txt containing 'made by codex'."],
        env={"CODEX_HOME": str(home), "AGENTFSM_CLIENT_KEY": "unused", "HOME": str(tmp_path)},
        cwd=work,
    )
    assert ran.returncode == 0, ran.report(proxy)
    assert (work / "codex.txt").read_text().strip() == "made by codex", ran.report(proxy)
    assert "Created codex.txt" in ran.stdout, ran.report(proxy)
    assert len(proxy.upstream.seen) >= 2
