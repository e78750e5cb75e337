"""The end-to-end client suite: real clients, unmodified, against ``agentfsm serve``.

One ``agentfsm serve`` subprocess (on a free port) serves the whole suite, in front of
a :class:`~agentfsm.testing.FakeUpstream` that writes what a text-only model would:
a fenced ```json action``` block, then, once the tool result is in the conversation,
a final answer. Each test sets the steps it needs with :meth:`Upstream.script`; the
step answered is the number of assistant turns the upstream sees, so a client's
retries or side requests never shift the script. With ``evidence``, a later step is
only given when the tool's result is in the prompt (otherwise the model says it is
missing), so a final answer proves the result made the round trip.

The upstream keeps to limits as a model does: a reply longer than the request's
``max_tokens`` is cut there (``finish_reason: length``), and a request that does not fit
its context of :data:`UPSTREAM_CONTEXT` tokens gets OpenAI's own 400 ("6758 in the
messages, 128000 in the completion"); the proxy is not told that context. Every answer
the proxy gives is in a transcript, and no test may leave a ``final`` event with
nothing in it (an empty 200).

The Node clients (Claude Code, Codex CLI, the Vercel AI SDK) are installed by
``make clients`` into ``.clients/`` from ``tests/clients/js/package-lock.json``; the
Python ones come with the ``clients`` extra. Every client runs as a subprocess and a
failed assertion shows its exit status, stdout and stderr.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from agentfsm.runtime.transcript import read_transcript
from agentfsm.testing import FakeUpstream, ReceivedRequest
from tests._proxy import free_port, wait_until_serving

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
NODE_MODULES = ROOT / ".clients" / "node_modules"
#: what every client subprocess may take, at most (seconds)
CLIENT_TIMEOUT = 120
#: the scripted model's context window (the proxy learns it from the upstream's errors)
UPSTREAM_CONTEXT = 32768


def action(tool: str, **arguments: object) -> str:
    """One json-action block, as a model following the contract writes it."""
    return "```json action\n" + json.dumps({"tool": tool, "parameters": arguments}) + "\n```"


@dataclass
class Upstream:
    """The scripted text-only model behind the proxy."""

    fake: FakeUpstream | None = None
    steps: list[str] = field(default_factory=list)
    evidence: str | None = None
    mark: int = 0

    def script(self, *steps: str, evidence: str | None = None) -> None:
        """Answer with ``steps[n]`` where ``n`` counts the assistant turns sent (last step after)."""
        assert self.fake is not None
        self.steps = list(steps)
        self.evidence = evidence
        self.mark = len(self.fake.requests)

    def answer(self, request: ReceivedRequest) -> str:
        """The step for one upstream request."""
        turns = sum(1 for m in request.messages if m.get("role") == "assistant")
        if not self.steps:
            return "No script is set."
        if turns and self.evidence is not None and self.evidence not in json.dumps(request.messages):
            return f"MISSING TOOL RESULT: {self.evidence!r} is not in the prompt."
        return self.steps[min(turns, len(self.steps) - 1)]

    @property
    def seen(self) -> list[ReceivedRequest]:
        """The chat requests the proxy sent upstream since the last :meth:`script`."""
        assert self.fake is not None
        return [r for r in self.fake.requests[self.mark:] if r.path.endswith("/chat/completions")]


@dataclass(frozen=True)
class Proxy:
    """``agentfsm serve`` on 127.0.0.1 and the scripted upstream behind it."""

    url: str
    upstream: Upstream
    log: Path
    #: where the proxy writes one transcript per request
    transcripts: Path

    def empty_finals(self, skip: set[Path]) -> list[str]:
        """The transcripts (other than ``skip``) whose request ended with an empty answer."""
        found = []
        for path in sorted(self.transcripts.glob("*.jsonl")):
            if path in skip:
                continue
            events = read_transcript(path)
            calls = any(e["type"] == "tool_call" for e in events)
            if not calls and any(e["type"] == "final" and not str(e.get("content") or "").strip() for e in events):
                found.append(path.name)
        return found

    @property
    def openai_url(self) -> str:
        """The OpenAI base URL (``.../v1``)."""
        return f"{self.url}/v1"


@pytest.fixture(scope="session")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxy]:
    """One proxy subprocess for the suite (its log is shown when it fails to start)."""
    holder = Upstream()
    fake = FakeUpstream(holder.answer, honour_max_tokens=True, context_tokens=UPSTREAM_CONTEXT)
    holder.fake = fake
    log = tmp_path_factory.mktemp("proxy") / "serve.log"
    transcripts = tmp_path_factory.mktemp("transcripts")
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("AGENTFSM_API_KEY", None)
    with fake, log.open("w") as sink:
        server = subprocess.Popen(
            [sys.executable, "-m", "agentfsm", "serve", "--backend", "openai",
             "--base-url", fake.base_url, "--model", "fake-model", "--port", str(port),
             "--transcripts", str(transcripts)],
            stdout=sink, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            try:
                wait_until_serving(url, server, timeout=60)
            except RuntimeError:
                pytest.fail(f"agentfsm serve did not start:\n{log.read_text()}")
            yield Proxy(url, holder, log, transcripts)
        finally:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


def node_bin(name: str) -> str:
    """A Node client's executable from ``.clients/`` (a clear failure when not installed)."""
    path = NODE_MODULES / ".bin" / name
    if not path.exists():
        pytest.fail(f"{path} is missing: run `make clients` (part of `make test`) to install the Node clients")
    return str(path)


