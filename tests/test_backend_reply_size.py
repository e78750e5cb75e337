"""An upstream's reply is bounded by what was asked of it: its size, decompressed, from ``max_tokens``.

Defect (issue 29, item 6): nothing bounded a reply: a 1 MB gzip body took the proxy to
4.2 GB and killed it; an endless stream reached 3.4 GB before the timeout.
"""

from __future__ import annotations

import gzip
import json
import tracemalloc
import zlib

import httpx
import pytest

from agentfsm.backends import GenerationOptions, OpenAICompatBackend, Timeouts
from agentfsm.backends._body import MAX_REPLY_BYTES, BoundedBody, reply_limit
from agentfsm.core.errors import BackendProtocolError
from agentfsm.testing import FakeUpstream, flood, raw_body
from tests._fake import MODES, call
from tests._proxy import TOOLS_ANTHROPIC, TOOLS_OPENAI, proxy

OPTIONS = GenerationOptions(max_tokens=16)


def _completion(text: str) -> bytes:
    return json.dumps({"object": "chat.completion", "choices": [{"message": {"role": "assistant", "content": text},
                                                                  "finish_reason": "stop"}]}).encode()


def _bomb(megabytes: int) -> bytes:
    """A gzip body that opens a completion and then inflates to ``megabytes`` of spaces."""
    z = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    parts = [z.compress(b'{"choices": [{"message": {"content": "')]
    block = b" " * (1 << 20)
    parts += [z.compress(block) for _ in range(megabytes)]
    parts.append(z.compress(b'"}}]}') + z.flush())
    return b"".join(parts)


def _backend(fake: FakeUpstream) -> OpenAICompatBackend:
    return OpenAICompatBackend(fake.base_url, "m", api_key="sk-test", timeout=Timeouts(2, 5, 20), max_retries=0)


def test_the_limit_follows_max_tokens_and_is_capped() -> None:
    assert reply_limit(16, False) < reply_limit(16, True) < reply_limit(64_000, True) <= MAX_REPLY_BYTES
    assert reply_limit(2**62, False) == MAX_REPLY_BYTES
    # no max_tokens sent (the client named none): the upstream's own bound, and our cap
    assert reply_limit(None, False) == reply_limit(None, True) == MAX_REPLY_BYTES


@pytest.mark.parametrize("mode", MODES)
def test_without_max_tokens_a_long_reply_is_read_whole(mode: str) -> None:
    # a bound from max_tokens=0 (1 MiB) would cut a reply the upstream was free to write
    # past 1 MiB whole; streamed (4 characters an event), ~10 MB of events
    text = "Paris is sunny. " * (80_000 if mode in ("complete", "acomplete") else 20_000)
    with FakeUpstream([text]) as fake, _backend(fake) as backend:
        assert call(backend, mode, GenerationOptions(max_tokens=None)) == text
    assert "max_tokens" not in fake.chat_requests[0].body


@pytest.mark.parametrize("mode", MODES)
def test_a_gzip_bomb_is_refused_within_its_bound(mode: str) -> None:
    bomb = _bomb(200)  # ~200 KB on the wire, 200 MB inflated
    assert len(bomb) < 1 << 20
    with FakeUpstream([raw_body(bomb, headers={"content-encoding": "gzip"})]) as fake, _backend(fake) as backend:
        tracemalloc.start()
        try:
            with pytest.raises(BackendProtocolError, match="larger than"):
                call(backend, mode, OPTIONS)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak < 32 << 20, peak  # the body was never inflated past its bound


@pytest.mark.parametrize("mode", MODES)
def test_an_endless_reply_is_cut_at_its_bound(mode: str) -> None:
    with FakeUpstream([flood()]) as fake, _backend(fake) as backend:
        with pytest.raises(BackendProtocolError, match="larger than"):
            call(backend, mode, OPTIONS)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("encoding", ["gzip", "deflate", "raw deflate"])
def test_a_compressed_reply_within_its_bound_is_read(mode: str, encoding: str) -> None:
    text = "Paris is sunny. " * 20
    body = _completion(text)
    if encoding == "gzip":
        data = gzip.compress(body)
    elif encoding == "deflate":
        data = zlib.compress(body)
    else:
        z = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
        data = z.compress(body) + z.flush()
    header = "gzip" if encoding == "gzip" else "deflate"
    with FakeUpstream([raw_body(data, headers={"content-encoding": header})]) as fake, _backend(fake) as backend:
        assert call(backend, mode, OPTIONS) == text
        assert fake.chat_requests[0].headers["accept-encoding"] == "gzip, deflate"


def test_an_encoding_not_asked_for_is_refused() -> None:
    with pytest.raises(BackendProtocolError, match="encoding not asked for"):
        BoundedBody({"content-encoding": "br"}, 100)
    cut = BoundedBody({}, 10, cut=True)  # an error body: kept as an excerpt, not refused
    assert cut.feed(b"x" * 25) == b"x" * 10 and cut.full


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages"])
def test_through_the_proxy_a_bomb_or_a_flood_is_an_upstream_error_not_a_dead_proxy(path: str, stream: bool) -> None:
    bomb = raw_body(_bomb(100), headers={"content-encoding": "gzip"})
    with FakeUpstream([bomb, flood(), "fine"]) as fake, proxy(_backend(fake)) as url:
        tools = TOOLS_ANTHROPIC if path == "/v1/messages" else TOOLS_OPENAI
        body = {"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}], "tools": tools, "stream": stream}
        for _ in range(2):
            response = httpx.post(url + path, json=body, timeout=60)
            if stream and response.status_code == 200:
                assert "larger than" in response.text and "error" in response.text
            else:
                assert response.status_code == 502, response.text
                assert "larger than" in response.text
        assert httpx.post(url + path, json=body, timeout=60).status_code == 200  # still serving
