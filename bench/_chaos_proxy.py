"""The proxy under chaos: ``agentfsm serve`` in its own process, with canary keys everywhere.

Every proxy the chaos run starts is the real command, started with a canary client key
and a canary upstream key, writing transcripts and stderr into the run's directory, so
that the secrets section can search every log, transcript and response of the whole run.
One test hook: a request whose text holds :data:`EXPLODE` makes the backend raise an
unexpected error (the 500 path, where tracebacks are logged).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

__all__ = ["CLIENT_KEY", "EXPLODE", "UPSTREAM_KEY", "Evidence", "ServedProxy", "rss_kib", "serve"]

CLIENT_KEY = "sk-chaos-client-canary-5f2b9e"
UPSTREAM_KEY = "sk-chaos-upstream-canary-c81d07"
#: a request holding this text makes the backend raise (a forced 500)
EXPLODE = "chaos-explode-now"

_MAIN = """
import sys
from agentfsm.backends import openai_compat

_payload = openai_compat.OpenAICompatBackend._payload

def payload(self, messages, options, stream):
    if any("%s" in m.content for m in messages):
        raise RuntimeError("chaos: the backend exploded")
    return _payload(self, messages, options, stream)

openai_compat.OpenAICompatBackend._payload = payload
from agentfsm.cli import main
sys.argv = ["agentfsm", "serve", *sys.argv[1:]]
main()
""" % EXPLODE


@dataclass
class Evidence:
    """Everything the run's proxies wrote or answered: searched for the canaries at the end."""

    root: Path
    responses: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def keep(self, response: httpx.Response | str) -> None:
        """Keep a response (body and headers) for the search."""
        text = response if isinstance(response, str) else response.text + repr(dict(response.headers))
        with self.lock:
            self.responses.append(text)

    def texts(self) -> Iterator[tuple[str, str]]:
        """(kind, text) of every stderr log, transcript and kept response."""
        for path in sorted(self.root.rglob("*")):
            if path.is_file():
                kind = "log" if path.suffix == ".txt" else "transcript"
                yield kind, path.read_text(encoding="utf-8", errors="replace")
        for text in self.responses:
            yield "response", text


@dataclass
class ServedProxy:
    """A running proxy: its URL, process and the auth headers a client needs."""

    url: str
    process: subprocess.Popen[bytes]

    @property
    def openai_headers(self) -> dict[str, str]:
        """Headers of an authorised OpenAI request."""
        return {"authorization": f"Bearer {CLIENT_KEY}"}

    @property
    def anthropic_headers(self) -> dict[str, str]:
        """Headers of an authorised Anthropic request."""
        return {"x-api-key": CLIENT_KEY, "anthropic-version": "2023-06-01"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serve(
    evidence: Evidence, name: str, upstream: str, *options: str, keyless: bool = False, transcripts: bool = True
) -> Iterator[ServedProxy]:
    """``agentfsm serve`` on a free port in front of ``upstream``; stops it afterwards
    (``keyless``: without a client key, as the proxy runs by default on loopback;
    ``transcripts``: writing one per request)."""
    port = _free_port()
    folder = evidence.root / name
    folder.mkdir(parents=True, exist_ok=True)
    client_key = [] if keyless else ["--api-key", CLIENT_KEY]
    args = [
        "--port", str(port), "--backend", "openai", "--base-url", upstream, "--model", "chaos",
        *client_key, "--upstream-api-key", UPSTREAM_KEY,
        *(["--transcripts", str(folder / "transcripts")] if transcripts else []), *options,
    ]
    env = {k: v for k, v in os.environ.items() if not k.endswith("API_KEY")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    with (folder / "stderr.txt").open("wb") as stderr:
        process = subprocess.Popen([sys.executable, "-c", _MAIN, *args], stdout=subprocess.DEVNULL, stderr=stderr, env=env)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    httpx.get(url + "/health", timeout=1)
                    break
                except httpx.TransportError:
                    if process.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"agentfsm serve did not start ({name})") from None
                    time.sleep(0.1)
            yield ServedProxy(url, process)
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def rss_kib(pid: int) -> int:
    """Resident memory of a process, in KiB (Linux /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0
