"""A request body that never finishes is answered 408 and its connection closed, not held.

Defect: ``--request-timeout`` starts after the body is read, so 300 of 300 clients that
sent their headers and half a body were still connected after 60 s.
"""

from __future__ import annotations

import json
import socket
import time
from urllib.parse import urlparse

import pytest

from agentfsm.server.app import create_app
from agentfsm.core.errors import UsageError
from agentfsm.testing import FakeUpstream
from tests._proxy import proxy, upstream_backend

HALF_BODY = b'{"model": "m", "messages": [{"role": "user", "content": "hel'


def _read_all(sock: socket.socket, limit: float) -> bytes:
    """Everything the server sends until it closes the connection (or ``limit`` seconds)."""
    sock.settimeout(limit)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except TimeoutError:
        pytest.fail(f"the connection was still open after {limit}s: {data[:200]!r}")
    return data


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
@pytest.mark.parametrize(
    ("path", "kind"),
    [("/v1/chat/completions", "invalid_request_error"), ("/v1/messages", "invalid_request_error")],
    ids=["openai", "anthropic"],
)
def test_half_a_body_gets_408_in_the_clients_shape_and_a_closed_connection(
    path: str, kind: str, chunked: bool
) -> None:
    with FakeUpstream([]) as fake, proxy(upstream_backend(fake), body_timeout=0.5) as url:
        address = urlparse(url)
        with socket.create_connection((address.hostname, address.port)) as sock:
            started = time.monotonic()
            framing = b"transfer-encoding: chunked\r\n" if chunked else b"content-length: 1000\r\n"
            sock.sendall(b"POST " + path.encode() + b" HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n" + framing + b"\r\n")
            sock.sendall(b"%x\r\n" % len(HALF_BODY) + HALF_BODY + b"\r\n" if chunked else HALF_BODY)
            data = _read_all(sock, 10)
            elapsed = time.monotonic() - started
        assert fake.chat_requests == []
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408"), head
    assert 0.4 < elapsed < 5
    error = json.loads(body)
    if path == "/v1/messages":
        assert error["type"] == "error" and error["error"]["type"] == kind
        assert "did not arrive within 0.5s" in error["error"]["message"]
    else:
        assert error["error"]["type"] == kind and "did not arrive" in error["error"]["message"]


def test_a_slow_but_steady_body_within_the_timeout_is_served() -> None:
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    with FakeUpstream(["hello"]) as fake, proxy(upstream_backend(fake), body_timeout=5) as url:
        address = urlparse(url)
        with socket.create_connection((address.hostname, address.port)) as sock:
            sock.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n"
                b"content-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(body)
            )
            for i in range(0, len(body), 16):
                sock.sendall(body[i : i + 16])
                time.sleep(0.02)
            data = _read_all(sock, 10)
    assert data.startswith(b"HTTP/1.1 200"), data[:200]
    assert b"hello" in data


def test_body_timeout_must_be_positive() -> None:
    with FakeUpstream([]) as fake, pytest.raises(UsageError, match="body_timeout"):
        create_app(upstream_backend(fake), body_timeout=0)
