"""``agentfsm serve`` told to stop (SIGTERM: ``docker stop``, Kubernetes, systemd) with a
request under way. uvicorn waited for it with no limit, and the orchestrator's SIGKILL
after its grace period then left the request's transcript without ``run_end`` and its
client with a dropped connection. ``--shutdown-timeout`` bounds the wait: past it the
request is cancelled, its transcript ends ``cancelled`` and its client is answered (a 503
in its protocol's shape, or a stream that ends with the protocol's error event). Real
parts: ``agentfsm serve`` as a subprocess, a FakeUpstream that drips its answer, the
official SDKs as clients, a real SIGTERM: chat completions in one process and with two
workers, Anthropic messages and OpenAI Responses in one process (each whole and streamed)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from agentfsm.runtime.transcript import read_transcript
from agentfsm.server.streaming import SHUT_DOWN
from agentfsm.testing import FakeUpstream, drip
from tests._proxy import free_port, wait_until_serving
from tests._procs import reaped

REPO = Path(__file__).resolve().parent.parent
GRACE = 2.0

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


def _error(body: object) -> dict[str, Any]:
    """The error object in an SDK exception's body: OpenAI's SDK hands over the body's
    ``error``, Anthropic's the whole ``{"type": "error", "error": ...}``."""
    assert isinstance(body, dict), body
    inner = body.get("error", body)
    assert isinstance(inner, dict) and isinstance(inner.get("message"), str), body
    return inner


def _chat(url: str, stream: bool, seen: dict[str, Any]) -> None:
    messages: Any = [{"role": "user", "content": "hi"}]
    with openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=60) as client:
        try:
            if stream:
                for chunk in client.chat.completions.create(model="m", messages=messages, stream=True):
                    if chunk.choices and chunk.choices[0].delta.content:
                        seen.setdefault("text", []).append(chunk.choices[0].delta.content)
                seen["ended"] = "cleanly"
            else:
                client.chat.completions.create(model="m", messages=messages)
                seen["ended"] = "answered"
        except openai.APIStatusError as exc:
            seen["status"], seen["error"] = exc.status_code, _error(exc.body)
        except openai.APIError as exc:  # data: {"error": ...} in the stream
            seen["error"] = _error({"error": exc.body})


def _messages(url: str, stream: bool, seen: dict[str, Any]) -> None:
    messages: Any = [{"role": "user", "content": "hi"}]
    with anthropic.Anthropic(base_url=url, api_key="unused", max_retries=0, timeout=60) as client:
        try:
            if stream:
                for event in client.messages.create(model="m", max_tokens=4096, messages=messages, stream=True):
                    if event.type == "content_block_delta" and event.delta.type == "text_delta":
                        seen.setdefault("text", []).append(event.delta.text)
                seen["ended"] = "cleanly"
            else:
                client.messages.create(model="m", max_tokens=4096, messages=messages)
                seen["ended"] = "answered"
        except anthropic.APIStatusError as exc:  # a 503, or event: error in the stream (status 200)
            assert isinstance(exc.body, dict) and exc.body.get("type") == "error", exc.body
            seen["error"] = _error(exc.body)
            if not stream:
                seen["status"] = exc.status_code


def _responses(url: str, stream: bool, seen: dict[str, Any]) -> None:
    with openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=60) as client:
        try:
            if stream:
                for event in client.responses.create(model="m", input="hi", stream=True):
                    seen.setdefault("events", []).append(event.type)
                    if event.type == "response.output_text.delta":
                        seen.setdefault("text", []).append(event.delta)
                    elif event.type == "error":
                        seen["error"] = {"message": event.message, "code": event.code}
                    elif event.type == "response.failed":
                        assert event.response.error is not None
                        seen["failed"] = event.response.error.message
                seen["ended"] = "cleanly"
            else:
                client.responses.create(model="m", input="hi")
                seen["ended"] = "answered"
        except openai.APIStatusError as exc:
            seen["status"], seen["error"] = exc.status_code, _error(exc.body)


def _asking(ask: Callable[[str, bool, dict[str, Any]], None], url: str, stream: bool, seen: dict[str, Any]) -> None:
    try:
        ask(url, stream, seen)
    except Exception as exc:  # a dropped connection, a timeout, an unexpected shape
        seen["failed"] = repr(exc)


_ASK = {"chat": _chat, "messages": _messages, "responses": _responses}
#: chat completions in one process and with two workers; the other endpoints in one process
_CASES = [
    pytest.param(endpoint, workers, stream, id=f"{endpoint}-{'streamed' if stream else 'whole'}-{workers}")
    for endpoint, workers in (("chat", 1), ("chat", 2), ("messages", 1), ("responses", 1))
    for stream in (False, True)
]


