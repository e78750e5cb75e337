"""Helpers for the proxy tests: the proxy on 127.0.0.1 in a thread, an upstream backend for it.

:func:`serve_command` runs the real ``agentfsm serve`` in a subprocess instead.
The fixtures ``fake`` (an empty scripted upstream) and ``base`` (the proxy's URL in front
of it) are used by importing them into a test module.

With ``AGENTFSM_TEST_SERVE_WORKERS=N`` (N > 1), :func:`proxy` serves an OpenAI-compatible
upstream backend through ``agentfsm serve --workers N --models FILE`` in a subprocess (the
backend and settings written as a models file of one entry that answers every name, and
options), so the proxy tests run against N worker processes; a backend or setting a
models file cannot describe (a scripted backend, a tracer) is served in a thread as usual.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import uvicorn

from agentfsm.backends import OpenAICompatBackend, Timeouts
from agentfsm.core.backend import Backend
from agentfsm.server.app import create_app
from agentfsm.server.models import ModelTable
from agentfsm.testing import FakeUpstream, empty_answer
from agentfsm.testing.answers import ANSWER_PATHS

__all__ = [
    "EMPTY_ANSWERS",
    "TOOLS_ANTHROPIC",
    "TOOLS_OPENAI",
    "Served",
    "action",
    "base",
    "fake",
    "free_port",
    "proxy",
    "serve_command",
    "upstream_backend",
    "wait_idle",
    "wait_until_serving",
    "watch_answers",
    "wire_snapshot",
    "wire_text",
]

#: the tool every scripted conversation offers, in both protocols' shapes
_WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
    "required": ["city"],
}
_TIME_SCHEMA = {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]}
TOOLS_OPENAI: list[Any] = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city.", "parameters": _WEATHER_SCHEMA}},
    {"type": "function", "function": {"name": "get_time", "description": "Time in a zone.", "parameters": _TIME_SCHEMA}},
]
TOOLS_ANTHROPIC: list[Any] = [
    {"name": "get_weather", "description": "Weather in a city.", "input_schema": _WEATHER_SCHEMA},
    {"name": "get_time", "description": "Time in a zone.", "input_schema": _TIME_SCHEMA},
]


def action(tool: str, **arguments: Any) -> str:
    """One json-action block, as a model following the contract writes it."""
    import json

    return "```json action\n" + json.dumps({"tool": tool, "parameters": arguments}) + "\n```"


def upstream_backend(
    fake: FakeUpstream, *, total: float = 10.0, read: float = 5.0, retries: int = 0
) -> OpenAICompatBackend:
    """A backend on the fake upstream: no transport retries, short timeouts."""
    return OpenAICompatBackend(
        fake.base_url,
        model="fake-model",
        api_key="sk-upstream-secret",
        timeout=Timeouts(connect=2.0, read=read, total=total),
        max_retries=retries,
        backoff=0.01,
        json_schema_mode="off",
    )


#: every 200 answer with no assistant message (no text, no call) that a proxy started by
#: :func:`proxy` sent, as "PATH: why"; tests/conftest.py fails the test that caused one
EMPTY_ANSWERS: list[str] = []


def watch_answers(app: Any) -> Any:
    """``app``, with each of its 200 answers checked by :func:`agentfsm.testing.empty_answer`
    (a failure goes to :data:`EMPTY_ANSWERS`)."""

    async def watched(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST" or not scope["path"].startswith(ANSWER_PATHS):
            await app(scope, receive, send)
            return
        status = 0
        body: list[bytes] = []

        async def capture(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                body.append(message.get("body", b""))
            await send(message)

        await app(scope, receive, capture)
        why = empty_answer(scope["path"], b"".join(body)) if status == 200 else None
        if why is not None:
            EMPTY_ANSWERS.append(f"{scope['path']}: {why}")

    return watched


#: worker processes for :func:`proxy` (0: the proxy runs in a thread of the test process)
SERVE_WORKERS = int(os.environ.get("AGENTFSM_TEST_SERVE_WORKERS") or 0)
#: create_app's settings and the serve options that give them
_SERVE_FLAGS = {
    "api_key": "--api-key", "transcripts_dir": "--transcripts", "request_timeout": "--request-timeout",
    "max_body_bytes": "--max-body-bytes", "body_timeout": "--body-timeout", "max_tools": "--max-tools",
    "client_share": "--client-share", "stream_prose": "--stream-prose",
}


def _workers_command(backend: Backend | ModelTable, settings: dict[str, Any], folder: Path) -> list[str] | None:
    """``agentfsm serve --workers N --models FILE ...`` for ``backend`` and ``settings``
    (None when a models file and the options cannot describe them)."""
    from agentfsm.core.config import DEFAULTS, RunConfig

    if not isinstance(backend, OpenAICompatBackend) or backend._prefill or backend._extra_body:
        return None
    policy = backend._policy
    if policy.max_retries and policy.backoff != 0.5:
        return None
    config: RunConfig = settings.pop("config", DEFAULTS)
    run = {k: v for k, v in settings.items() if k in RunConfig.__dataclass_fields__}
    name = settings.pop("model_name", None) or backend.name
    metrics = settings.pop("metrics", False)
    if set(settings) - set(run) - set(_SERVE_FLAGS):
        return None
    defaults = DEFAULTS.as_dict()  # plain values both sides (tool_choice as spelled)
    fields = {k: v for k, v in config.replace(**run).as_dict().items() if v != defaults[k]}
    lines = [f'fallback = "{name}"', f'[models."{name}"]', f'base_url = "{backend.base_url}"', f'model = "{backend.model}"',
             f'json_schema_mode = "{backend.json_schema_mode}"', f"max_retries = {policy.max_retries}",
             f"timeout = {backend.timeouts.total}", f"read_timeout = {backend.timeouts.read}"]
    if backend.context_tokens is not None:
        lines.append(f"context_tokens = {backend.context_tokens}")
    if backend._key is not None:
        os.environ["AGENTFSM_TEST_UPSTREAM_KEY"] = backend._key.get_secret_value()
        lines.append('api_key_env = "AGENTFSM_TEST_UPSTREAM_KEY"')
    lines += [f"{k} = {orjson.dumps(v).decode()}" for k, v in fields.items()]
    models = folder / "models.toml"
    models.write_text("\n".join(lines) + "\n", encoding="utf-8")
    command = [sys.executable, "-m", "agentfsm", "serve", "--workers", str(SERVE_WORKERS), "--models", str(models)]
    for key, value in settings.items():
        if key in _SERVE_FLAGS and value is not None:
            command += [_SERVE_FLAGS[key], str(value)]
    return command + (["--metrics"] if metrics else [])


@contextmanager
def _served_by_workers(command: list[str]) -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen([*command, "--port", str(port)], stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(url, process, timeout=120)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=60)


@contextmanager
def proxy(backend: Backend | ModelTable, *, http: Any = "auto", **settings: Any) -> Iterator[str]:
    """Run the proxy for ``backend`` on a free port; yields ``http://127.0.0.1:PORT``.
    Every answer it sends is checked for an empty assistant message (:func:`watch_answers`).
    ``http``: uvicorn's HTTP protocol (``agentfsm serve`` runs a guarded one). With
    :data:`SERVE_WORKERS`, an upstream backend is served by worker processes instead
    (each with serve's guarded protocol)."""
    if SERVE_WORKERS > 1 and http == "auto":
        with tempfile.TemporaryDirectory() as folder:
            command = _workers_command(backend, dict(settings), Path(folder))
            if command is not None:
                with _served_by_workers(command) as url:
                    yield url
                return
    app = watch_answers(create_app(backend, **settings))
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", ws="none", lifespan="on", http=http)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="agentfsm-proxy", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the proxy did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=20)


@pytest.fixture
def fake() -> Iterator[FakeUpstream]:
    """An empty scripted upstream: a test enqueues the replies it needs."""
    with FakeUpstream([]) as upstream:
        yield upstream


@pytest.fixture
def base(fake: FakeUpstream) -> Iterator[str]:
    """The proxy's URL, in front of ``fake``."""
    with proxy(upstream_backend(fake)) as url:
        yield url


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_idle(fake: FakeUpstream) -> None:
    """Wait (bounded) until the fake has no request in flight."""
    deadline = time.monotonic() + 15
    while fake.in_flight and time.monotonic() < deadline:
        time.sleep(0.02)


def wait_until_serving(url: str, process: subprocess.Popen[Any], timeout: float = 30) -> None:
    """Poll ``url/health`` until it answers 200; RuntimeError if ``process`` exits first
    or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("agentfsm serve did not start")
        time.sleep(0.1)


@dataclass
class Served:
    """A running ``agentfsm serve``: its URL, and its stderr once it has been stopped."""

    url: str
    stderr: bytes = b""


@contextmanager
def serve_command(
    upstream: str, transcripts: Path, *, env: Mapping[str, str] | None = None, cwd: Path | None = None,
    options: tuple[str, ...] = (),
) -> Iterator[Served]:
    """``agentfsm serve`` in a subprocess, in front of the OpenAI-compatible ``upstream``,
    writing transcripts to ``transcripts`` (more serve ``options`` after); stopped (and its
    stderr kept) on exit."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "agentfsm", "serve", "--port", str(port), "--backend", "openai",
         "--base-url", upstream, "--model", "fake-model", "--transcripts", str(transcripts), *options],
        env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    served = Served(f"http://127.0.0.1:{port}")
    try:
        wait_until_serving(served.url, process)
        yield served
    finally:
        process.terminate()
        _, served.stderr = process.communicate(timeout=20)


