"""``agentfsm calibrate`` and ``serve --models`` as a demanding user meets them: the real CLI
in a subprocess against a scripted upstream on 127.0.0.1, a profile written and then served
by a real ``agentfsm serve --models``, and the official SDKs in front of it.

What is held here: a key given to calibrate never lands in the profile, its table or the
console; an output path that cannot be written is refused before any model call, and a
profile is replaced whole or not at all; Ctrl-C says what it interrupted and leaves the
profile as it was; an entry whose settings its backend cannot run stops serve at start-up;
a mistake in a profile names the profile.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentfsm.core.profile import Profile
from agentfsm.eval.calibrate import load_items
from agentfsm.testing import FakeUpstream, ReceivedRequest
from agentfsm.testing.fake_script import FakeReply
from tests._followers import follower, item_answers

ITEMS = load_items()
KEY = "sk-calib-audit-secret-0042"
URL_KEY = "url-query-secret-9931"


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    """A model that follows the command dialect only."""
    with FakeUpstream(follower("command", item_answers(ITEMS)), keep_requests=False) as fake:
        yield fake


def _calibrate(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentfsm", "calibrate", *args], capture_output=True, text=True, timeout=timeout
    )


def _upstream_args(fake: FakeUpstream, model: str = "cmd") -> list[str]:
    return ["--backend", "openai", "--base-url", fake.base_url, "--model", model]


def test_a_key_given_to_calibrate_is_in_no_file_it_writes_nor_on_the_console(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    output = tmp_path / "p.json"
    base_url = f"{upstream.base_url}?api-version=1&key={URL_KEY}"
    done = _calibrate("--backend", "openai", "--base-url", base_url, "--model", "cmd",
                      "--upstream-api-key", KEY, "-o", str(output))
    assert done.returncode == 0, done.stderr
    entry = Profile.from_json(json.loads(output.read_text())).for_model("openai:cmd")
    # the command is still there to read and rerun, with each key replaced
    assert "--upstream-api-key '***'" in entry.command and "key=***" in entry.command
    for text in (output.read_text(), output.with_suffix(".md").read_text(), done.stdout, done.stderr):
        assert KEY not in text and URL_KEY not in text
