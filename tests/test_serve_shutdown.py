"""``agentfsm serve`` told to stop (SIGTERM: ``docker stop``, Kubernetes, systemd) with a
request under way. uvicorn waited for it with no limit, and the orchestrator's SIGKILL
after its grace period then left the request's transcript without ``run_end`` and its
client with a dropped connection. ``--shutdown-timeout`` bounds the wait: past it the
request is cancelled, its transcript ends ``cancelled`` and its client is answered (a 503
in its protocol's shape, or a stream that ends with the protocol's error event). Real
parts: ``agentfsm serve`` as a subprocess (one process and two workers), a FakeUpstream
that drips its answer, the official openai SDK as the client, a real SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import openai
import pytest

from agentfsm.runtime.transcript import read_transcript
from agentfsm.testing import FakeUpstream, drip
from tests._proxy import free_port, wait_until_serving

REPO = Path(__file__).resolve().parent.parent
GRACE = 2.0

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


def _ask(url: str, stream: bool, seen: dict[str, Any]) -> None:
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=60)
    try:
        if stream:
            for chunk in client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}],
                                                        stream=True):
                if chunk.choices and chunk.choices[0].delta.content:
                    seen.setdefault("text", []).append(chunk.choices[0].delta.content)
            seen["ended"] = "cleanly"
        else:
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
            seen["ended"] = "answered"
    except openai.APIStatusError as exc:
        seen["status"], seen["message"] = exc.status_code, exc.message
    except openai.APIError as exc:  # an error event in the stream
        seen["message"] = exc.message
    except Exception as exc:  # a dropped connection, a timeout
        seen["failed"] = repr(exc)


@pytest.mark.parametrize("workers", [1, 2], ids=["one-process", "two-workers"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_sigterm_cancels_a_request_at_the_shutdown_timeout(tmp_path: Path, workers: int, stream: bool) -> None:
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
        try:
            wait_until_serving(url, proc)
            seen: dict[str, Any] = {}
            client = threading.Thread(target=_ask, args=(url, stream, seen))
            client.start()
            deadline = time.monotonic() + 30
            while not (seen.get("text") if stream else fake.chat_requests):
                assert time.monotonic() < deadline and client.is_alive(), seen
                time.sleep(0.05)
            time.sleep(0.3)
            stopped = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=GRACE + 8)
            took = time.monotonic() - stopped
            client.join(10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert GRACE <= took < GRACE + 5, (took, err)
    assert not client.is_alive(), "the client still waits"
    assert "Traceback" not in err and "Exception in ASGI application" not in err, err
    assert seen["message"].endswith("the proxy shut down before this request finished; ask again"), seen
    if not stream:
        assert seen["status"] == 503
    (transcript,) = runs.glob("*.jsonl")
    events = read_transcript(transcript)
    assert events[-1]["type"] == "run_end" and events[-1]["status"] == "cancelled"
    assert "error" not in [e["type"] for e in events]
    if stream:  # what the client had been sent is kept, as a cut-off reply
        (output,) = [e for e in events if e["type"] == "model_output"]
        assert output["cut"] is True and output["text"].startswith("first")
