"""What a client's history may hold, read alike by the three protocols (the history audit).

Each case was reproduced through a real proxy on 127.0.0.1 in front of a scripted upstream
(:class:`~agentfsm.testing.FakeUpstream`) and sent with the official SDKs:

- two calls of one id in one assistant turn were answered "the conversation ends with
  tool calls that have no result yet" (the second call shadowed the first); now a 400
  naming the id and both places, as Anthropic's "tool_use ids must be unique", but where
  the second is a copy of the first (same tool and arguments): that is one call, read
  once and named in ``x-agentfsm-ignored``;
- two results for one call were accepted, both shown to the model; now a 400 naming
  both, as Anthropic's "each tool_use must have a single result" and OpenAI's
  "Duplicate value for 'tool_call_id'";
- a chat ``stop`` of 5 sequences went upstream (OpenAI takes at most 4); now a 400;
- Anthropic ``thinking`` blocks and Responses ``reasoning`` items were dropped without a
  word, while a chat ``reasoning_content`` was named: all three are now dropped and named
  in ``x-agentfsm-ignored``, and never reach the model.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
import pytest

from agentfsm.testing import FakeUpstream
from tests._proxy import TOOLS_ANTHROPIC, TOOLS_OPENAI, base, fake

__all__ = ["base", "fake"]  # the fixtures, used by name

PROTOCOLS = ["anthropic", "openai", "responses"]
_TIME = {"tz": "UTC"}
_RESPONSES_TOOLS: list[Any] = [{"type": "function", **tool["function"]} for tool in TOOLS_OPENAI]


def _call(protocol: str, call_id: str) -> Any:
    """A get_time call; an id written ``ID@TZ`` calls it for that zone (UTC otherwise)."""
    call_id, _, tz = call_id.partition("@")
    arguments = {"tz": tz or "UTC"}
    if protocol == "openai":
        return {"id": call_id, "type": "function", "function": {"name": "get_time", "arguments": json.dumps(arguments)}}
    if protocol == "anthropic":
        return {"type": "tool_use", "id": call_id, "name": "get_time", "input": arguments}
    return {"type": "function_call", "call_id": call_id, "name": "get_time", "arguments": json.dumps(arguments)}


def _result(protocol: str, call_id: str, text: str = "12:00") -> Any:
    if protocol == "openai":
        return {"role": "tool", "tool_call_id": call_id, "content": text}
    if protocol == "anthropic":
        return {"type": "tool_result", "tool_use_id": call_id, "content": text}
    return {"type": "function_call_output", "call_id": call_id, "output": text}


def _history(protocol: str, turns: list[tuple[list[str], list[str]]]) -> list[Any]:
    """A user question, then per turn: one assistant turn calling ``ids``, the results of ``answered``."""
    out: list[Any] = [{"role": "user", "content": "What time is it?"}]
    for ids, answered in turns:
        calls = [_call(protocol, i) for i in ids]
        results = [_result(protocol, i) for i in answered]
        if protocol == "openai":
            out += [{"role": "assistant", "content": None, "tool_calls": calls}, *results]
        elif protocol == "anthropic":
            out += [{"role": "assistant", "content": calls}, {"role": "user", "content": results}]
        else:
            out += [*calls, *results]
    return out


def _send(base: str, protocol: str, history: list[Any], stream: bool = False, **extra: Any) -> Any:
    """The proxy's answer through the protocol's SDK (the raw response); an SDK error is raised."""
    if protocol == "anthropic":
        with anthropic.Anthropic(base_url=base, api_key="x", max_retries=0) as client:
            raw = client.messages.with_raw_response.create(
                model="m", max_tokens=100, tools=TOOLS_ANTHROPIC, messages=history, stream=stream, **extra
            )
            raw.parse()
            return raw
    with openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0) as client:
        if protocol == "openai":
            chat = client.chat.completions.with_raw_response.create(
                model="m", tools=TOOLS_OPENAI, messages=history, stream=stream, **extra
            )
            chat.parse()
            return chat
        response = client.responses.with_raw_response.create(
            model="m", tools=_RESPONSES_TOOLS, input=history, stream=stream, **extra
        )
        response.parse()
        return response


def _refusal(base: str, protocol: str, history: list[Any], stream: bool) -> tuple[str, str | None]:
    """The 400's message and ``param`` (None in Anthropic's shape, which has no param)."""
    error = anthropic.BadRequestError if protocol == "anthropic" else openai.BadRequestError
    with pytest.raises(error) as info:
        _send(base, protocol, history, stream)
    assert isinstance(info.value, anthropic.BadRequestError | openai.BadRequestError)
    assert info.value.status_code == 400
    if isinstance(info.value, anthropic.BadRequestError):
        body = info.value.body
        assert isinstance(body, dict) and body["error"]["type"] == "invalid_request_error"
        return str(body["error"]["message"]), None
    assert isinstance(info.value, openai.BadRequestError) and info.value.type == "invalid_request_error"
    return _message(info.value), info.value.param


def _message(error: openai.APIStatusError) -> str:
    """The message of an OpenAI error body (the SDK's ``message`` leads with the status)."""
    body = error.body
    assert isinstance(body, dict)
    return str(body["message"])


#: where each protocol's history puts the second call of the first turn, and its second result
_SECOND_CALL = {
    "openai": ("messages[1].tool_calls[1].id", "messages[1].tool_calls[0].id"),
    "anthropic": ("messages[1].content[1].id", "messages[1].content[0].id"),
    "responses": ("input[2].call_id", "input[1].call_id"),
}
_SECOND_RESULT = {
    "openai": ("messages[3]", "messages[2]", "tool_call_id"),
    "anthropic": ("messages[2].content[1]", "messages[2].content[0]", "tool_use_id"),
    "responses": ("input[3]", "input[2]", "call_id"),
}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_two_calls_of_one_id_in_one_turn_are_a_400_naming_both(
    fake: FakeUpstream, base: str, protocol: str, stream: bool
) -> None:
    # defect: "the conversation ends with tool calls that have no result yet (call_1)"
    history = _history(protocol, [(["call_1", "call_1@Europe/Oslo"], ["call_1"])])
    message, param = _refusal(base, protocol, history, stream)
    second, first = _SECOND_CALL[protocol]
    assert message.startswith(f"{second}: tool call id 'call_1' is used twice in one assistant turn (first at {first})")
    assert "no result yet" not in message
    assert param in (None, second)
    assert fake.chat_requests == []  # refused before the model was asked


#: how each protocol names a call written twice over in x-agentfsm-ignored
_REPEATED = {"openai": "messages.repeated_tool_call", "anthropic": "messages.repeated_tool_use",
             "responses": "input.repeated_function_call"}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_one_call_written_twice_over_is_read_once_and_named(
    fake: FakeUpstream, base: str, protocol: str, stream: bool
) -> None:
    # Claude Code 2.1.19 and 2.1.20 sent a tool_use block twice (same id, tool and input)
    # with one result, which Anthropic's API refused; the copy means one call: served
    fake.enqueue("It is 12:00.")
    raw = _send(base, protocol, _history(protocol, [(["call_1", "call_1"], ["call_1"])]), stream)
    assert raw.headers["x-agentfsm-ignored"] == _REPEATED[protocol]
    prompt = fake.chat_requests[-1].body["messages"]
    assert sum(str(m["content"]).count("get_time") for m in prompt if m["role"] == "assistant") == 1  # the call once


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_two_results_for_one_call_are_a_400_naming_both(fake: FakeUpstream, base: str, protocol: str) -> None:
    # defect: accepted, and the model was shown both results
    message, param = _refusal(base, protocol, _history(protocol, [(["call_1"], ["call_1", "call_1"])]), False)
    second, first, key = _SECOND_RESULT[protocol]
    assert message.startswith(f"{second}: a second result for the call 'call_1' (the first is at {first})")
    assert param in (None, f"{second}.{key}")
    assert fake.chat_requests == []


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_result_that_answers_no_call_is_a_400_naming_it(fake: FakeUpstream, base: str, protocol: str) -> None:
    history = _history(protocol, [(["call_1"], [])])
    history.append(_result(protocol, "call_9") if protocol != "anthropic" else {"role": "user", "content": [_result(protocol, "call_9")]})
    message, _ = _refusal(base, protocol, history, False)
    assert "'call_9' answers no earlier" in message


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_an_id_used_again_in_a_later_turn_is_read(fake: FakeUpstream, base: str, protocol: str) -> None:
    # some servers number their calls per reply: each result answers the latest call of its id
    fake.enqueue("It is 13:00.")
    history = _history(protocol, [(["call_1"], ["call_1"]), (["call_1", "call_2"], ["call_1", "call_2"])])
    _send(base, protocol, history)
    assert len(fake.chat_requests) == 1


# --- stop sequences --------------------------------------------------------------------

_USER = [{"role": "user", "content": "Count."}]


def test_a_chat_stop_of_more_than_four_sequences_is_a_400(fake: FakeUpstream, base: str) -> None:
    # defect: five went upstream, which OpenAI refuses ("up to 4 sequences")
    fake.enqueue("1 2 3")
    with openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0) as client:
        with pytest.raises(openai.BadRequestError) as info:
            client.chat.completions.create(model="m", messages=_USER, stop=["a", "b", "c", "d", "e"])  # type: ignore[arg-type]
        assert (info.value.param, _message(info.value)) == ("stop", "stop takes at most 4 sequences, got 5")
        assert fake.chat_requests == []
        client.chat.completions.create(model="m", messages=_USER, stop=["a", "b", "c", "d"])  # type: ignore[arg-type]
    assert fake.chat_requests[-1].body["stop"] == ["a", "b", "c", "d"]


