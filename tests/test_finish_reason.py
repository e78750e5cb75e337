"""``finish_reason=length``: an action in a reply cut at the token limit is a correction,
never a call; an answer cut there ends with ``length`` (Anthropic ``max_tokens``).

The runner passes the backend's finish_reason to the engine whether the reply came whole
or streamed (:class:`~agentfsm.core.backend.TextStream` reports it).
"""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import pytest

from agentfsm import Agent
from agentfsm.backends import ScriptedBackend
from agentfsm.core.backend import Completion
from agentfsm.engine.decide import CallTools, Correct, EngineConfig, step
from agentfsm.core.messages import UserMessage
from agentfsm.runtime.tools import ToolRegistry
from agentfsm.testing import FakeReply, FakeUpstream
from tests._proxy import TOOLS_ANTHROPIC, TOOLS_OPENAI, action, base, fake  # base, fake: fixtures

ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


def get_weather(city: str) -> str:
    """Weather in a city."""
    return f"sunny in {city}"


def test_the_engine_corrects_a_call_cut_at_the_token_limit() -> None:
    config = EngineConfig(tools=ToolRegistry([get_weather]).specs)
    history = [UserMessage(content="Weather in Paris?")]
    reply = action("get_weather", city="Paris")
    assert isinstance(step(history, reply, config), CallTools)
    cut = step(history, reply, config, finish_reason="length")
    assert isinstance(cut, Correct) and cut.reason == "truncated_action"


def get_time(city: str) -> str:
    """Local time in a city."""
    return f"noon in {city}"


@pytest.mark.parametrize("named, other", [("get_time", "get_weather"), ("get_weather", "get_time")])
def test_the_correction_of_a_cut_call_shows_the_tool_it_was_calling(named: str, other: str) -> None:
    # an example of another tool steered the retry to that tool
    config = EngineConfig(tools=ToolRegistry([get_weather, get_time]).specs)
    cut = '{"action": {"tool": "%s", "args": {"city": "Par' % named
    decision = step([UserMessage(content="Paris?")], cut, config, finish_reason="length")
    assert isinstance(decision, Correct) and decision.reason == "truncated_action"
    text = decision.message.content or ""
    assert "Example:" in text and named in text.split("Example:", 1)[1] and other not in text


def test_a_correction_with_no_tool_named_shows_the_first_tool() -> None:
    config = EngineConfig(tools=ToolRegistry([get_weather, get_time]).specs)
    decision = step([UserMessage(content="Paris?")], '{"action": {"to', config, finish_reason="length")
    assert isinstance(decision, Correct)
    assert "get_weather" in (decision.message.content or "").split("Example:", 1)[1]


def test_the_agent_never_runs_a_cut_call() -> None:
    ran: list[str] = []

    def weather(city: str) -> str:
        """Weather in a city."""
        ran.append(city)
        return "sunny"

    backend = ScriptedBackend([
        Completion(text=action("weather", city="Par"), finish_reason="length"),
        action("weather", city="Paris"),
        "Sunny.",
    ])
    result = Agent(backend, [weather]).run("Weather in Paris?")
    assert ran == ["Paris"] and result.corrections == 1 and result.content == "Sunny."


def _openai(base: str, stream: bool) -> tuple[list[Any], str]:
    with openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0, timeout=30) as c:
        args: dict[str, Any] = {"model": "m", "messages": ASK, "tools": TOOLS_OPENAI}
        if stream:
            chunks = [ch for ch in c.chat.completions.create(**args, stream=True) if ch.choices]
            names = [d.function.name for ch in chunks for d in ch.choices[0].delta.tool_calls or [] if d.function and d.function.name]
            return names, str(chunks[-1].choices[0].finish_reason)
        choice = c.chat.completions.create(**args).choices[0]
        return [t.function.name for t in choice.message.tool_calls or []], str(choice.finish_reason)


def _anthropic(base: str, stream: bool) -> tuple[list[Any], str]:
    with anthropic.Anthropic(base_url=base, api_key="x", max_retries=0, timeout=30) as c:
        args: dict[str, Any] = {"model": "m", "max_tokens": 64, "messages": ASK, "tools": TOOLS_ANTHROPIC}
        if stream:
            with c.messages.stream(**args) as events:
                message = events.get_final_message()
        else:
            message = c.messages.create(**args)
    return [b.name for b in message.content if b.type == "tool_use"], str(message.stop_reason)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("speak", [_openai, _anthropic], ids=["openai", "anthropic"])
def test_the_proxy_corrects_a_cut_call_and_passes_a_cut_answer_on(
    speak: Any, stream: bool, fake: FakeUpstream, base: str
) -> None:
    fake.enqueue(FakeReply(text=action("get_weather", city="Par"), finish_reason="length"), action("get_weather", city="Paris"))
    names, finish = speak(base, stream)
    assert names == ["get_weather"] and finish in ("tool_calls", "tool_use")
    assert len(fake.chat_requests) == 2  # the cut call was corrected, not returned
    fake.enqueue(FakeReply(text="It is sunny in Paris and", finish_reason="length"))
    names, finish = speak(base, stream)
    assert names == [] and finish in ("length", "max_tokens")
