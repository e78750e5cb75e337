"""What a client sees when the proxy's upstream refuses or fails: the proxy's fault, never the client's.

Defects (reproduced with the official SDKs against the proxy in front of a FakeUpstream):

* an upstream 401/403 (the proxy's own upstream key is wrong) reached the client as a 401
  ``authentication_error`` / 403 ``permission_error``, which every SDK reads as the
  client's own key refused, quoting the upstream's answer (OpenAI's quotes the start and
  end of the key it refused); a 404 (the model entry names a model the upstream lacks)
  as the client's ``not_found_error`` though the client named a model the proxy serves.
  Now each is a 502 naming the model entry, with ``x-should-retry: false``; the
  upstream's answer stays in the log and the transcript.
* a 503 with ``Retry-After: 30`` became a 502 without it (the docs promised it passed on):
  the SDKs retried at once. Now a 503 with its Retry-After.
* a refused connection's 502 named the upstream's host and port to the client (aiohttp's
  "Cannot connect to host 127.0.0.1:PORT"). Now the client reads the failure and the model
  entry; the proxy's log and the transcript keep the transport's detail.
* an upstream's JSON error body was quoted to the client whole, every field of it, and the
  upstream's words may name where it lives: Ollama's ``Post "http://127.0.0.1:39261/completion":
  EOF`` when its runner dies, a gateway's "Cannot connect to host ollama.internal:11434".
  Now the client reads the body's message alone (``error.message``, ``error`` as a string,
  a top-level ``message`` or ``detail``), every URL, ``host:port`` and IP address in it
  replaced by ``***``; the log and the transcript keep the body whole. So does an error
  event in a stream.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from agentfsm.backends import OpenAICompatBackend, Timeouts
from agentfsm.core.redaction import hide_addresses
from agentfsm.testing import FakeReply, FakeUpstream, raw_body, status
from tests._proxy import free_port, proxy

KEY = "sk-upstream-secret-7f3a"
ENTRY = "team-model"
ASK = [{"role": "user", "content": "hi"}]
CLIENTS = [(api, stream) for api in ("chat", "responses", "anthropic") for stream in (False, True)]
CLIENT_IDS = [f"{api}-{'stream' if stream else 'whole'}" for api, stream in CLIENTS]


def _backend(base_url: str) -> OpenAICompatBackend:
    return OpenAICompatBackend(base_url, model="upstream-model-name", api_key=KEY,
                               timeout=Timeouts(connect=2.0, read=5.0, total=10.0), max_retries=0,
                               json_schema_mode="off")


def _ask(url: str, api: str, stream: bool) -> openai.APIStatusError | anthropic.APIStatusError:
    """The SDK's error for one request (each SDK with its retries off)."""
    if api == "anthropic":
        with anthropic.Anthropic(base_url=url, api_key="client-key", max_retries=0, timeout=30) as aclient:
            with pytest.raises(anthropic.APIStatusError) as ainfo:
                if stream:
                    with aclient.messages.stream(model=ENTRY, max_tokens=64, messages=ASK) as events:  # type: ignore[arg-type]
                        list(events)
                else:
                    aclient.messages.create(model=ENTRY, max_tokens=64, messages=ASK)  # type: ignore[arg-type]
        return ainfo.value
    with openai.OpenAI(base_url=f"{url}/v1", api_key="client-key", max_retries=0, timeout=30) as client:
        with pytest.raises(openai.APIStatusError) as info:
            if api == "chat":
                result: Any = client.chat.completions.create(model=ENTRY, messages=ASK, stream=stream)  # type: ignore[arg-type]
            else:
                result = client.responses.create(model=ENTRY, input="hi", stream=stream)
            if stream:
                list(result)
    return info.value


def _error(exc: openai.APIStatusError | anthropic.APIStatusError) -> dict[str, Any]:
    body = exc.response.json()
    if isinstance(exc, anthropic.APIStatusError):
        assert body["type"] == "error"
    error = body["error"]
    assert isinstance(error, dict)
    return error



REFUSALS: dict[str, FakeReply] = {
    "401": status(401, body=json.dumps({"error": {"message": "Incorrect API key provided: sk-upst***7f3a",
                                                   "type": "invalid_request_error", "code": "invalid_api_key"}})),
    "403": status(403, body=json.dumps({"error": {"message": "project has no access to upstream-model-name"}})),
    "404": status(404, body=json.dumps({"error": {"message": "The model `upstream-model-name` does not exist",
                                                   "code": "model_not_found"}})),
}