@dataclass(frozen=True)
class Ran:
    """A finished client run."""

    returncode: int
    stdout: str
    stderr: str

    def report(self, proxy: Proxy | None = None) -> str:
        """Everything the client said (and the proxy's log), for an assertion message."""
        text = f"exit {self.returncode}\n--- stdout ---\n{self.stdout[-6000:]}\n--- stderr ---\n{self.stderr[-6000:]}"
        if proxy is not None:
            text += f"\n--- agentfsm serve ---\n{proxy.log.read_text()[-4000:]}"
        return text

    def by_mode(self) -> dict[str, dict[str, object]]:
        """The result line of each mode a Python client script ran (see py/_common.py)."""
        out: dict[str, dict[str, object]] = {}
        for line in self.stdout.splitlines():
            if line.startswith('{"mode"'):
                value = json.loads(line)
                out[str(value["mode"])] = value
        return out

    def last_json(self) -> dict[str, object]:
        """The last stdout line that is a JSON object (what the client scripts print)."""
        for line in reversed(self.stdout.splitlines()):
            if line.startswith("{"):
                value = json.loads(line)
                assert isinstance(value, dict)
                return value
        raise AssertionError(f"no JSON result line in the client's output\n{self.report()}")


def run_client(
    argv: Sequence[str], *, env: dict[str, str], cwd: Path, timeout: float = CLIENT_TIMEOUT
) -> Ran:
    """Run a client to the end with stdin closed; its output is kept for the assertion."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    try:
        done = subprocess.run(
            list(argv), env={**base, **env}, cwd=cwd, stdin=subprocess.DEVNULL,
            capture_output=True, text=True, timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        return Ran(-1, out, err + f"\n(timed out after {timeout} s)")
    return Ran(done.returncode, done.stdout, done.stderr)


@dataclass(frozen=True)
class Group:
    """One run of a Python client script over several modes, and what the upstream saw."""

    ran: Ran
    seen: list[ReceivedRequest]
    proxy: Proxy

    def result(self, mode: str) -> dict[str, object]:
        """One mode's result (an assertion error with the client's output when it failed)."""
        result = self.ran.by_mode().get(mode)
        assert result is not None, f"no result for {mode}\n{self.ran.report(self.proxy)}"
        assert "error" not in result, f"{mode} failed:\n{result['error']}\n{self.ran.report(self.proxy)}"
        return result


@pytest.fixture(scope="session")
def run_group(proxy: Proxy, tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Group]:
    """``run_group(script, modes, steps, evidence=...)``: one process for all modes, run once a session."""
    cache: dict[tuple[object, ...], Group] = {}

    def run(script: str, modes: Sequence[str], steps: Sequence[str], evidence: str | None = None) -> Group:
        key = (script, tuple(modes), tuple(steps), evidence)
        if key not in cache:
            proxy.upstream.script(*steps, evidence=evidence)
            ran = run_python(script, proxy, tmp_path_factory.mktemp("client"), *modes)
            cache[key] = Group(ran, proxy.upstream.seen, proxy)
        return cache[key]

    return run


def run_python(script: str, proxy: Proxy, cwd: Path, *args: str) -> Ran:
    """One of the Python client scripts in ``tests/clients/py`` against the proxy."""
    env = {
        "AGENTFSM_URL": proxy.url,
        "PYTHONPATH": str(ROOT),
        "PYTHONWARNINGS": "ignore",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # no download at import
    }
    return run_client([sys.executable, str(HERE / "py" / script), *args], env=env, cwd=cwd)


def run_node(script: str, proxy: Proxy, cwd: Path, *args: str) -> Ran:
    """One of the Node client scripts in ``tests/clients/js`` against the proxy."""
    node = shutil.which("node")
    assert node is not None, "node is not on PATH"
    node_bin("claude")  # the installed tree exists
    env = {"AGENTFSM_URL": proxy.url, "NODE_PATH": str(NODE_MODULES)}
    return run_client([node, str(HERE / "js" / script), *args], env=env, cwd=cwd)
