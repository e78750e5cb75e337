"""The client suite's fixtures (the proxy subprocess, grouped client runs); helpers in ``_harness``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.clients._harness import Proxy, proxy, run_group

__all__ = ["no_empty_answers", "proxy", "run_group"]


@pytest.fixture(autouse=True)
def no_empty_answers(proxy: Proxy) -> Iterator[None]:
    """No request a client made during the test ended with an empty answer (a 200 with
    no text and no call), as the proxy's transcripts record it."""
    before = set(proxy.transcripts.glob("*.jsonl"))
    yield
    empty = proxy.empty_finals(before)
    if empty:
        pytest.fail(f"answers with no text and no call: {empty}\n{proxy.log.read_text()[-3000:]}", pytrace=False)