def test_anthropic_stop_sequences_take_more_than_four(fake: FakeUpstream, base: str) -> None:
    # Anthropic documents no such bound: five are passed on
    fake.enqueue("1 2 3")
    with anthropic.Anthropic(base_url=base, api_key="x", max_retries=0) as client:
        client.messages.create(model="m", max_tokens=50, messages=_USER, stop_sequences=["a", "b", "c", "d", "e"])  # type: ignore[arg-type]
    assert fake.chat_requests[-1].body["stop"] == ["a", "b", "c", "d", "e"]


@pytest.mark.parametrize("protocol", ["anthropic", "openai"])
def test_a_stop_sequence_that_is_no_string_is_a_400_naming_it(fake: FakeUpstream, base: str, protocol: str) -> None:
    bad: Any = ["a", 1]
    if protocol == "anthropic":
        with anthropic.Anthropic(base_url=base, api_key="x", max_retries=0) as client:
            with pytest.raises(anthropic.BadRequestError) as info:
                client.messages.create(model="m", max_tokens=50, messages=_USER, stop_sequences=bad)  # type: ignore[arg-type]
            assert "stop_sequences[1] must be a string, got number" in str(info.value)
    else:
        with openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0) as client:
            with pytest.raises(openai.BadRequestError) as oinfo:
                client.chat.completions.create(model="m", messages=_USER, stop=bad)  # type: ignore[arg-type]
            assert (oinfo.value.param, _message(oinfo.value)) == ("stop[1]", "stop[1] must be a string, got number")
    assert fake.chat_requests == []


