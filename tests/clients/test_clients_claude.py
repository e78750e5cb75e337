"""Claude Code, unmodified, in print mode with ANTHROPIC_BASE_URL at the proxy.

It asks for a file; the scripted upstream writes a Bash call as a json-action block,
Claude Code runs it for real, sends the tool_result back, and prints the final answer.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from tests.clients._harness import Proxy, action, node_bin, run_client

pytestmark = pytest.mark.clients

CLAUDE_ENV = {
    "ANTHROPIC_API_KEY": "unused",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
}


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
        env=CLAUDE_ENV | {"HOME": str(tmp_path / "home"), "ANTHROPIC_BASE_URL": proxy.url},
        cwd=work,
    )
    assert ran.returncode == 0, ran.report(proxy)
    assert (work / "claude.txt").read_text().strip() == "made by claude", ran.report(proxy)
    assert "Created claude.txt" in ran.stdout, ran.report(proxy)
    assert len(proxy.upstream.seen) >= 2  # the call, then the answer after its result


#: a 1x1 red PNG
RED_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
)


def test_claude_code_goes_on_after_reading_an_image(proxy: Proxy, tmp_path: Path) -> None:
    """Claude Code's Read of a picture sends an image block inside the tool_result: a
    text-only model gets a placeholder and answers (it was a 400, retried 6 times, and
    every later request carried the image). Its max_tokens (tens of thousands) does not
    fit the upstream's 32k context beside the prompt either: the proxy learns the context
    from the upstream's own error and sends what is left."""
    work = tmp_path / "work"
    work.mkdir()
    picture = work / "red.png"
    picture.write_bytes(RED_PNG)
    proxy.upstream.script(
        action("Read", file_path=str(picture)),
        "The picture red.png is one red pixel.",
        evidence="omitted: this model reads text only",
    )
    ran = run_client(
        [node_bin("claude"), "-p", "What is in red.png? Read it.", "--allowedTools", "Read"],
        env=CLAUDE_ENV | {"HOME": str(tmp_path / "home"), "ANTHROPIC_BASE_URL": proxy.url},
        cwd=work,
    )
    assert ran.returncode == 0, ran.report(proxy)
    assert "one red pixel" in ran.stdout, ran.report(proxy)
    sent = json.dumps([r.messages for r in proxy.upstream.seen])
    assert "[image (image/png) omitted: this model reads text only]" in sent, ran.report(proxy)
