"""A client's stop sequences: they end the answer, never the model's actions.

The upstream is a real HTTP server that honours ``stop`` as a real one does (the text cut
before the sequence, named in vLLM's ``stop_reason``); clients are the official SDKs.
With tools, a stop sequence such as a code fence would cut the json-action block the
model writes, so the proxy does not send it upstream and ends the answer itself; without
tools the upstream ends the text and names the sequence, which Anthropic's shape passes on.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from agentfsm.core.stops import StopCutter, cut_at_stop
from agentfsm.testing import FakeUpstream
from tests._proxy import TOOLS_ANTHROPIC, TOOLS_OPENAI, action, proxy, upstream_backend

USER = [{"role": "user", "content": "What is the weather in Paris?"}]
FENCE = "```"


def test_cut_at_stop_ends_at_the_first_sequence_that_completes() -> None:
    assert cut_at_stop("a b END c STOP", ["STOP", "END"]) == ("a b ", "END")
    # generation stops where a sequence completes: "XY" ends before "ABCDXYZ" could
    assert cut_at_stop("ABCDXYZ", ["BCDXYZ", "XY"]) == ("ABCD", "XY")
    assert cut_at_stop("no stop here", ["END", ""]) == ("no stop here", None)
    assert cut_at_stop("", ["END"]) == ("", None)


@pytest.mark.parametrize("seed", range(20))
def test_the_cutter_over_pieces_agrees_with_the_whole_text(seed: int) -> None:
    rng = random.Random(seed)
    stops = ["END", "\n\n", "```", "ab" * rng.randint(1, 3)]
    text = "".join(rng.choice(["a", "b", "E", "N", "D", "\n", "`", " x"]) for _ in range(rng.randint(0, 60)))
    cutter = StopCutter(stops)
    out, i = [], 0
    while i < len(text):
        step = rng.randint(1, 5)
        out.append(cutter.feed(text[i:i + step]))
        i += step
    out.append(cutter.flush())
    assert ("".join(out), cutter.matched) == cut_at_stop(text, stops)


@pytest.fixture
def served() -> Iterator[tuple[FakeUpstream, str]]:
    with FakeUpstream([], honour_stop=True) as fake:
        with proxy(upstream_backend(fake)) as url:
            yield fake, url


def _sent_stops(fake: FakeUpstream) -> list[Any]:
    return [r.body.get("stop") for r in fake.chat_requests]


@pytest.mark.parametrize("stream", [False, True])
def test_with_tools_a_fence_stop_does_not_cut_the_action(served: tuple[FakeUpstream, str], stream: bool) -> None:
    fake, url = served
    fake.enqueue(action("get_weather", city="Paris"))
    with openai.OpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0) as client:
        if stream:
            chunks = list(client.chat.completions.create(
                model="m", messages=USER, tools=TOOLS_OPENAI, stop=[FENCE], stream=True))  # type: ignore[arg-type]
            names = [tc.function.name for c in chunks for ch in c.choices for tc in (ch.delta.tool_calls or [])
                     if tc.function is not None and tc.function.name]
            finish = [ch.finish_reason for c in chunks for ch in c.choices if ch.finish_reason]
        else:
            completion = client.chat.completions.create(
                model="m", messages=USER, tools=TOOLS_OPENAI, stop=[FENCE])  # type: ignore[arg-type]
            names = [tc.function.name for tc in completion.choices[0].message.tool_calls or []]  # type: ignore[union-attr]
            finish = [completion.choices[0].finish_reason]
    assert names == ["get_weather"] and finish == ["tool_calls"]
    assert _sent_stops(fake) == [None]  # the fence never reached the upstream


def _after_the_result() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "What is the weather in Paris?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                                           "input": {"city": "Paris"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny, 21 C"}]},
    ]


def _ask(client: anthropic.Anthropic, kwargs: dict[str, Any], stream: bool) -> tuple[str, Any]:
    """The answer's text and its final message, whole or streamed (the SDK's stream helper)."""
    if stream:
        with client.messages.stream(**kwargs) as events:
            return "".join(events.text_stream), events.get_final_message()
    message = client.messages.create(**kwargs)
    return "".join(b.text for b in message.content if b.type == "text"), message


@pytest.mark.parametrize("stream", [False, True])
def test_with_tools_the_answer_ends_at_the_clients_stop_sequence(served: tuple[FakeUpstream, str], stream: bool) -> None:
    fake, url = served
    fake.enqueue("It is sunny in Paris, 21 C.\n\nEND\nSources: none.")
    with anthropic.Anthropic(base_url=url, api_key="k", max_retries=0) as client:
        kwargs: dict[str, Any] = {"model": "m", "max_tokens": 256, "messages": _after_the_result(),
                                  "tools": TOOLS_ANTHROPIC, "stop_sequences": ["END", "Sources:"]}
        text, message = _ask(client, kwargs, stream)
    assert text == "It is sunny in Paris, 21 C.\n\n"
    assert message.stop_reason == "stop_sequence" and message.stop_sequence == "END"
    assert _sent_stops(fake) == [None]


@pytest.mark.parametrize("stream", [False, True])
def test_without_tools_the_upstream_ends_the_text_and_names_the_sequence(
    served: tuple[FakeUpstream, str], stream: bool
) -> None:
    fake, url = served
    fake.enqueue("Bonjour. END Ignored.", "Bonjour. END Ignored.")
    with anthropic.Anthropic(base_url=url, api_key="k", max_retries=0) as client:
        kwargs: dict[str, Any] = {"model": "m", "max_tokens": 64, "messages": USER, "stop_sequences": ["END"]}
        text, message = _ask(client, kwargs, stream)
    assert text == "Bonjour. "
    assert message.stop_reason == "stop_sequence" and message.stop_sequence == "END"
    with openai.OpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0) as oc:
        completion = oc.chat.completions.create(model="m", messages=USER, stop="END")  # type: ignore[arg-type]
    assert completion.choices[0].message.content == "Bonjour. " and completion.choices[0].finish_reason == "stop"
    assert _sent_stops(fake) == [["END"], ["END"]]


def test_the_agent_loop_keeps_stop_sequences_to_the_answer() -> None:
    """The library's own loop runs the same turn: an action is never cut by a stop
    sequence (the backend is sent none), and the final answer ends before it."""
    from agentfsm import Agent
    from agentfsm.backends import ScriptedBackend
    from agentfsm.core.backend import GenerationOptions

    def get_weather(city: str) -> str:
        """Weather in a city."""
        return f"sunny in {city}"

    backend = ScriptedBackend([action("get_weather", city="Paris"), "Sunny in Paris.\n\nEND of answer"])
    agent = Agent(backend, [get_weather], options=GenerationOptions(stop=(FENCE, "\n\nEND")))
    result = agent.run("What is the weather in Paris?")
    assert [c.name for m in result.messages for c in getattr(m, "tool_calls", ())] == ["get_weather"]
    assert result.content == "Sunny in Paris."
    assert all(r.options.stop == () for r in backend.requests)
