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
#: a model that keeps calling a tool that is not offered: the budget is spent with no prose
NEVER = action("search_the_web", query="weather in Paris")
AGENTS_GIVEUP = ["giveup-responses", "giveup-chat"]
PYDANTIC_AI_GIVEUP = ["giveup-openai", "giveup-openai-responses", "giveup-anthropic"]

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


@pytest.mark.parametrize("mode", AGENTS_OUTPUT)
def test_openai_agents_output_type_a_prose_answer_is_corrected_to_the_schema(run_group: RunGroup, mode: str) -> None:
    """With tools, openai-agents' output_type was only named in x-agentfsm-ignored: a model
    answering in prose made the client raise. Now the schema is in the contract, and the
    prose answer is corrected to its JSON."""
    group = run_group("openai_agents.py", AGENTS_OUTPUT, (CALL, "It is 18 C and sunny in Paris.", WEATHER_JSON),
                      evidence=RESULT)
    assert group.result(mode)["final"] == {"city": "Paris", "temperature_c": 18}
    contracts = [r.messages[0]["content"] for r in group.seen]
    assert all('"temperature_c"' in c for c in contracts), group.ran.report(group.proxy)


def _gave_up(ran_modes: dict[str, dict[str, object]], mode: str, report: str) -> str:
    result = ran_modes.get(mode)
    assert result is not None and "error" in result, f"{mode} did not raise\n{report}"
    error = str(result["error"])
    assert "InternalServerError" in error and "no acceptable reply after 4 attempts" in error, report
    return error


@pytest.mark.parametrize("mode", AGENTS_GIVEUP)
def test_openai_agents_sees_a_spent_budget_as_an_error(run_group: RunGroup, mode: str) -> None:
    """It got an empty message (final_output "") and reported success."""
    group = run_group("openai_agents.py", AGENTS_GIVEUP, (NEVER,))
    _gave_up(group.ran.by_mode(), mode, group.ran.report(group.proxy))


@pytest.mark.parametrize("mode", PYDANTIC_AI_GIVEUP)
def test_pydantic_ai_sees_a_spent_budget_as_an_error(run_group: RunGroup, mode: str) -> None:
    group = run_group("pydantic_ai_client.py", PYDANTIC_AI_GIVEUP, (NEVER,))
    _gave_up(group.ran.by_mode(), mode, group.ran.report(group.proxy))
