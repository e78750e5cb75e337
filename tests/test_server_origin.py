"""A web page cannot reach the proxy: Host and Origin allow-lists, and JSON bodies only.

Defect (issue 29, item 4): on the default keyless loopback proxy, ``Host: evil.example``
got 200 (DNS rebinding) and ``text/plain`` or form bodies from another origin reached
the model (CSRF), both spending the user's upstream key.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from agentfsm.testing import FakeUpstream
from tests._proxy import proxy, upstream_backend

USER = [{"role": "user", "content": "hi"}]
PATHS = {
    "/v1/chat/completions": {"model": "m", "messages": USER},
    "/v1/messages": {"model": "m", "max_tokens": 5, "messages": USER},
    "/v1/responses": {"model": "m", "input": "hi"},
    "/v1/messages/count_tokens": {"model": "m", "messages": USER},
}


def _shape(path: str, response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    if path.startswith("/v1/messages"):
        assert body["type"] == "error"
    error: dict[str, Any] = body["error"]
    assert isinstance(error["message"], str) and isinstance(error["type"], str)
    return error


def _post(url: str, path: str, headers: dict[str, str], content: bytes | None = None) -> httpx.Response:
    data = content if content is not None else json.dumps(PATHS[path]).encode()
    return httpx.post(url + path, content=data, headers={"content-type": "application/json", **headers}, timeout=30)


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize(
    "headers",
    [{"host": "evil.example"}, {"host": "evil.example:8765"}, {"host": "127.0.0.1.evil.example"},
     {"origin": "https://evil.example"}, {"origin": "null"}, {"origin": "http://localhost.evil.example:3000"}],
    ids=["host", "host:port", "host with a loopback prefix", "origin", "origin null", "origin lookalike"],
)
def test_a_foreign_host_or_origin_is_refused_before_anything_runs(path: str, headers: dict[str, str]) -> None:
    with FakeUpstream(["hello"] * 4) as fake, proxy(upstream_backend(fake)) as url:
        response = _post(url, path, headers)
        assert response.status_code == 403, response.text
        error = _shape(path, response)
        assert "not allowed" in error["message"]
        assert fake.chat_requests == []
        models = httpx.get(url + "/v1/models", headers=headers, timeout=30)
        assert models.status_code == 403


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None],
    ids=["text/plain", "form", "multipart", "none"],
)
def test_a_body_not_declared_json_is_a_415(path: str, content_type: str | None) -> None:
    with FakeUpstream(["hello"] * 4) as fake, proxy(upstream_backend(fake)) as url:
        headers = {"origin": "http://localhost:3000"}  # even from an allowed origin
        data = json.dumps(PATHS[path]).encode()
        request = httpx.Request("POST", url + path, content=data, headers=headers)
        request.headers.pop("content-type", None)
        if content_type is not None:
            request.headers["content-type"] = content_type
        with httpx.Client(timeout=30) as client:
            response = client.send(request)
        assert response.status_code == 415, response.text
        assert "application/json" in _shape(path, response)["message"]
        assert fake.chat_requests == []


@pytest.mark.parametrize(
    "headers",
    [{}, {"host": "localhost:1"}, {"host": "[::1]:8765"}, {"host": "app.localhost"}, {"origin": "http://127.0.0.1:5173"},
     {"origin": "http://localhost:3000"}, {"content-type": "application/json; charset=utf-8"}],
)
def test_loopback_names_and_origins_and_json_with_parameters_are_served(headers: dict[str, str]) -> None:
    with FakeUpstream(["hello"]) as fake, proxy(upstream_backend(fake)) as url:
        response = _post(url, "/v1/chat/completions", headers)
        assert response.status_code == 200, response.text
        assert len(fake.chat_requests) == 1


def test_allow_lists_are_configurable_and_a_key_opens_any_host() -> None:
    with FakeUpstream(["a"] * 5) as fake:
        with proxy(upstream_backend(fake), allowed_hosts=("proxy.internal", "*.corp.example"),
                   allowed_origins=("https://app.corp.example",)) as url:
            for headers in ({"host": "proxy.internal"}, {"host": "x.corp.example:8765"},
                            {"origin": "https://app.corp.example"}):
                assert _post(url, "/v1/chat/completions", headers).status_code == 200, headers
            assert _post(url, "/v1/chat/completions", {"host": "corp.example.evil"}).status_code == 403
            assert _post(url, "/v1/chat/completions", {"origin": "https://evil.corp.example"}).status_code == 403
        with proxy(upstream_backend(fake), api_key="sk-proxy") as url:
            # a client that must send a key can be reached by any name; a page cannot send it
            response = _post(url, "/v1/chat/completions", {"host": "proxy.lan", "authorization": "Bearer sk-proxy"})
            assert response.status_code == 200
            assert _post(url, "/v1/chat/completions", {"host": "proxy.lan"}).status_code == 401
            assert _post(url, "/v1/chat/completions", {"origin": "https://evil.example",
                                                      "authorization": "Bearer sk-proxy"}).status_code == 403


def test_serve_reads_the_allow_lists_from_options_and_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentfsm.cli.serve import build_app

    monkeypatch.setenv("OPENAI_API_KEY", "")
    app = build_app(host="127.0.0.1", backend="openai", base_url="http://127.0.0.1:9/v1", model="m",
                    upstream_api_key="sk-u", api_key=None, allowed_hosts="a.example, *.b.example",
                    allowed_origins="https://c.example")
    assert app.state.settings.allowed_hosts == ("a.example", "*.b.example")
    assert app.state.settings.allowed_origins == ("https://c.example",)
    default = build_app(host="127.0.0.1", backend="openai", base_url="http://127.0.0.1:9/v1", model="m",
                        upstream_api_key="sk-u", api_key=None)
    assert default.state.settings.allowed_hosts == () and default.state.settings.allowed_origins == ()


# --- a documented limit on tools per request (issue 29, item 1) ---------------------------


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages", "/v1/responses", "/v1/messages/count_tokens"])
def test_more_tools_than_the_limit_is_the_clients_400_naming_tools(path: str) -> None:
    from agentfsm.server.settings import DEFAULT_MAX_TOOLS

    assert DEFAULT_MAX_TOOLS == 2048  # as docs/proxy.md documents it
    def tool(i: int) -> dict[str, Any]:
        if path.startswith("/v1/messages"):
            return {"name": f"t{i}", "input_schema": {"type": "object"}}
        if path == "/v1/responses":
            return {"type": "function", "name": f"t{i}", "parameters": {"type": "object"}}
        return {"type": "function", "function": {"name": f"t{i}", "parameters": {"type": "object"}}}

    with FakeUpstream(["ok"] * 2) as fake, proxy(upstream_backend(fake), max_tools=3) as url:
        too_many = httpx.post(url + path, json={**PATHS[path], "tools": [tool(i) for i in range(4)]}, timeout=30)
        assert too_many.status_code == 400, too_many.text
        error = _shape(path, too_many)
        assert "4 tools" in error["message"] and "at most 3" in error["message"]
        if not path.startswith("/v1/messages"):
            assert error["param"] == "tools"
        assert fake.chat_requests == []
        at_limit = httpx.post(url + path, json={**PATHS[path], "tools": [tool(i) for i in range(3)]}, timeout=30)
        assert at_limit.status_code == 200, at_limit.text
