"""A ``max_tokens`` the backend lowered is in the transcript. The upstream refused the
client's limit with a context-length error and the backend sent the request again with
what the context left; the transcript's ``model_request`` keeps the limit asked, and
before, nothing recorded the one sent: a reply cut at ``length`` read as cut at the
client's limit. Now ``model_output`` carries ``max_tokens_sent`` (only then), and replay
serves it back. Real parts: the proxy on a port, a FakeUpstream with a context window,
the official openai SDK."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai
import pytest

from agentfsm.replays.backend import ReplayBackend
from agentfsm.replays.compare import replay
from agentfsm.runtime.transcript import read_transcript
from agentfsm.testing import FakeUpstream
from tests._proxy import TOOLS_OPENAI, proxy, upstream_backend

CONTEXT, MANY = 3000, 100_000
USER = [{"role": "user", "content": "What is the weather in Paris?"}]


def _ask(url: str, stream: bool, **kwargs: Any) -> None:
    with openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0) as client:
        answer = client.chat.completions.create(model="m", messages=USER, stream=stream, **kwargs)  # type: ignore[arg-type]
        if stream:
            list(answer)


def _events(folder: Path) -> list[dict[str, Any]]:
    (path,) = folder.glob("*.jsonl")
    return read_transcript(path)


@pytest.mark.parametrize("tools", [False, True], ids=["plain", "tool-mode"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_the_lowered_max_tokens_is_recorded_and_replayed(tmp_path: Path, stream: bool, tools: bool) -> None:
    extra: dict[str, Any] = {"tools": TOOLS_OPENAI} if tools else {}
    with FakeUpstream(["It is sunny."], context_tokens=CONTEXT) as fake, \
            proxy(upstream_backend(fake), transcripts_dir=tmp_path) as url:
        _ask(url, stream, max_tokens=MANY, **extra)
        asked, sent = (r.body.get("max_tokens") for r in fake.chat_requests)
    assert asked == MANY and sent < CONTEXT
    events = _events(tmp_path)
    (request,) = [e for e in events if e["type"] == "model_request"]
    (output,) = [e for e in events if e["type"] == "model_output"]
    assert request["options"]["max_tokens"] == MANY  # what was asked ...
    assert output["max_tokens_sent"] == sent  # ... and what went upstream
    (path,) = tmp_path.glob("*.jsonl")
    assert [c.max_tokens_sent for c in ReplayBackend(path).outputs] == [sent]
    assert replay(path).identical


def test_a_limit_sent_as_asked_writes_no_field(tmp_path: Path) -> None:
    with FakeUpstream(["It is sunny."], context_tokens=CONTEXT) as fake, \
            proxy(upstream_backend(fake), transcripts_dir=tmp_path) as url:
        _ask(url, False, max_tokens=100)
    (output,) = [e for e in _events(tmp_path) if e["type"] == "model_output"]
    assert "max_tokens_sent" not in output
    (path,) = tmp_path.glob("*.jsonl")
    assert replay(path).identical
