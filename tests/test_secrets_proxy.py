"""No key in any log, transcript or response: the proxy run as ``agentfsm serve``, forced to fail.

Defect: every 500 printed a traceback with local variables, ``Settings(api_key=...)`` and
the ``serve`` command's own arguments among them, at the default log level.
"""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from loguru import logger
from pydantic import SecretStr

from agentfsm.cli._logging import configure_logging, redact, register_secret
from agentfsm.server.exchange import Settings
from agentfsm.testing import FakeUpstream
from tests._proxy import TOOLS_ANTHROPIC, TOOLS_OPENAI, free_port, wait_until_serving

CLIENT_KEY = "sk-canary-client-6b1f0d2e"
UPSTREAM_KEY = "sk-canary-upstream-93a4c7"

# the backend raises an unexpected error on every request: the 500 path
_MAIN = """
import sys
from agentfsm.backends import openai_compat

def explode(self, *args, **kwargs):
    raise RuntimeError("backend exploded")

openai_compat.OpenAICompatBackend._payload = explode
from agentfsm.cli import main
sys.argv = ["agentfsm", "serve", *sys.argv[1:]]
main()
"""


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path, Path]]:
    """``agentfsm serve`` with both canary keys and transcripts; yields (url, stderr file, transcripts)."""
    port = free_port()
    transcripts = tmp_path / "transcripts"
    stderr_path = tmp_path / "stderr.txt"
    with FakeUpstream(["unused"]) as fake, stderr_path.open("w") as stderr:
        args = [
            "--port", str(port), "--backend", "openai", "--base-url", fake.base_url, "--model", "m",
            "--api-key", CLIENT_KEY, "--upstream-api-key", UPSTREAM_KEY,
            "--transcripts", str(transcripts),
        ]
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        env.pop("AGENTFSM_LOG_LEVEL", None)  # the default level, where the leak was
        proc = subprocess.Popen([sys.executable, "-c", _MAIN, *args], stderr=stderr, env=env)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_until_serving(url, proc)
            yield url, stderr_path, transcripts
        finally:
            proc.terminate()
            proc.wait(timeout=20)


def test_a_500_leaks_neither_key_to_stderr_transcripts_or_the_response(
    served: tuple[str, Path, Path],
) -> None:
    url, stderr_path, transcripts = served
    bodies: list[str] = []
    statuses: list[int] = []
    user = [{"role": "user", "content": "weather in Paris?"}]
    for stream in (False, True):
        openai = {"model": "m", "messages": user, "tools": TOOLS_OPENAI, "stream": stream}
        anthropic = {**openai, "tools": TOOLS_ANTHROPIC, "max_tokens": 50}
        for path, body, auth in (
            ("/v1/chat/completions", openai, {"authorization": f"Bearer {CLIENT_KEY}"}),
            ("/v1/messages", anthropic, {"x-api-key": CLIENT_KEY, "anthropic-version": "2023-06-01"}),
        ):
            response = httpx.post(url + path, json=body, headers=auth, timeout=20)
            statuses.append(response.status_code)
            bodies.append(response.text + json.dumps(dict(response.headers)))
    # a wrong key echoes nothing back either
    wrong = httpx.post(url + "/v1/chat/completions", json={}, headers={"authorization": "Bearer sk-wrong"})
    assert wrong.status_code == 401
    bodies.append(wrong.text)
    time.sleep(0.3)  # let the last log lines reach the file
    stderr = stderr_path.read_text()
    assert statuses.count(500) >= 2  # the forced failures did happen (streams may fail in-band) ...
    assert stderr.count("RuntimeError: backend exploded") >= 2  # ... and were logged with a traceback
    logs = [stderr, *bodies, *(p.read_text() for p in transcripts.glob("*.jsonl"))]
    assert len(logs) > len(bodies) + 1  # transcripts were written
    for canary in (CLIENT_KEY, UPSTREAM_KEY):
        assert [text[:200] for text in logs if canary in text] == []
    assert "Settings(" not in stderr  # no local variables at all


def test_settings_and_its_repr_hold_no_key() -> None:
    settings = Settings(api_key=SecretStr(CLIENT_KEY))
    assert CLIENT_KEY not in repr(settings)
    assert settings.api_key is not None and settings.api_key.get_secret_value() == CLIENT_KEY


def test_every_sink_redacts_registered_secrets_and_credential_values() -> None:
    register_secret(UPSTREAM_KEY)
    ours = io.StringIO()
    theirs: list[str] = []
    sink = configure_logging("INFO", stream=ours)
    # a sink added later, by a user, gets redacted messages too (the patcher is global)
    user_sink = logger.add(lambda m: theirs.append(str(m)), level="INFO", format=lambda _: "{message}\n")
    logger.enable("agentfsm")
    try:
        logger.info("calling upstream with key {}", UPSTREAM_KEY)
        logger.info("headers: Authorization: Bearer sk-not-registered-1 x-api-key: sk-not-registered-2")
        try:
            key = UPSTREAM_KEY  # noqa: F841  (a local the traceback must not show)
            raise ValueError(f"upstream refused {UPSTREAM_KEY}")
        except ValueError:
            logger.exception("failed")
    finally:
        logger.remove(user_sink)
        logger.remove(sink)
        logger.add(sys.stderr)  # loguru's own default, as the rest of the suite had it
    text = ours.getvalue()
    assert "ValueError" in text and "calling upstream with key ***" in text
    for captured in (text, "".join(theirs)):
        assert UPSTREAM_KEY not in captured
        assert "sk-not-registered" not in captured
    assert redact(f"Bearer {UPSTREAM_KEY}") == "Bearer ***"


def test_uvicorns_own_log_records_are_redacted_too() -> None:
    register_secret(CLIENT_KEY)
    logger.remove(configure_logging("WARNING", stream=io.StringIO()))
    logger.add(sys.stderr)  # loguru's own default again, as the rest of the suite had it
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(self.format(record))

    std = logging.getLogger("uvicorn.error")
    handler = Collect()
    std.addHandler(handler)
    try:
        try:
            raise RuntimeError(f"upstream said {CLIENT_KEY}")
        except RuntimeError:
            std.exception("Exception in ASGI application with %s", CLIENT_KEY)
    finally:
        std.removeHandler(handler)
    text = "\n".join(lines)
    assert "RuntimeError" in text and "Exception in ASGI application" in text
    assert CLIENT_KEY not in text