def _words(refusal: str) -> str:
    """What the upstream said, up to its first colon: the part no key-like text is in (the
    log's redaction masks such text, by every key the process has seen)."""
    message = json.loads(REFUSALS[refusal].body or "")["error"]["message"]
    assert isinstance(message, str)
    return message.split(":")[0]


@pytest.mark.parametrize(("api", "stream"), CLIENTS, ids=CLIENT_IDS)
@pytest.mark.parametrize("refusal", sorted(REFUSALS))
def test_an_upstream_refusing_the_proxy_is_a_502_naming_the_model_entry(
    refusal: str, api: str, stream: bool, tmp_path: Path, agentfsm_log: list[str]
) -> None:
    with FakeUpstream([REFUSALS[refusal]]) as fake, proxy(_backend(fake.base_url), model_name=ENTRY,
                                                          transcripts_dir=tmp_path) as url:
        exc = _ask(url, api, stream)
    # never the client's own 401/403/404: its key and its model name were fine
    assert exc.status_code == 502
    assert exc.response.headers["x-should-retry"] == "false"  # the same request fails again
    error = _error(exc)
    assert error["type"] == ("api_error" if api == "anthropic" else "upstream_error")
    message = error["message"]
    assert ENTRY in message and f"HTTP {refusal}" in message
    # the upstream's own answer (its model name, its view of the key) stays with the operator
    assert "upstream-model-name" not in message and "sk-upst" not in message and "Incorrect" not in message
    transcript = "".join(p.read_text() for p in tmp_path.glob("*.jsonl"))
    assert f"HTTP {refusal}" in transcript and "upstream-model-name" in transcript
    # the operator's log names the entry, its upstream model, and what the upstream said
    assert any(f"HTTP {refusal}" in line and ENTRY in line and "upstream-model-name" in line and
               _words(refusal) in line for line in agentfsm_log)
    assert KEY not in transcript + "".join(agentfsm_log) + exc.response.text


@pytest.mark.parametrize(("api", "stream"), CLIENTS, ids=CLIENT_IDS)
def test_an_upstream_503_passes_on_as_503_with_its_retry_after(api: str, stream: bool) -> None:
    with FakeUpstream([status(503, retry_after=30)]) as fake, proxy(_backend(fake.base_url), model_name=ENTRY) as url:
        exc = _ask(url, api, stream)
    assert exc.status_code == 503
    assert exc.response.headers["retry-after"] == "30"
    assert exc.response.headers.get("x-should-retry") != "false"
    assert _error(exc)["type"] == ("overloaded_error" if api == "anthropic" else "server_error")


@pytest.mark.parametrize(("api", "stream"), CLIENTS, ids=CLIENT_IDS)
def test_a_refused_connection_names_the_model_entry_not_the_upstreams_address(
    api: str, stream: bool, tmp_path: Path, agentfsm_log: list[str]
) -> None:
    port = free_port()  # nothing listens there
    with proxy(_backend(f"http://127.0.0.1:{port}/v1"), model_name=ENTRY, transcripts_dir=tmp_path) as url:
        exc = _ask(url, api, stream)
    assert exc.status_code == 502
    message = _error(exc)["message"]
    assert ENTRY in message and "connection" in message
    assert str(port) not in exc.response.text and "127.0.0.1" not in exc.response.text
    # the operator still reads where it failed
    assert any(str(port) in line for line in agentfsm_log)
    assert str(port) in "".join(p.read_text() for p in tmp_path.glob("*.jsonl"))


def test_413_and_429_still_pass_on_as_the_clients_own() -> None:
    # the client can act on these itself: send less, or wait
    replies = [status(413), status(429, retry_after=7)]
    with FakeUpstream(replies) as fake, proxy(_backend(fake.base_url), model_name=ENTRY) as url:
        assert _ask(url, "chat", False).status_code == 413
        limited = _ask(url, "anthropic", False)
    assert limited.status_code == 429 and limited.response.headers["retry-after"] == "7"


