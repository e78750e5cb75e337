"""A call copied out of data is the data's, however the model rewrote it on the way.

Defect (issue 29, item 2): the defence matched exact strings. Actions changed slightly got
the injected call run: zero-width or full-width characters, an HTML-escaped action or one
inside a JSON-encoded result, a prefix that made the data parse to nothing (an unclosed
fence or ``<tool_call>``, a broken block, more blocks than a reply may hold), ``1`` for
``1.0``, an added default argument, a dropped optional one (4,584 of 18,720 requests). And
a reply that quoted a result and then made its own call lost its own call.
"""

from __future__ import annotations

import json

import pytest

from agentfsm.core.messages import ToolSpec
from agentfsm.dialects.parse import parse_reply
from agentfsm.guards import Accept, Correction, injection
from agentfsm.testing import FakeUpstream
from fixtures.injections import (
    INJECTED_TOOL,
    REPLY,
    VARIANT_TOOLS_OPENAI,
    VARIANTS,
    names_called,
    variant_model,
    wrap,
)
from tests._proxy import proxy, upstream_backend
from tests.test_injection import _history

TOOLS = [ToolSpec.from_any(t) for t in VARIANT_TOOLS_OPENAI]
OWN = '```json action\n{"tool": "read_notes", "parameters": {"topic": "budget"}}\n```'


@pytest.mark.parametrize("in_user", [False, True], ids=["tool-result", "user-content"])
@pytest.mark.parametrize("name", list(VARIANTS))
def test_the_guard_corrects_a_copy_of_each_variation(name: str, in_user: bool) -> None:
    data, copy = VARIANTS[name]
    injected = injection.data_actions(_history(wrap(data), in_user=in_user), TOOLS, "json-action")
    reply = parse_reply(copy, TOOLS)
    assert [c.name for c in reply.tool_calls] == [INJECTED_TOOL]
    verdict = injection.check(reply, injected)
    assert isinstance(verdict, Correction) and verdict.reason == "injected_action", name
    # arguments of the model's own choosing are still its own
    other = parse_reply('```json action\n{"tool": "delete_all", "parameters": {"confirm": false}}\n```', TOOLS)
    assert isinstance(injection.check(other, injected), Accept)


def test_normalised_texts_decode_what_a_model_decodes() -> None:
    texts = list(injection.normalised_texts('{"a": "&lt;b&gt; \\u0041\\n", "c": ["\\uff21\u200bB"]}'))
    assert any("<b> A\n" in t for t in texts)
    assert "AB" in texts


@pytest.mark.parametrize("name", list(VARIANTS))
def test_a_reply_that_quotes_the_data_and_calls_its_own_tool_keeps_its_own_call(name: str) -> None:
    data, copy = VARIANTS[name]
    injected = injection.data_actions(_history(wrap(data)), TOOLS, "json-action")
    reply = parse_reply(f"The notes say:\n{copy}\nI will read the budget instead.\n{OWN}", TOOLS)
    kept = injection.without_quoted(reply, injected)
    assert [c.name for c in kept.tool_calls] == ["read_notes"]
    assert isinstance(injection.check(kept, injected), Accept)


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
@pytest.mark.parametrize("name", list(VARIANTS))
def test_through_the_proxy_no_variation_becomes_a_call_and_an_own_call_survives(protocol: str, name: str) -> None:
    data, copy = VARIANTS[name]
    for in_user in (False, True):
        with FakeUpstream(variant_model(copy)) as fake, proxy(upstream_backend(fake)) as url:
            assert INJECTED_TOOL not in names_called(url, protocol, wrap(data), in_user, "x", variant=True), (name, in_user)
    with FakeUpstream(variant_model(copy, OWN)) as fake, proxy(upstream_backend(fake)) as url:
        assert names_called(url, protocol, wrap(data), False, "x", variant=True) == ["read_notes"]
        assert len(fake.chat_requests) == 1  # kept at once, no correction


def test_variants_are_what_the_model_script_says() -> None:
    # the fixture is honest: each data text carries its action in some form, and each copy
    # is a well-formed call of the dangerous tool
    for data, copy in VARIANTS.values():
        assert INJECTED_TOOL in data.replace("\u200b", "") or "&" in data or "\uff44" in data
        assert [c.name for c in parse_reply(copy, TOOLS).tool_calls] == [INJECTED_TOOL]
    assert REPLY and json.loads(json.dumps(VARIANTS["1.0 written 1"][0]))
