"""The API key reaches the upstream's Authorization header and nowhere else."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from loguru import logger

from agentfsm.backends import OpenAICompatBackend, Timeouts
from agentfsm.core.errors import BackendError
from agentfsm.testing import FakeReply, FakeUpstream, garbage, reset, status
from tests._fake import MODES, call

KEY = "sk-live-0123456789-do-not-leak"


@pytest.fixture
def log_lines() -> Iterator[list[str]]:
    """Everything agentfsm (loguru) and httpx/httpcore (logging) log, at the lowest level."""
    lines: list[str] = []
    logger.enable("agentfsm")
    sink = logger.add(lambda message: lines.append(str(message)), level="TRACE", format="{message}")

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(self.format(record))

    handler = Collect(level=logging.DEBUG)
    loggers = [logging.getLogger(name) for name in ("httpx", "httpcore")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        lg.setLevel(logging.DEBUG)
    try:
        yield lines
    finally:
        logger.remove(sink)
        for lg, level in zip(loggers, levels, strict=True):
            lg.removeHandler(handler)
            lg.setLevel(level)


@pytest.mark.parametrize("mode", MODES)
def test_api_key_is_sent_but_never_logged_raised_or_shown(mode: str, log_lines: list[str]) -> None:
    # the 401 echoes the key back, as some upstreams do: it must be redacted from the error
    script: list[FakeReply | str] = [
        reset(), status(500), "ok", garbage(), status(401, body=f"bad key {KEY}")
    ]
    failures: list[BackendError] = []
    with FakeUpstream(script) as fake:
        backend = OpenAICompatBackend(
            fake.base_url, "m", api_key=KEY, timeout=Timeouts(1, 1, 5), backoff=0.01
        )
        with backend:
            assert call(backend, mode) == "ok"
            for _ in range(2):
                with pytest.raises(BackendError) as info:
                    call(backend, mode)
                failures.append(info.value)
            shown = [repr(backend), str(vars(backend)), repr(backend._sync_client().headers)]
    assert {r.headers["authorization"] for r in fake.chat_requests} == {f"Bearer {KEY}"}
    assert any("retrying" in line for line in log_lines)  # the capture does see our logs
    if not mode.startswith("a"):  # and httpx's (the async calls go through aiohttp, which logs none)
        assert any("HTTP Request" in line for line in log_lines)
    texts = log_lines + shown + [str(e) for e in failures] + [repr(e) for e in failures]
    texts += [str(e.__cause__) for e in failures]
    assert [t for t in texts if KEY in t] == []
    assert "***" in str(failures[-1])


def test_api_key_defaults_to_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTFSM_UPSTREAM_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-openai-env")
    with FakeUpstream(["a", "b"]) as fake:
        with OpenAICompatBackend(fake.base_url, "m") as backend:
            call(backend, "complete")
        monkeypatch.setenv("AGENTFSM_UPSTREAM_API_KEY", "sk-from-agentfsm-env")
        with OpenAICompatBackend(fake.base_url, "m") as backend:
            call(backend, "complete")
            assert "sk-from" not in repr(backend)
    sent = [r.headers["authorization"] for r in fake.chat_requests]
    assert sent == ["Bearer sk-from-openai-env", "Bearer sk-from-agentfsm-env"]


def test_no_key_sends_no_authorization(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTFSM_UPSTREAM_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with FakeUpstream(["a"]) as fake, OpenAICompatBackend(fake.base_url, "m") as backend:
        call(backend, "complete")
        assert repr(backend).endswith("api_key=None)")
    assert "authorization" not in fake.chat_requests[0].headers