#: a reverse proxy's error page, as Apache writes it: it names the upstream's host, port and server
PAGE = ("<html><head><title>502 Proxy Error</title></head><body><h1>Proxy Error</h1><hr>"
        "<address>Apache/2.4.41 (Ubuntu) Server at vllm-7.internal.example Port 8000</address></body></html>")


@pytest.mark.parametrize(("api", "stream"), CLIENTS, ids=CLIENT_IDS)
@pytest.mark.parametrize("code", [502, 200])
def test_an_html_page_is_not_quoted_to_the_client(code: int, api: str, stream: bool, tmp_path: Path,
                                                  agentfsm_log: list[str]) -> None:
    page = raw_body(PAGE, "text/html", status=code)
    with FakeUpstream([page]) as fake, proxy(_backend(fake.base_url), model_name=ENTRY, transcripts_dir=tmp_path) as url:
        exc = _ask(url, api, stream)
    assert exc.status_code == 502
    message = _error(exc)["message"]
    assert ENTRY in message and "internal.example" not in exc.response.text and "Apache" not in exc.response.text
    assert any("vllm-7.internal.example" in line for line in agentfsm_log)
    assert "vllm-7.internal.example" in "".join(p.read_text() for p in tmp_path.glob("*.jsonl"))


def test_an_upstreams_json_error_message_still_reaches_the_client() -> None:
    # what the upstream says of the request (a setting out of its range ...) helps the client
    refusal = status(400, body=json.dumps({"error": {"message": "temperature must be at most 1.5"}}))
    with FakeUpstream([refusal]) as fake, proxy(_backend(fake.base_url), model_name=ENTRY) as url:
        exc = _ask(url, "chat", False)
    assert exc.status_code == 502 and "temperature must be at most 1.5" in _error(exc)["message"]


#: what upstreams answer when the thing behind them fails: (the reply, the address it names,
#: words of the message the client still reads, a field of the body it does not)
ADDRESSED: dict[str, tuple[FakeReply, str, str, str]] = {
    # Ollama's OpenAI-compatible endpoint when its model runner dies
    "ollama": (status(500, body=json.dumps({"error": {"message": 'Post "http://127.0.0.1:39261/completion": EOF',
                                                     "type": "api_error", "param": None, "code": None}})),
               "127.0.0.1:39261", "EOF", "api_error"),
    # Ollama's own shape: the error a string
    "ollama-native": (status(400, body=json.dumps({"error": "runner at 10.0.3.7:11434 has terminated"})),
                      "10.0.3.7", "has terminated", "10.0.3.7"),
    # a gateway in front of the model, naming the host it could not reach
    "gateway": (status(400, body=json.dumps({"error": {
        "message": "APIConnectionError: Cannot connect to host ollama.internal.example:11434 [Connection refused]",
        "type": None, "param": None, "code": "500"}})), "ollama.internal.example", "Connection refused", '"500"'),
    # vLLM's older shape: the message at the top
    "vllm": (status(400, body=json.dumps({"object": "error", "message": "see http://[fd00::7]:8000/docs for limits",
                                          "type": "BadRequestError", "param": None, "code": 400})),
             "fd00::7", "for limits", "BadRequestError"),
    # an error event at the start of a stream
    "stream-event": (raw_body("data: " + json.dumps({"error": {"message": "worker vllm-7.internal.example:8000 lost"}})
                              + "\n\n", "text/event-stream"), "vllm-7.internal.example", "lost", "worker ***"),
}


@pytest.mark.parametrize("kind", sorted(ADDRESSED))
def test_an_upstreams_json_error_reaches_the_client_as_its_message_without_addresses(
    kind: str, tmp_path: Path, agentfsm_log: list[str]
) -> None:
    reply, address, kept, field = ADDRESSED[kind]
    with FakeUpstream([reply]) as fake, proxy(_backend(fake.base_url), model_name=ENTRY, transcripts_dir=tmp_path) as url:
        exc = _ask(url, "chat", kind == "stream-event")
    assert exc.status_code == 502
    message = _error(exc)["message"]
    assert kept in message and ENTRY in message and "***" in message
    assert address not in exc.response.text
    if kind == "stream-event":
        assert field in message  # the message, less its address
    else:
        assert field not in message  # the body's other fields stay with the operator
    # the operator reads the upstream's answer whole
    assert any(address in line for line in agentfsm_log)
    assert address in "".join(p.read_text() for p in tmp_path.glob("*.jsonl"))