# --- reasoning in the history ----------------------------------------------------------

_SECRET = "PRIVATE-REASONING-7f3a"


def _reasoned(protocol: str) -> list[Any]:
    """A history whose assistant turns carry reasoning beside their text and their call."""
    question = {"role": "user", "content": "What time is it?"}
    follow_up = {"role": "user", "content": "And in Oslo?"}
    if protocol == "anthropic":
        return [
            question,
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": _SECRET, "signature": "c2ln"},
                {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"},
                {"type": "text", "text": "Let me check."},
                _call(protocol, "toolu_1"),
            ]},
            {"role": "user", "content": [_result(protocol, "toolu_1")]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": _SECRET, "signature": "c2ln"},
                {"type": "text", "text": "It is 12:00."},
            ]},
            follow_up,
        ]
    if protocol == "openai":
        return [
            question,
            {"role": "assistant", "content": "Let me check.", "reasoning_content": _SECRET, "tool_calls": [_call(protocol, "call_1")]},
            _result(protocol, "call_1"),
            {"role": "assistant", "content": "It is 12:00.", "reasoning_content": _SECRET},
            follow_up,
        ]
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": _SECRET}], "encrypted_content": "ZW5j"}
    return [
        question,
        reasoning,
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Let me check."}]},
        _call(protocol, "call_1"),
        _result(protocol, "call_1"),
        {**reasoning, "id": "rs_2"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "It is 12:00."}]},
        follow_up,
    ]


_NAMED = {
    "anthropic": ["messages.thinking", "messages.redacted_thinking"],
    "openai": ["messages.reasoning_content"],
    "responses": ["input.reasoning"],
}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_reasoning_in_the_history_is_accepted_named_and_never_shown(
    fake: FakeUpstream, base: str, protocol: str, stream: bool
) -> None:
    # defect: Anthropic thinking and Responses reasoning were dropped without a word
    fake.enqueue("It is 13:00 in Oslo.")
    raw = _send(base, protocol, _reasoned(protocol), stream)
    assert raw.headers["x-agentfsm-ignored"].split(",") == _NAMED[protocol]
    prompt = "\n".join(str(m.get("content")) for m in fake.chat_requests[-1].body["messages"])
    assert _SECRET not in prompt
    assert "Let me check." in prompt and "It is 12:00." in prompt  # the assistant's own words stay


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_turn_of_reasoning_only_is_read_as_an_empty_turn(fake: FakeUpstream, base: str, protocol: str) -> None:
    question = {"role": "user", "content": "Hi"}
    turn: Any = {
        "anthropic": {"role": "assistant", "content": [{"type": "thinking", "thinking": _SECRET, "signature": "c2ln"}]},
        "openai": {"role": "assistant", "content": None, "reasoning_content": _SECRET},
        "responses": {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": _SECRET}]},
    }[protocol]
    fake.enqueue("Hello.")
    raw = _send(base, protocol, [question, turn, {"role": "user", "content": "Still there?"}])
    assert raw.headers["x-agentfsm-ignored"] == _NAMED[protocol][0]
    assert _SECRET not in str(fake.chat_requests[-1].body["messages"])
