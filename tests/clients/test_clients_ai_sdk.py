"""The Vercel AI SDK (``ai`` with ``@ai-sdk/openai-compatible``, ``@ai-sdk/openai`` and
``@ai-sdk/anthropic``): generateText and streamText with a tool over three steps (two
calls, each after the last one's result, then the answer).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.clients._harness import Proxy, action, run_node

pytestmark = pytest.mark.clients

ANSWER = "Paris: 18 C and sunny. Rome: 18 C and sunny."


@pytest.mark.parametrize(
    ("mode", "provider"),
    [
        ("generate", "compatible"),
        ("stream", "compatible"),
        ("generate", "openai"),
        ("stream", "openai"),
        ("stream", "openai-chat"),
        ("stream", "anthropic"),
    ],
)
def test_ai_sdk_multi_step(proxy: Proxy, tmp_path: Path, mode: str, provider: str) -> None:
    proxy.upstream.script(action("get_weather", city="Paris"), action("get_weather", city="Rome"), ANSWER)
    ran = run_node("ai_sdk.cjs", proxy, tmp_path, mode, provider)
    assert ran.returncode == 0, ran.report(proxy)
    result = ran.last_json()
    assert result["calls"] == [{"city": "Paris"}, {"city": "Rome"}], ran.report(proxy)
    assert result["steps"] == 3 and result["final"] == ANSWER, ran.report(proxy)
    if mode == "stream":
        assert result["streamed"] == ANSWER
    assert "18 C and sunny in Rome" in json.dumps(proxy.upstream.seen[-1].body["messages"])