@pytest.mark.parametrize(("api", "stream"), CLIENTS, ids=CLIENT_IDS)
def test_every_client_reads_an_upstream_error_without_its_address(api: str, stream: bool) -> None:
    reply = ADDRESSED["ollama"][0]
    with FakeUpstream([reply]) as fake, proxy(_backend(fake.base_url), model_name=ENTRY) as url:
        exc = _ask(url, api, stream)
    assert exc.status_code == 502
    assert 'Post "***": EOF' in _error(exc)["message"]
    assert "39261" not in exc.response.text and "127.0.0.1" not in exc.response.text


@pytest.mark.parametrize("text", [
    "model qwen2.5:7b not found", "llama3.1:70b", "phi3:3.8b", "at 12:30:45 UTC", "temperature must be at most 1.5",
    "max_tokens: 5 is over 4", "Invalid 'messages[1].content'",
])
def test_hide_addresses_leaves_what_is_no_address(text: str) -> None:
    assert hide_addresses(text) == text


@pytest.mark.parametrize(("text", "hidden"), [
    ('Post "http://127.0.0.1:39261/completion": EOF', 'Post "***": EOF'),
    ("see https://docs.example/limits.", "see ***."),
    ("host ollama:11434 down", "host *** down"),
    ("at [::1]:8080, refused", "at ***, refused"),
    ("10.0.3.7 unreachable", "*** unreachable"),
])
def test_hide_addresses_hides_urls_hosts_with_ports_and_ip_addresses(text: str, hidden: str) -> None:
    assert hide_addresses(text) == hidden


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/responses", "/v1/messages"])
def test_a_stream_failing_after_its_first_events_ends_with_an_error_event_naming_the_entry(path: str) -> None:
    delta = json.dumps({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "Some prose "}}]})
    broken = raw_body(f"data: {delta}\n\ndata: {PAGE}\n\n", "text/event-stream")
    history = {"input": "hi"} if path == "/v1/responses" else {"messages": ASK}
    with FakeUpstream([broken]) as fake, proxy(_backend(fake.base_url), model_name=ENTRY, stream_prose="live") as url:
        with httpx.stream("POST", url + path, json={"model": ENTRY, "max_tokens": 64, "stream": True, **history},
                          timeout=30) as response:
            assert response.status_code == 200  # the prose had been sent
            text = response.read().decode()
    assert "Some prose" in text and f"model '{ENTRY}'" in text.split("Some prose", 1)[1]
    assert "internal.example" not in text and "Apache" not in text


#: 200 answers that are no chat completion, each naming an internal address in a field the
#: client must not read: (the body, the address, what the client reads instead)
NOT_A_COMPLETION: dict[str, tuple[str, str, str]] = {
    "no-choices": (json.dumps({"id": "x", "served_by": "http://10.1.2.3:8000/v1", "choices": []}),
                   "10.1.2.3", "upstream answer has no choices"),
    "not-an-object": (json.dumps(["routed via gpu-4.internal.example:9000"]), "gpu-4.internal.example",
                      "upstream body is not a JSON object"),
    # an error object with no message: nothing of it is quoted (it used to read 'None')
    "error-without-message": (json.dumps({"error": {"code": 503, "node": "10.9.9.9:7000"}}), "10.9.9.9",
                              "upstream reported an error"),
}


@pytest.mark.parametrize("kind", sorted(NOT_A_COMPLETION))
def test_a_200_that_is_no_completion_is_not_quoted_to_the_client(kind: str, tmp_path: Path,
                                                                  agentfsm_log: list[str]) -> None:
    body, address, said = NOT_A_COMPLETION[kind]
    with FakeUpstream([raw_body(body, "application/json")]) as fake, proxy(
        _backend(fake.base_url), model_name=ENTRY, transcripts_dir=tmp_path
    ) as url:
        exc = _ask(url, "chat", False)
    assert exc.status_code == 502
    message = _error(exc)["message"]
    assert said in message and ENTRY in message and "None" not in message
    assert address not in exc.response.text  # before: the body's excerpt, address and all
    assert any(address in line for line in agentfsm_log)
    assert address in "".join(p.read_text() for p in tmp_path.glob("*.jsonl"))
