"""What an operator running ``agentfsm serve`` for a team meets: models-file mistakes at
start-up, the connection and header limits as the SDKs see them, metrics a client cannot
bloat, keys in a base URL's query, ``--port 0``, and workers that die or lose their parent.

Real parts only: the ``agentfsm serve`` subprocess or the in-thread proxy of
``tests/_proxy.py``, a scripted upstream (FakeUpstream) and the official SDKs or httpx.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import anthropic
import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from agentfsm.server.limits import guarded_protocol
from agentfsm.server.models import ModelTable, ServedModel
from agentfsm.testing import FakeReply, FakeUpstream, ReceivedRequest, status
from tests._proxy import fake, free_port, proxy, upstream_backend, wait_until_serving  # fake: a fixture

ASK = [{"role": "user", "content": "hi"}]
SERVE = [sys.executable, "-m", "agentfsm", "serve"]


def _serve_fails(*args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run([*SERVE, "--port", str(free_port()), *args], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    return line


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ("base_url = 'http://127.0.0.1:99999/v1'\n", "models.a: base_url: the base URL's port 99999 is outside 1-65535"),
        ("base_url = 'http://xn--/v1'\n", "models.a: base_url: the base URL's host is not a valid name"),
        ("base_url = 'http://u:pw@127.0.0.1:9/v1'\n", "models.a: base_url: holds a user name or password; name"),
        ("base_url = 'http://127.0.0.1:9/v1'\ntimeout = inf\n", "models.a: timeout: Input should be a finite number"),
        ("base_url = 'http://127.0.0.1:9/v1'\ncontext_tokens = '4096'\n", "models.a: context_tokens: Input should be a valid integer"),
        ("base_url = 'http://127.0.0.1:9/v1'\ncontext_tokens = true\n", "models.a: context_tokens: Input should be a valid integer"),
        ("base_url = 'http://127.0.0.1:9/v1'\nprofile_model = 'x'\n", "models.a: profile_model: names a model of a profile"),
        ("base_url = 'http://127.0.0.1:9/v1'\napi_key_env = ''\n", "models.a: api_key_env is empty"),
    ],
)
def test_a_models_file_mistake_is_one_line_naming_file_entry_and_field(tmp_path: Path, entry: str, says: str) -> None:
    # before: the port and the inf timeout started a proxy that answered every request 500,
    # the host a traceback; the quoted and boolean numbers were converted
    path = tmp_path / "models.toml"
    path.write_text("[models.a]\n" + entry, encoding="utf-8")
    line = _serve_fails("--models", str(path))
    assert line.startswith(f"agentfsm: error: {path}: ") and says in line, line
    assert "pw" not in line


def test_a_key_no_header_carries_is_refused_at_start_up_not_a_500_per_request(tmp_path: Path) -> None:
    # before: a key with its file's last line break (a Kubernetes secret made --from-file)
    # started a proxy whose every request to that model was a 500 with aiohttp's traceback
    path = tmp_path / "models.toml"
    path.write_text("[models.a]\nbase_url = 'http://127.0.0.1:9/v1'\napi_key_env = 'TEST_KEY'\n", encoding="utf-8")
    line = _serve_fails("--models", str(path), env={**os.environ, "TEST_KEY": "sk-from-a-file-4242\n"})
    assert line.startswith(f"agentfsm: error: {path}: models.a: the environment variable TEST_KEY (api_key_env): "
                           "the upstream key holds a line break")
    line = _serve_fails("--models", str(path), env={**os.environ, "TEST_KEY": "  "})
    assert line.endswith("models.a: the environment variable TEST_KEY (api_key_env) is not set, or empty")
    single = _serve_fails("--backend", "openai", "--base-url", "http://127.0.0.1:9/v1",
                          env={**os.environ, "AGENTFSM_UPSTREAM_API_KEY": "sk-from-a-file-4242\r\n"})
    assert single.startswith("agentfsm: error: the upstream key holds a line break") and "4242" not in single


def test_a_models_file_not_in_utf8_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "models.toml"
    path.write_bytes(b"\xff\xfe[models.a]\nbase_url = 'http://127.0.0.1:9/v1'\n")
    assert _serve_fails("--models", str(path)) == f"agentfsm: error: {path} is not UTF-8 text (byte 0): save it as UTF-8"


@pytest.mark.parametrize("url", ["http://127.0.0.1:99999/v1", "http://xn--/v1"])
def test_a_base_url_the_client_cannot_open_is_refused_at_start_up(url: str) -> None:
    line = _serve_fails("--backend", "openai", "--base-url", url)
    assert line.startswith("agentfsm: error: the base URL's ")


def test_port_0_names_the_port_it_serves_on(tmp_path: Path) -> None:
    with FakeUpstream(["ok"]) as upstream:
        process = subprocess.Popen([*SERVE, "--port", "0", "--backend", "openai", "--base-url", upstream.base_url],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            assert process.stderr is not None
            line = process.stderr.readline()
            found = re.search(r"http://127\.0\.0\.1:(\d+) ", line)
            assert found and found.group(1) != "0", line
            wait_until_serving(f"http://127.0.0.1:{found.group(1)}", process, timeout=60)
        finally:
            process.terminate()
            process.communicate(timeout=30)


def test_a_key_in_the_base_urls_query_reaches_neither_log_nor_client(tmp_path: Path) -> None:
    secret = "sk-query-secret-31337"

    def echo_query(request: ReceivedRequest) -> FakeReply:  # an upstream that quotes the URL it was sent
        return status(400, body=json.dumps({"error": {"message": f"bad request to {request.path}?{request.query}"}}))

    with FakeUpstream(echo_query) as upstream:
        models = tmp_path / "models.toml"
        models.write_text(f"[models.a]\nbase_url = '{upstream.base_url}?api-version=1&code={secret}'\n", encoding="utf-8")
        port = free_port()
        process = subprocess.Popen([*SERVE, "--port", str(port), "--models", str(models)],
                                   env={**os.environ, "AGENTFSM_LOG_LEVEL": "debug"},
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            wait_until_serving(f"http://127.0.0.1:{port}", process, timeout=60)
            answer = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json={"model": "a", "messages": ASK}, timeout=30)
            assert answer.status_code == 502
            assert "bad request to" in answer.text and secret not in answer.text  # nor the client
            assert upstream.requests[-1].query.endswith(secret)  # it did go upstream
        finally:
            process.terminate()
            _, stderr = process.communicate(timeout=30)
    log = stderr.decode()
    assert "bad request to" in log and secret not in log


def _scrape(url: str) -> tuple[str, set[str]]:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    models = {s.labels["model"] for f in text_string_to_metric_families(text) for s in f.samples if "model" in s.labels}
    return text, models


def test_clients_cannot_bloat_the_model_label_nor_crowd_out_the_served_names() -> None:
    with FakeUpstream() as echo:  # answers every request
        backend = upstream_backend(echo)
        table = ModelTable([ServedModel("qwen", backend), ServedModel("org/llama:8b", backend)], fallback="qwen")
        text, models = _label_flood(table)
    # before: the 10 KB names were labels (a scrape of megabytes, for a few KB of requests each),
    # and once 64 names had been seen the served ones counted as "other"
    assert {"org/llama:8b", "qwen", "other"} <= models
    assert max(map(len, models)) <= 128 and len(models) <= 64 + 3
    assert len(text) < 400_000


def _label_flood(table: ModelTable) -> tuple[str, set[str]]:
    with proxy(table, metrics=True) as url, httpx.Client(timeout=30) as client:
        for i in range(70):  # names the fallback answers, each 10 KB
            body = {"model": f"junk-{i}-" + "x" * 10_000, "messages": ASK}
            assert client.post(f"{url}/v1/chat/completions", json=body).status_code == 200
        for i in range(70):  # short ones fill the 64 places for names not served
            assert client.post(f"{url}/v1/chat/completions", json={"model": f"j{i}", "messages": ASK}).status_code == 200
        for name in ("org/llama:8b", "qwen"):
            assert client.post(f"{url}/v1/chat/completions", json={"model": name, "messages": ASK}).status_code == 200
        return _scrape(url)


def test_metrics_keep_the_host_and_origin_rules(fake: FakeUpstream) -> None:
    with proxy(upstream_backend(fake), metrics=True) as url:
        assert httpx.get(f"{url}/metrics").status_code == 200
        rebound = httpx.get(f"{url}/metrics", headers={"host": "evil.example"})  # DNS rebinding
        assert rebound.status_code == 403 and "Host" in rebound.json()["error"]["message"]
        assert httpx.get(f"{url}/metrics", headers={"origin": "https://evil.example"}).status_code == 403


def _held(url: str, count: int) -> list[socket.socket]:
    port = int(url.rsplit(":", 1)[1])
    held = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(count)]
    time.sleep(0.3)  # accepted
    return held


def test_past_the_connection_limit_each_sdk_gets_its_providers_503_with_retry_after(fake: FakeUpstream) -> None:
    with proxy(upstream_backend(fake), http=guarded_protocol(30, 4)) as url:
        held = _held(url, 4)
        try:
            # before: the answer was written and the socket closed before the request was
            # read, so the client saw a reset (APIConnectionError), not a 503
            with openai.OpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0) as client:
                with pytest.raises(openai.APIStatusError) as caught:
                    client.chat.completions.create(model="m", messages=ASK)  # type: ignore[arg-type]
            assert caught.value.status_code == 503 and caught.value.response.headers["retry-after"] == "1"
            assert caught.value.response.json()["error"]["type"] == "server_error"
            with anthropic.Anthropic(base_url=url, api_key="k", max_retries=0) as claude:
                with pytest.raises(anthropic.APIStatusError) as refused:
                    claude.messages.create(model="m", max_tokens=8, messages=ASK)  # type: ignore[arg-type]
            assert refused.value.status_code == 503 and refused.value.response.headers["retry-after"] == "1"
            assert refused.value.response.json() == {
                "type": "error", "error": {"type": "overloaded_error", "message": "too many open connections to this proxy; retry"},
            }
        finally:
            for sock in held:
                sock.close()
        time.sleep(0.3)
        fake.enqueue("ok")
        assert httpx.post(f"{url}/v1/chat/completions", json={"model": "m", "messages": ASK}, timeout=30).status_code == 200


def test_oversized_request_headers_get_431_in_the_providers_shape(fake: FakeUpstream) -> None:
    with proxy(upstream_backend(fake), http=guarded_protocol(10, 100)) as url:
        # before: no bound (httptools has none): a 2 MB header was served, and one endless
        # header grew the process until the header deadline
        big = {"x-filler": "a" * 100_000, "anthropic-version": "2023-06-01"}
        answer = httpx.post(f"{url}/v1/messages", headers=big, json={"model": "m", "max_tokens": 8, "messages": ASK}, timeout=30)
        assert answer.status_code == 431 and answer.json()["error"]["type"] == "invalid_request_error"
        answer = httpx.post(f"{url}/v1/chat/completions", headers={"x-filler": "a" * 100_000}, json={}, timeout=30)
        assert answer.status_code == 431 and "headers are larger" in answer.json()["error"]["message"]
        fake.enqueue("ok")  # ordinary headers, and a large body, still pass
        ok = httpx.post(f"{url}/v1/chat/completions", headers={"x-filler": "a" * 8_000},
                        json={"model": "m", "messages": [{"role": "user", "content": "b" * 500_000}]}, timeout=30)
        assert ok.status_code == 200


def _workers_of(pid: int) -> list[int]:
    children = [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    return [c for c in children if b"spawn_main" in Path(f"/proc/{c}/cmdline").read_bytes()]


def _gone(pids: list[int], within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not any(Path(f"/proc/{p}").exists() and "Z" not in Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1][:3]
                   for p in pids):
            return True
        time.sleep(0.2)
    return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_dead_worker_is_said_and_workers_do_not_outlive_their_parent(tmp_path: Path) -> None:
    with FakeUpstream(["ok"] * 20) as upstream:
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        process = subprocess.Popen(
            [*SERVE, "--port", str(port), "--backend", "openai", "--base-url", upstream.base_url, "--workers", "2"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
        )
        workers: list[int] = []
        try:
            wait_until_serving(url, process, timeout=120)
            workers = _workers_of(process.pid)
            assert len(workers) == 2
            crashed = workers[0]
            os.kill(crashed, signal.SIGKILL)  # a crash: replaced, and said
            deadline = time.monotonic() + 60
            while crashed in _workers_of(process.pid) or len(_workers_of(process.pid)) < 2:
                assert time.monotonic() < deadline
                time.sleep(0.2)
            wait_until_serving(url, process, timeout=60)
            workers = _workers_of(process.pid)
            process.kill()  # the parent SIGKILLed (the OOM killer's way): no orphan keeps the port
            _, stderr = process.communicate(timeout=30)
            assert _gone(workers, within=15), "workers outlived their parent"
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", port))
        finally:
            if process.poll() is None:
                process.kill()
            for pid in workers:  # what the test started, if the assertion above failed
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
    assert re.search(rf"WARNING: +worker \[{crashed}\] died; a new worker replaces it", stderr.decode())