@pytest.mark.parametrize(("endpoint", "workers", "stream"), _CASES)
def test_sigterm_cancels_a_request_at_the_shutdown_timeout(
    tmp_path: Path, endpoint: str, workers: int, stream: bool
) -> None:
    port, runs = free_port(), tmp_path / "runs"
    url = f"http://127.0.0.1:{port}"
    # whole: the upstream answers nothing for minutes; streamed: a first word, then a byte a second
    slow = drip(1.0, forever=True) if not stream else drip(0.002, "first " + "word " * 400)
    with FakeUpstream([slow]) as fake:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agentfsm", "serve", "--backend", "openai", "--base-url", fake.base_url,
             "--model", "m", "--port", str(port), "--transcripts", str(runs), "--workers", str(workers),
             "--shutdown-timeout", str(GRACE)],
            cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, stderr=subprocess.PIPE, text=True)
        with reaped(proc):
            wait_until_serving(url, proc, 60)  # two workers start slowly on a loaded machine
            seen: dict[str, Any] = {}
            client = threading.Thread(target=_asking, args=(_ASK[endpoint], url, stream, seen))
            client.start()
            deadline = time.monotonic() + 30
            while not (seen.get("text") if stream else fake.chat_requests):
                assert time.monotonic() < deadline and client.is_alive(), seen
                time.sleep(0.05)
            time.sleep(0.3)
            stopped = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=GRACE + 15)
            took = time.monotonic() - stopped
            client.join(10)
    assert GRACE <= took < GRACE + 10, (took, err)  # the stop waited, and not for the upstream (minutes)
    assert not client.is_alive(), "the client still waits"
    assert "Traceback" not in err and "Exception in ASGI application" not in err, err
    assert seen.get("error", {}).get("message") == SHUT_DOWN, seen
    if not stream:
        assert seen["status"] == 503, seen
    elif endpoint == "responses":  # the error event, then the response failed, as the last events
        assert seen["events"][-2:] == ["error", "response.failed"] and seen["failed"] == SHUT_DOWN, seen
    (transcript,) = runs.glob("*.jsonl")
    events = read_transcript(transcript)
    assert events[-1]["type"] == "run_end" and events[-1]["status"] == "cancelled"
    assert "error" not in [e["type"] for e in events]
    if stream:  # what the client had been sent is kept, as a cut-off reply
        (output,) = [e for e in events if e["type"] == "model_output"]
        assert output["cut"] is True and output["text"].startswith("first")


@pytest.mark.parametrize("workers", [1, 2], ids=["one-process", "two-workers"])
def test_sigterm_while_serve_starts_stops_it_at_once(workers: int) -> None:
    """Told to stop as it starts (its one line said, uvicorn or the workers not yet up):
    serve stops within seconds, by the signal or with 0, and says nothing more."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentfsm", "serve", "--backend", "openai", "--base-url", "http://127.0.0.1:9/v1",
         "--model", "m", "--port", str(free_port()), "--workers", str(workers)],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, stderr=subprocess.PIPE, text=True)
    with reaped(proc):
        assert proc.stderr is not None
        said = proc.stderr.readline()
        assert said.startswith("agentfsm proxy on http://127.0.0.1:"), said
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode in (0, -signal.SIGTERM), (proc.returncode, err)
    assert err.strip() == "", err


@pytest.mark.parametrize("sent", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "ctrl-c"])
@pytest.mark.parametrize("workers", [1, 2], ids=["one-process", "two-workers"])
def test_a_stopped_serve_exits_alike_with_one_process_or_workers(workers: int, sent: signal.Signals) -> None:
    """One process ended by SIGTERM (uvicorn raises the signal again: a shell says 143) and
    returned 0 after Ctrl-C; with --workers, uvicorn's supervisor returned 0 after either,
    so a supervisor could not tell a stop from a clean end. Both now end alike."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentfsm", "serve", "--backend", "openai", "--base-url", "http://127.0.0.1:9/v1",
         "--model", "m", "--port", str(port), "--workers", str(workers)],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # Ctrl-C as in a terminal
    with reaped(proc):
        wait_until_serving(f"http://127.0.0.1:{port}", proc, 60)
        proc.send_signal(sent)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == (-signal.SIGTERM if sent == signal.SIGTERM else 0), (proc.returncode, err)
    assert "Traceback" not in err, err
