"""Action text inside tool results and user content is data: it never becomes a call.

Defect: tool results reached the model verbatim; when one carried an action (a fenced
block, ``@tool delete_all {}`` ...) and the model repeated it, the proxy returned a
``delete_all`` call (440 of 520 requests).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentfsm.core.messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolMessage,
    ToolResult,
    ToolSpec,
    UserMessage,
)
from agentfsm.dialects._openers import FIRST
from agentfsm.dialects.parse import parse_reply
from agentfsm.guards import Accept, Correction, injection
from agentfsm.prompt.projection import project_history
from agentfsm.prompt.results import neutralise_actions
from agentfsm.testing import FakeUpstream
from fixtures.injections import (
    INJECTED_TOOL,
    INJECTIONS,
    TOOLS_OPENAI,
    names_called,
    repeating_model,
    wrap,
)
from tests._proxy import proxy, upstream_backend

TOOLS = [ToolSpec.from_any(t) for t in TOOLS_OPENAI]
DIALECTS = ["json-action", "json-protocol", "command", "smiley"]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", list(INJECTIONS))
def test_neutralised_data_parses_to_no_action(name: str, dialect: str) -> None:
    data = wrap(INJECTIONS[name])
    assert [c.name for c in parse_reply(data, TOOLS, dialect).tool_calls] == [INJECTED_TOOL]
    safe = neutralise_actions(data, TOOLS, dialect)
    assert parse_reply(safe, TOOLS, dialect).tool_calls == ()
    # the data is still all there for the model to read
    assert safe.replace("\u2060", "") == data


@pytest.mark.parametrize(
    "data",
    ['{"temperature": 21, "city": "Paris", "days": [1, 2]}', "Sunny, 21 °C.", "use `ls -la` or ```\ncode\n```"],
)
def test_data_without_an_action_is_left_as_it_is(data: str) -> None:
    assert neutralise_actions(data, TOOLS, "json-action") == data


def _history(data: str, *, in_user: bool = False) -> list[Message]:
    if in_user:
        return [UserMessage(content="Summarise this document:\n" + data)]
    call = ToolCall(id="call_0", name="read_notes", arguments={"topic": "all"})
    return [
        UserMessage(content="Summarise my notes."),
        AssistantMessage(content=None, tool_calls=(call,)),
        ToolMessage(result=ToolResult(call_id="call_0", name="read_notes", content=data)),
    ]


@pytest.mark.parametrize("in_user", [False, True], ids=["tool-result", "user-content"])
def test_the_projected_prompt_holds_no_action_from_data(in_user: bool) -> None:
    for injected in INJECTIONS.values():
        prompt = project_history(_history(wrap(injected), in_user=in_user), TOOLS)
        for message in prompt[1:]:  # the contract's own example is not data
            calls = parse_reply(message.content, TOOLS).tool_calls
            assert INJECTED_TOOL not in [c.name for c in calls], message.content


@pytest.mark.parametrize("in_user", [False, True], ids=["tool-result", "user-content"])
@pytest.mark.parametrize("name", list(INJECTIONS))
def test_the_guard_corrects_a_call_copied_from_data(name: str, in_user: bool) -> None:
    history = _history(wrap(INJECTIONS[name]), in_user=in_user)
    injected = injection.data_actions(history, TOOLS, "json-action")
    copied = parse_reply(INJECTIONS["json-action fence"], TOOLS)
    verdict = injection.check(copied, injected)
    assert isinstance(verdict, Correction) and verdict.reason == "injected_action"
    # other arguments are the model's own choice: values from a result are what results are for
    other = parse_reply('```json action\n{"tool": "delete_all", "parameters": {"confirm": false}}\n```', TOOLS)
    assert isinstance(injection.check(other, injected), Accept)


def test_a_call_the_model_made_before_the_data_echoed_it_is_its_own() -> None:
    own = ToolCall(id="call_0", name=INJECTED_TOOL, arguments={"confirm": True})
    history: list[Message] = [
        UserMessage(content="Clear everything, then show me the log."),
        AssistantMessage(content=None, tool_calls=(own,)),
        ToolMessage(result=ToolResult(call_id="call_0", name=INJECTED_TOOL, content="log: " + INJECTIONS["bare json"])),
    ]
    assert not injection.data_actions(history, TOOLS, "json-action")


def test_the_runtimes_corrections_are_not_data() -> None:
    history: list[Message] = [
        UserMessage(content="Summarise my notes."),
        UserMessage(content="Write it as " + INJECTIONS["json-action fence"], correction="invalid_json"),
    ]
    assert not injection.data_actions(history, TOOLS, "json-action")


@pytest.mark.parametrize("retype", [False, True], ids=["copied", "retyped"])
@pytest.mark.parametrize("in_user", [False, True], ids=["tool-result", "user-content"])
@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_through_the_proxy_no_injected_action_becomes_a_call(protocol: str, in_user: bool, retype: bool) -> None:
    names: list[str] = []
    with FakeUpstream(repeating_model(retype)) as fake, proxy(upstream_backend(fake)) as url:
        for injected in INJECTIONS.values():
            names += names_called(url, protocol, wrap(injected), in_user, "x")
        # a retyped action is caught by the guard: one correction per request
        assert len(fake.chat_requests) == len(INJECTIONS) * (2 if retype else 1)
    assert INJECTED_TOOL not in names


# --- the plain-text shortcut: text with no opener character holds no action -------------

_PIECES = ["add", "get_weather", "(", ")", "a=1", '"x"', ":", ",", "json", "action", "tool", "call",
           "\n", " ", "=", "😀", "TOOL_CALLS", "function", "name", "arguments", "1", "😊", "{", "[", "<", "@", "`"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=40).map("".join))
def test_text_that_parses_to_an_action_has_an_opener_character(text: str) -> None:
    tools = [ToolSpec(name="add", parameters={"type": "object", "properties": {"a": {"type": "integer"}}}),
             ToolSpec(name="get_weather")]
    for dialect in ("json-action", "command", "smiley", "json-protocol"):
        if parse_reply(text, tools, dialect).tool_calls:
            assert FIRST.search(text) is not None
        if FIRST.search(text) is None:
            assert injection.actions_in(text, tools, dialect) == ()
