"""Helpers for backend tests: run any backend call mode from a plain test."""

from __future__ import annotations

import asyncio
import time

from agentfsm.backends import GenerationOptions, OpenAICompatBackend
from agentfsm.core.backend import Backend
from agentfsm.core.messages import PromptMessage
from agentfsm.testing import FakeUpstream

__all__ = ["MODES", "MESSAGES", "OPTIONS", "call", "wait_for_requests"]

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
