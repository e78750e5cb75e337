"""Helpers for backend tests: run any backend call mode from a plain test."""

from __future__ import annotations

import asyncio
import threading
import time

from agentfsm.backends import GenerationOptions, OpenAICompatBackend
from agentfsm.core.backend import Backend
from agentfsm.core.messages import PromptMessage
from agentfsm.testing import FakeReply, FakeUpstream, ReceivedRequest

__all__ = ["MODES", "MESSAGES", "OPTIONS", "HoldAfter", "Held", "call", "wait_for_requests"]

#: the four ways to ask a backend: whole or streamed, blocking or async
MODES = ("complete", "stream", "acomplete", "astream")
MESSAGES = (PromptMessage(role="system", content="be brief"), PromptMessage(role="user", content="hi"))
OPTIONS = GenerationOptions(max_tokens=16)


def call(
    backend: Backend, mode: str, options: GenerationOptions = OPTIONS,
    messages: tuple[PromptMessage, ...] = MESSAGES,
) -> str:
    """The reply text, whichever mode; async modes run on a fresh loop and close their pool."""
    if mode == "complete":
        return backend.complete(messages, options).text
    if mode == "stream":
        return "".join(backend.stream(messages, options))

    async def run() -> str:
        try:
            if mode == "acomplete":
                return (await backend.acomplete(messages, options)).text
            return "".join([delta async for delta in backend.astream(messages, options)])
        finally:
            if isinstance(backend, OpenAICompatBackend):
                await backend.aclose()

    return asyncio.run(run())


def wait_for_requests(fake: FakeUpstream, requests: int) -> None:
    """Until the upstream holds ``requests`` chat requests (the last one now in its latency)."""
    deadline = time.monotonic() + 60
    while len(fake.chat_requests) < requests:
        assert time.monotonic() < deadline, "the CLI never asked the upstream"
        time.sleep(0.05)
    time.sleep(0.3)


class HoldAfter:
    """An upstream script: ``text`` after ``latency`` seconds for the first ``answered``
    requests, then every later one held (answered after ``hold`` seconds) until
    :meth:`release`. A stop signal sent once the upstream holds a request then lands while
    that request's run is under way, however slowly a loaded machine runs the command: a
    signal timed by the clock could land between two runs, or after the last."""

    def __init__(self, answered: int, text: str, latency: float, hold: float = 120.0) -> None:
        self.answered, self.text, self.latency, self.hold = answered, text, latency, hold
        self._count = 0
        self._lock = threading.Lock()
        self._released = threading.Event()

    def __call__(self, request: ReceivedRequest) -> FakeReply:
        with self._lock:
            self._count += 1
            held = self._count > self.answered and not self._released.is_set()
        return FakeReply(text=self.text, latency=self.hold if held else self.latency)

    def release(self) -> None:
        """Answer every later request after ``latency`` again."""
        self._released.set()


class Held:
    """An upstream script that holds every request until :attr:`release` is set (at most
    60 s), then answers ``text``; :attr:`started` is set once a request is held."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.started, self.release = threading.Event(), threading.Event()

    def __call__(self, request: ReceivedRequest) -> FakeReply:
        self.started.set()
        self.release.wait(60)
        return FakeReply(text=self.text)