def wire_text(text: str) -> str:
    """A wire payload with its minted ids, clock values and token counts replaced by
    placeholders (ids of every protocol: ``call_``, ``fc_``, ``msg_``, ``resp_``,
    ``toolu_``, ``chatcmpl-``)."""
    text = re.sub(r"(call|fc|msg|resp|toolu)_[A-Za-z0-9]{24}", r"\1_<id>", text)
    text = re.sub(r"chatcmpl-[A-Za-z0-9]{24}", "chatcmpl-<id>", text)
    text = re.sub(r'"(created|created_at)": ?\d+', r'"\1": 0', text)
    # token counts depend on the contract's wording, which is not what the snapshots pin
    text = re.sub(r"call-usage=[\d/,]+", "call-usage=<n>", text)
    return re.sub(r'"(\w+_tokens)": ?\d+', r'"\1": 0', text)


def wire_snapshot(base: str, path: str, body: dict[str, Any]) -> dict[str, str]:
    """The proxy's whole and streamed answers to ``body`` at ``path``, through :func:`wire_text`."""
    whole = httpx.post(f"{base}{path}", json=body, timeout=30)
    streamed = httpx.post(f"{base}{path}", json={**body, "stream": True}, timeout=30)
    assert whole.headers["content-type"] == "application/json"
    assert streamed.headers["content-type"].startswith("text/event-stream")
    return {"whole": wire_text(whole.text), "stream": wire_text(streamed.text)}
