"""What one client may hold of the proxy: its headers in time, a bounded number of
connections, and a share of the upstream pool.

Defect (issue 29, item 7): 300 of 300 header-trickling connections were open after 60 s;
at 1,024 descriptors new clients were refused; 100 slow upstream calls from one client
filled the upstream pool and others waited up to 30 s.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx

from agentfsm.server.limits import ClientShare, guarded_protocol
from agentfsm.testing import FakeReply, FakeUpstream, ReceivedRequest, latency
from tests._proxy import proxy, serve_command, upstream_backend

USER = [{"role": "user", "content": "hi"}]


def guarded(fake: FakeUpstream, header_timeout: float, max_connections: int, **settings: Any) -> AbstractContextManager[str]:
    """The proxy under uvicorn with the guarded protocol, as ``agentfsm serve`` runs it."""
    backend = upstream_backend(fake, total=30, read=30)
    return proxy(backend, http=guarded_protocol(header_timeout, max_connections), **settings)


def _connect(url: str) -> socket.socket:
    host, _, port = url.removeprefix("http://").partition(":")
    return socket.create_connection((host, int(port)), timeout=10)


def _closed_with(sock: socket.socket, wait: float) -> bytes | None:
    """What the server sent before closing, or None if it is still open after ``wait``."""
    sock.settimeout(wait)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except TimeoutError:
        return None
    except ConnectionResetError:
        pass
    return data


def test_headers_that_trickle_past_the_deadline_get_408_and_a_closed_connection() -> None:
    with FakeUpstream(["ok"] * 3) as fake, guarded(fake, header_timeout=0.5, max_connections=100) as url:
        socks = [_connect(url) for _ in range(20)]
        started = time.monotonic()
        line = b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\n"
        for i in range(6):  # a byte every 0.2 s: the headers never complete
            for s in socks:
                try:
                    s.sendall(line[i : i + 1])
                except OSError:
                    pass
            time.sleep(0.2)
        answers = [_closed_with(s, 5) for s in socks]
        for s in socks:
            s.close()
        assert time.monotonic() - started < 5
        assert all(a is not None and a.startswith(b"HTTP/1.1 408") for a in answers), answers[:2]
        # a kept-alive connection that trickles its next request is cut the same way
        with _connect(url) as sock:
            body = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
                         b"content-length: %d\r\n\r\n%s" % (len(body), body))
            sock.settimeout(10)
            first = sock.recv(65536)
            assert first.startswith(b"HTTP/1.1 200")
            sock.sendall(b"GET /health HTTP/1.1\r\nhost: 1")
            rest = _closed_with(sock, 5)
            assert rest is not None and b"408" in rest
        # a prompt client is served
        assert httpx.get(url + "/health", timeout=10).status_code == 200


def test_connections_past_the_limit_get_503_and_are_closed_at_once() -> None:
    with FakeUpstream(["ok"]) as fake, guarded(fake, header_timeout=30, max_connections=10) as url:
        held = [_connect(url) for _ in range(10)]
        time.sleep(0.3)
        extra = [_connect(url) for _ in range(5)]
        answers = [_closed_with(sock, 5) for sock in extra]
        for sock in held + extra:
            sock.close()
        assert all(a is not None and a.startswith(b"HTTP/1.1 503") for a in answers), answers
        time.sleep(0.3)
        assert httpx.get(url + "/health", timeout=10).status_code == 200


def test_one_clients_slow_calls_leave_the_others_their_share_of_the_upstream() -> None:
    def script(request: ReceivedRequest) -> FakeReply:
        return latency(3.0, "slow") if "slow" in str(request.messages[-1].get("content")) else latency(0.0, "fast")

    with FakeUpstream(script) as fake, guarded(fake, header_timeout=10, max_connections=100, client_share=3) as url:
        slow_body = {"model": "m", "messages": [{"role": "user", "content": "slow"}]}
        hog = httpx.Client(timeout=60, transport=httpx.HTTPTransport(local_address="127.0.0.1"))
        results: list[int] = []
        threads = [threading.Thread(target=lambda: results.append(hog.post(url + "/v1/chat/completions", json=slow_body).status_code))
                   for _ in range(8)]
        for t in threads:
            t.start()
        time.sleep(1.0)
        assert fake.in_flight == 3  # the hog holds its share; its 5 others wait in the proxy
        other = httpx.Client(timeout=60, transport=httpx.HTTPTransport(local_address="127.0.0.2"))
        started = time.monotonic()
        fast = other.post(url + "/v1/chat/completions", json={"model": "m", "messages": USER})
        waited = time.monotonic() - started
        assert fast.status_code == 200 and waited < 1.5, waited
        for t in threads:
            t.join(60)
        assert results == [200] * 8 and fake.peak_in_flight <= 4
        hog.close()
        other.close()


async def test_a_client_share_keeps_no_state_for_clients_that_are_gone() -> None:
    share = ClientShare(2)
    await share.enter("a")
    await share.enter("a")
    waiting = asyncio.ensure_future(share.enter("a"))
    await asyncio.sleep(0.01)
    assert not waiting.done() and share.busy("a") == 3
    waiting.cancel()
    await asyncio.sleep(0)
    assert share.busy("a") == 2
    share.leave("a")
    share.leave("a")
    assert share.busy("a") == 0 and share._gates == {}


def test_serve_runs_with_the_guarded_protocol(tmp_path: Path) -> None:
    with FakeUpstream(["ok"]) as fake, serve_command(fake.base_url, tmp_path,
                                                     env=None) as served:
        with _connect(served.url) as sock:
            sock.sendall(b"GET /health HTTP/1.1\r\nhost: 127.0.0.1\r\n")  # and no blank line: never done
            answer = _closed_with(sock, 20)
        assert answer is not None and answer.startswith(b"HTTP/1.1 408")


def _head_end_by_copy(tail: bytes, data: bytes) -> int:
    """The head's share of ``data``, found by searching ``tail + data`` whole."""
    end = (tail + data).find(b"\r\n\r\n")
    return len(data) if end < 0 else end + 4 - len(tail)


def test_the_heads_end_is_found_in_place_wherever_the_chunks_split_it() -> None:
    from agentfsm.server.limits import _head_end

    head = b"POST /v1/messages HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n{\"a\": 1}\r\n\r\n"
    for size in range(1, len(head) + 1):  # every chunk size: the end split at every offset
        tail, counted, seen = b"", 0, 0
        while seen < len(head):
            data = head[seen : seen + size]
            assert _head_end(tail, data) == _head_end_by_copy(tail, data)
            counted += _head_end(tail, data)
            if b"\r\n\r\n" in tail + data:  # the head has ended: the proxy stops counting
                break
            tail, seen = (tail + data)[-3:], seen + len(data)
        assert counted == head.index(b"\r\n\r\n") + 4, size


def test_a_request_sent_a_byte_at_a_time_is_served() -> None:
    with FakeUpstream(["ok"]) as fake, guarded(fake, header_timeout=10, max_connections=100) as url:
        body = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
        request = (
            b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(body), body)
        )
        with _connect(url) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # each byte its own segment
            for i in range(len(request)):
                sock.sendall(request[i : i + 1])
            answer = _closed_with(sock, wait=10)
        assert answer is not None and answer.startswith(b"HTTP/1.1 200"), answer
        assert b'"content":"ok"' in answer.replace(b" ", b"")
