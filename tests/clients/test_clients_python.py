"""Python agent frameworks and SDK wrappers, unmodified, against ``agentfsm serve``.

Each mode runs a full loop: the model (the scripted upstream) writes a get_weather call
as text, the framework runs the tool, sends the result, and gets the final answer,
which the upstream only writes once the result is in its prompt. One process runs all
the modes of one library (one import); each mode is still its own test.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.clients._harness import Group, action

pytestmark = pytest.mark.clients

CALL = action("get_weather", city="Paris")
ANSWER = "It is 18 C and sunny in Paris."
RESULT = "18 C and sunny in Paris"  # what the tool returns: the upstream must see it
WEATHER_JSON = '{"city": "Paris", "temperature_c": 18}'

AGENTS = ["responses", "responses-stream", "chat", "chat-stream"]
AGENTS_OUTPUT = ["output-chat", "output-responses"]
AGENTS_NOTOOLS = ["output-chat-notools", "output-responses-notools"]
PYDANTIC_AI = ["openai", "openai-stream", "openai-responses", "anthropic", "anthropic-stream"]
LANGCHAIN = ["openai", "openai-stream", "openai-responses", "anthropic", "anthropic-stream", "langgraph"]
LITELLM = ["whole", "stream", "responses"]

RunGroup = Callable[..., Group]


def _loop(run_group: RunGroup, script: str, modes: list[str], mode: str, answer: str = ANSWER) -> dict[str, object]:
    group = run_group(script, modes, (CALL, answer), evidence=RESULT)
    result = group.result(mode)
    assert result["calls"] == [{"city": "Paris"}], group.ran.report(group.proxy)
    return result


@pytest.mark.parametrize("mode", AGENTS)
def test_openai_agents(run_group: RunGroup, mode: str) -> None:
    assert _loop(run_group, "openai_agents.py", AGENTS, mode)["final"] == ANSWER


@pytest.mark.parametrize("mode", AGENTS_OUTPUT)
def test_openai_agents_output_type(run_group: RunGroup, mode: str) -> None:
    result = _loop(run_group, "openai_agents.py", AGENTS_OUTPUT, mode, WEATHER_JSON)
    assert result["final"] == {"city": "Paris", "temperature_c": 18}


@pytest.mark.parametrize("mode", AGENTS_NOTOOLS)
def test_openai_agents_output_type_reaches_the_model(run_group: RunGroup, mode: str) -> None:
    """Without tools the client's schema goes upstream as ``response_format`` (with tools,
    replies must be actions, so it is reported in ``x-agentfsm-ignored`` instead)."""
    group = run_group("openai_agents.py", AGENTS_NOTOOLS, (WEATHER_JSON,))
    assert group.result(mode)["final"] == {"city": "Paris", "temperature_c": 18}
    assert len(group.seen) == len(AGENTS_NOTOOLS), group.ran.report(group.proxy)
    for sent in group.seen:
        fmt = sent.body.get("response_format")
        assert fmt is not None and fmt["type"] == "json_schema", group.ran.report(group.proxy)
        assert set(fmt["json_schema"]["schema"]["properties"]) == {"city", "temperature_c"}


@pytest.mark.parametrize("mode", PYDANTIC_AI)
def test_pydantic_ai(run_group: RunGroup, mode: str) -> None:
    assert _loop(run_group, "pydantic_ai_client.py", PYDANTIC_AI, mode)["final"] == ANSWER


@pytest.mark.parametrize("mode", LANGCHAIN)
def test_langchain_and_langgraph(run_group: RunGroup, mode: str) -> None:
    result = _loop(run_group, "langchain_client.py", LANGCHAIN, mode)
    assert result["final"] == ANSWER
    if mode == "langgraph":
        assert result["messages"] == 4  # question, call, result, answer
    else:
        assert result["tool_calls"] == 1


@pytest.mark.parametrize("mode", LITELLM)
def test_litellm(run_group: RunGroup, mode: str) -> None:
    result = _loop(run_group, "litellm_client.py", LITELLM, mode)
    assert result["final"] == ANSWER and result["tool_calls"] == 1
