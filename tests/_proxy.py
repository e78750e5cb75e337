"""Helpers for the proxy tests: the proxy on 127.0.0.1 in a thread, an upstream backend for it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from agentfsm.backends import OpenAICompatBackend, Timeouts
from agentfsm.core.backend import Backend
from agentfsm.server.app import create_app
from agentfsm.testing import FakeUpstream

__all__ = ["TOOLS_OPENAI", "TOOLS_ANTHROPIC", "action", "proxy", "upstream_backend"]

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


@contextmanager
def proxy(backend: Backend, **settings: Any) -> Iterator[str]:
    """Run the proxy for ``backend`` on a free port; yields ``http://127.0.0.1:PORT``."""
    app = create_app(backend, **settings)
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", ws="none", lifespan="off")
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
