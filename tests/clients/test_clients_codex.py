"""Codex CLI, unmodified, in exec mode with the proxy as a custom Responses provider.

It asks for a file; the scripted upstream writes a shell call as a json-action block,
Codex runs it for real, sends the result back, and prints the final answer.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.clients._harness import Proxy, Ran, action, node_bin, run_client

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


#: a model name Codex knows: it then offers create_goal, and apply_patch as a custom (freeform) tool
KNOWN_MODEL = "gpt-5.5"


def _codex(proxy: Proxy, tmp_path: Path, prompt: str, *, model: str = KNOWN_MODEL, extra: str = "") -> tuple[Ran, Path]:
    work = tmp_path / "work"
    work.mkdir()
    home = tmp_path / "codex-home"
    home.mkdir()
    config = CODEX_CONFIG.format(url=proxy.url).replace('model = "fake-model"', f'model = "{model}"')
    (home / "config.toml").write_text(config + extra)
    ran = run_client(
        [node_bin("codex"), "exec", "--skip-git-repo-check", "--sandbox", "workspace-write", prompt],
        env={"CODEX_HOME": str(home), "AGENTFSM_CLIENT_KEY": "unused", "HOME": str(tmp_path)},
        cwd=work,
    )
    return ran, work


#: a command far longer than 512 tokens (the cap the proxy used to send upstream)
LONG_TEXT = " ".join(f"line{i}" for i in range(700))


def test_codex_create_goal_then_a_long_command(proxy: Proxy, tmp_path: Path) -> None:
    """After create_goal Codex sends a function_call_output with no call_id (its own
    bookkeeping): it was refused with a 400 and Codex aborted. Then a command of ~1,000
    tokens, which the old 512-token cap cut (Codex: "Incomplete response returned")."""
    proxy.upstream.script(
        action("create_goal", objective="Write long.txt"),
        action("exec_command", cmd=f"printf '%s' '{LONG_TEXT}' > long.txt"),
        "Wrote long.txt.",
    )
    ran, work = _codex(proxy, tmp_path, "Set a goal to write long.txt, then write it.")
    assert ran.returncode == 0, ran.report(proxy)
    assert (work / "long.txt").read_text() == LONG_TEXT, ran.report(proxy)
    assert "Wrote long.txt." in ran.stdout, ran.report(proxy)
    assert all("max_tokens" not in r.body for r in proxy.upstream.seen)
    assert any("goal_objective: Write long.txt" in r.messages[0]["content"] for r in proxy.upstream.seen)


def test_codex_apply_patch_is_offered_and_applied(proxy: Proxy, tmp_path: Path) -> None:
    """apply_patch is a custom (freeform) tool for models Codex knows: it was dropped
    (x-agentfsm-ignored: tools.custom) while Codex's instructions demanded it."""
    patch = "*** Begin Patch\n*** Add File: patched.txt\n+made by apply_patch\n*** End Patch\n"
    proxy.upstream.script(action("apply_patch", input=patch), "Added patched.txt.")
    ran, work = _codex(proxy, tmp_path, "Create patched.txt containing 'made by apply_patch'.")
    assert ran.returncode == 0, ran.report(proxy)
    assert (work / "patched.txt").read_text() == "made by apply_patch\n", ran.report(proxy)
    assert "Added patched.txt." in ran.stdout, ran.report(proxy)
    assert "- apply_patch" in proxy.upstream.seen[0].messages[0]["content"]


NO_RETRIES = "request_max_retries = 0\nstream_max_retries = 0\n"


def test_codex_sees_a_spent_budget_as_a_failure_not_an_answer(proxy: Proxy, tmp_path: Path) -> None:
    """The model keeps calling a tool that is not offered: the budget is spent with no prose.
    Codex got an empty answer and exited 0 having done nothing; now it gets the give-up."""
    proxy.upstream.script(action("search_the_web", query="anything"))
    ran, work = _codex(proxy, tmp_path, "Create a file nothing.txt.", extra=NO_RETRIES)
    assert ran.returncode != 0, ran.report(proxy)  # Codex words a 500 its own way ("high demand")
    said = proxy.log.read_text()  # the line names the model entry and its backend (578c603)
    assert "RetryBudgetExceeded -> 500 (model " in said and "): no acceptable reply after 4 attempts" in said
    assert list(work.iterdir()) == []
