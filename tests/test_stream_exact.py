"""Exact on the wire: a streamed tool-mode answer carries the text and calls of the same
request answered whole, through the official SDKs of all three protocols.

The upstream is a scripted FakeUpstream on 127.0.0.1; each scenario's first reply is
refused (a guard corrects it and the model is asked again) after its prose was written,
which is where a streamed answer could carry more than the whole one: the refused
attempt's prose, already sent, and then the accepted attempt's.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from agentfsm.testing import FakeUpstream, drip
from tests._proxy import TOOLS_ANTHROPIC, TOOLS_OPENAI, action, proxy, serve_command, upstream_backend

ASK = "What is the weather in Paris?"
RESPONSES_TOOLS: list[Any] = [{"type": "function", **t["function"]} for t in TOOLS_OPENAI]
#: what a client gets: its text and its calls as (name, arguments)
Seen = tuple[str, list[tuple[str, Any]]]


@dataclass(frozen=True)
class Scenario:
    name: str
    replies: tuple[str, ...]
    seen: Seen


SCENARIOS = [
    # the refusal guard judges the whole reply: it says it has no live data
    Scenario(
        "refusal-then-call",
        ("I'm sorry, but I do not have access to real-time weather data.",
         "Let me check.\n" + action("get_weather", city="Paris")),
        ("Let me check.", [("get_weather", {"city": "Paris"})]),
    ),
    # prose, then an action for a tool that does not exist: the whole reply is refused
    Scenario(
        "prose-then-unknown-tool-then-answer",
        ("Sure, I will look that up for you.\n" + action("get_wether", city="Paris"),
         "I can look it up: shall I call the weather tool for Paris?"),
        ("I can look it up: shall I call the weather tool for Paris?", []),
    ),
    # prose, then an action whose arguments break the schema, then a call
    Scenario(
        "prose-then-bad-arguments-then-call",
        ("Checking the forecast now.\n" + action("get_weather", town="Paris"),
         action("get_weather", city="Paris")),
        ("", [("get_weather", {"city": "Paris"})]),
    ),
]


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[FakeUpstream, str]]:
    with FakeUpstream([]) as fake, proxy(upstream_backend(fake)) as base:
        yield fake, base


def _openai(base: str, stream: bool) -> Seen:
    with openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0, timeout=30) as client:
        args: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": ASK}], "tools": TOOLS_OPENAI}
        if not stream:
            message = client.chat.completions.create(**args).choices[0].message
            calls = [(c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls or []]
            return (message.content or "").strip(), calls
        text, parts = "", {}
        for chunk in client.chat.completions.create(**args, stream=True):
            if not chunk.choices:
                continue
            text += chunk.choices[0].delta.content or ""
            for d in chunk.choices[0].delta.tool_calls or []:
                entry = parts.setdefault(d.index, ["", ""])
                entry[0] += (d.function.name or "") if d.function else ""
                entry[1] += (d.function.arguments or "") if d.function else ""
        return text.strip(), [(name, json.loads(arguments)) for name, arguments in parts.values()]


def _anthropic(base: str, stream: bool) -> Seen:
    with anthropic.Anthropic(base_url=base, api_key="x", max_retries=0, timeout=30) as client:
        args: dict[str, Any] = {"model": "m", "max_tokens": 256, "tools": TOOLS_ANTHROPIC,
                                "messages": [{"role": "user", "content": ASK}]}
        if stream:
            with client.messages.stream(**args) as events:
                text = "".join(e.text for e in events if e.type == "text")
                message = events.get_final_message()
            assert text == "".join(b.text for b in message.content if b.type == "text")
        else:
            message = client.messages.create(**args)
    text = "".join(b.text for b in message.content if b.type == "text")
    return text.strip(), [(b.name, b.input) for b in message.content if b.type == "tool_use"]


def _responses(base: str, stream: bool) -> Seen:
    with openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0, timeout=30) as client:
        args: dict[str, Any] = {"model": "m", "input": ASK, "tools": RESPONSES_TOOLS}
        if stream:
            with client.responses.stream(**args) as events:
                text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
                final = events.get_final_response()
            assert text == final.output_text
        else:
            final = client.responses.create(**args)
    calls = [(item.name, json.loads(item.arguments)) for item in final.output if item.type == "function_call"]
    return final.output_text.strip(), calls


@pytest.mark.parametrize("speak", [_openai, _anthropic, _responses], ids=lambda f: f.__name__.strip("_"))
@pytest.mark.parametrize("s", SCENARIOS, ids=lambda s: s.name)
def test_streamed_answer_is_the_whole_answer(s: Scenario, speak: Any, served: tuple[FakeUpstream, str]) -> None:
    fake, base = served
    seen = []
    for stream in (False, True):
        fake.enqueue(*s.replies)
        before = len(fake.chat_requests)
        seen.append(speak(base, stream))
        assert len(fake.chat_requests) - before == len(s.replies), "the first reply was not refused"
    assert seen[0] == s.seen
    assert seen[1] == seen[0]


def _first_delta(base: str, fake: FakeUpstream) -> tuple[str, bool]:
    """A streamed request's text, and whether the upstream was still writing its reply
    when the first text delta arrived."""
    with openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0, timeout=60) as client:
        stream = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": ASK}], tools=TOOLS_OPENAI, stream=True
        )
        text, early = "", None
        for chunk in stream:
            delta = chunk.choices[0].delta.content if chunk.choices else None
            if delta and early is None:
                early = fake.in_flight > 0
            text += delta or ""
    assert early is not None
    return text, early


#: a reply the fake drips a byte at a time: an answer still being written
_LONG = "The forecast for Paris: mild, 18 C by noon."


def test_exact_prose_leaves_once_accepted_and_live_prose_as_written(tmp_path: Path) -> None:
    with FakeUpstream([]) as fake:
        with proxy(upstream_backend(fake)) as exact:
            fake.enqueue(drip(0.0002, text=_LONG))
            text, early = _first_delta(exact, fake)
            assert text == _LONG.strip() and not early
        # the serve option, through the command: the first words while the model writes,
        # and a refused reply's prose stays with the client (under the prompt contract: a
        # command-line upstream may be asked for JSON under a grammar, always held)
        options = ("--stream-prose", "live", "--enforcement", "prompt")
        with serve_command(fake.base_url, tmp_path, options=options) as served:
            fake.enqueue(drip(0.0002, text=_LONG))
            text, early = _first_delta(served.url, fake)
            assert text.strip() == _LONG.strip() and early
            refused, accepted = SCENARIOS[1].replies
            fake.enqueue(refused, accepted)
            text, _ = _first_delta(served.url, fake)
            assert text.startswith("Sure, I will look that up for you.") and text.endswith(accepted)
