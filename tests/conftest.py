"""Suite-wide checks."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from loguru import logger

from agentfsm.testing import FakeUpstream
from tests._proxy import EMPTY_ANSWERS, proxy, upstream_backend


@pytest.fixture(autouse=True)
def _no_empty_answers() -> Iterator[None]:
    """No proxy a test started answered 200 with an empty assistant message (no text, no
    call): the client could not tell it from a lost answer. The test that caused one fails."""
    seen = len(EMPTY_ANSWERS)
    yield
    new = EMPTY_ANSWERS[seen:]
    if new:
        pytest.fail("200 answers with an empty assistant message:\n" + "\n".join(new), pytrace=False)


@pytest.fixture
def watched() -> Iterator[tuple[FakeUpstream, str, list[float]]]:
    """A proxy in front of an empty script, and the seconds each of its /health answers took
    while the test ran (polled from another thread)."""
    seconds: list[float] = []
    stop = threading.Event()
    with FakeUpstream([]) as fake, proxy(upstream_backend(fake, total=120, read=120)) as url:

        def poll() -> None:
            while not stop.is_set():
                started = time.monotonic()
                httpx.get(f"{url}/health", timeout=120)
                seconds.append(time.monotonic() - started)
                stop.wait(0.05)

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        try:
            yield fake, url, seconds
        finally:
            stop.set()
            poller.join(timeout=130)


@pytest.fixture
def agentfsm_log() -> Iterator[list[str]]:
    """Every line agentfsm logs (loguru), at the lowest level, while the test runs."""
    captured: list[str] = []
    logger.enable("agentfsm")
    sink = logger.add(lambda m: captured.append(str(m)), level="TRACE", format="{message}")
    try:
        yield captured
    finally:
        logger.remove(sink)
