"""A Claude-Code-sized request against the embedded model, through the real proxy.

The embedded model's own tokenizer counts the prompt (contract included). Claude Code's
full first request (21 tools, ~64 KB of schemas, 3 system blocks) either fits after
compaction and is answered, or is refused with Anthropic's own 400; a prompt that can
never fit is refused before the model runs. Never a 5xx, a crash or a hang.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest

from agentfsm.backends.local import get_local_backend
from tests._proxy import proxy

pytestmark = pytest.mark.model

CLIENTS = Path(__file__).resolve().parent.parent / "fixtures" / "clients"


def _claude_code_body() -> dict[str, Any]:
    body: dict[str, Any] = json.loads((CLIENTS / "claude_code_request_full_tools.json").read_text(encoding="utf-8"))["body"]
    return body


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_claude_codes_full_first_request_is_answered_or_a_clear_400(stream: bool) -> None:
    body = _claude_code_body() | {"max_tokens": 48, "stream": stream}
    with proxy(get_local_backend()) as url:
        counted = httpx.post(f"{url}/v1/messages/count_tokens", json={k: body[k] for k in ("model", "messages", "system", "tools")}, timeout=120)
        assert counted.status_code == 200 and counted.json()["input_tokens"] > 1000
        start = time.monotonic()
        response = httpx.post(f"{url}/v1/messages?beta=true", json=body, timeout=600)
        assert time.monotonic() - start < 600
    assert response.status_code in (200, 400), response.text[:500]
    if response.status_code == 400:
        error = response.json()["error"]
        assert error["type"] == "invalid_request_error" and "prompt is too long" in error["message"]
    elif stream:
        assert "event: message_stop" in response.text and "event: error" not in response.text
    else:
        message = response.json()
        assert message["type"] == "message" and message["stop_reason"] in ("end_turn", "tool_use", "max_tokens")


def test_a_prompt_that_cannot_fit_is_refused_before_the_model_runs() -> None:
    backend = get_local_backend()
    context = backend.capabilities.context_tokens
    assert context is not None and context >= 8192  # SmolLM2's full context by default
    # a user message the size of a long file: more tokens than the whole context
    long = "The quick brown fox jumps over the lazy dog. " * (context // 5)
    with proxy(backend) as url, anthropic.Anthropic(base_url=url, api_key="unused", max_retries=0, timeout=120) as client:
        counted = client.messages.count_tokens(model="m", messages=[{"role": "user", "content": long}])
        assert counted.input_tokens > context
        start = time.monotonic()
        with pytest.raises(anthropic.BadRequestError) as caught:
            client.messages.create(model="m", max_tokens=32, messages=[{"role": "user", "content": long}])
        assert time.monotonic() - start < 60  # decided by counting, not by running the model
    assert caught.value.status_code == 400
    assert "prompt is too long" in str(caught.value.message)
