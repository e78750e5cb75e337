"""OpenAICompatBackend against a real upstream: llama-cpp-python's own server on 127.0.0.1,
serving the embedded model file."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import jsonschema
import pytest

from agentfsm.backends import GenerationOptions, OpenAICompatBackend, Timeouts
from agentfsm.backends.local import default_model_path
from agentfsm.core.messages import PromptMessage
from tests._fake import MODES, call

QUESTION = (PromptMessage(role="user", content="What is the capital of France?"),)
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}
STARTUP_LIMIT = 120.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``python -m llama_cpp.server`` on a free port; yields its OpenAI base URL."""
    port = free_port()
    log_path = tmp_path_factory.mktemp("llama-server") / "server.log"
    command = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(default_model_path()),
        "--chat_format", "chatml", "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048",
    ]
    log = log_path.open("wb")  # a file, not a pipe: a full pipe would block the server
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + STARTUP_LIMIT
        while True:
            if process.poll() is not None:
                output = log_path.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"llama_cpp.server exited with {process.returncode}: {output}")
            try:
                if httpx.get(f"{base_url}/models", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("llama_cpp.server did not answer /v1/models in time")
            time.sleep(0.25)
        yield base_url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def backend_for(base_url: str) -> OpenAICompatBackend:
    return OpenAICompatBackend(base_url, "smollm2", api_key="", timeout=Timeouts(5, 60, 120))


@pytest.mark.model
@pytest.mark.parametrize("mode", MODES)
def test_short_chat_completion(llama_server: str, mode: str) -> None:
    with backend_for(llama_server) as backend:
        text = call(backend, mode, GenerationOptions(max_tokens=8), QUESTION)
    assert "Paris" in text


@pytest.mark.model
def test_models_are_listed(llama_server: str) -> None:
    with backend_for(llama_server) as backend:
        assert [m.endswith(".gguf") for m in backend.list_models()] == [True]


@pytest.mark.model
@pytest.mark.parametrize("mode", ["complete", "astream"])
def test_schema_constrained_completion_falls_back_to_json_object(llama_server: str, mode: str) -> None:
    options = GenerationOptions(max_tokens=24, json_schema=SCHEMA)
    with backend_for(llama_server) as backend:
        value = json.loads(call(backend, mode, options, QUESTION))
        jsonschema.validate(value, SCHEMA)
        # the server refused response_format json_schema once; the backend now sends json_object
        assert backend._schema_form == "json_object"
