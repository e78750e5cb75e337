"""prompt.compaction: measure, compact (never dropping a tool), clamp max_tokens, or refuse."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentfsm.core.errors import PromptTooLong
from agentfsm.core.messages import ToolSpec
from agentfsm.prompt.contract import render_contract
from agentfsm.prompt.compaction import COMPACT_LEVELS, MIN_COMPLETION_TOKENS, compact_tools, fit_prompt
from agentfsm.prompt.grammar import grammar_schema

CLIENTS = Path(__file__).resolve().parent.parent / "fixtures" / "clients"


def _claude_code_tools() -> tuple[ToolSpec, ...]:
    body = json.loads((CLIENTS / "claude_code_request_full_tools.json").read_text(encoding="utf-8"))["body"]
    return tuple(ToolSpec.from_anthropic(t) for t in body["tools"])


def _contract_size(tools: tuple[ToolSpec, ...]) -> int:
    return len(render_contract(tools, "json-protocol", "auto"))


def test_every_level_keeps_every_tool_and_every_schema_structure() -> None:
    tools = _claude_code_tools()
    sizes = []
    for level in range(COMPACT_LEVELS + 1):
        compacted = compact_tools(tools, level)
        assert [t.name for t in compacted] == [t.name for t in tools]
        for before, after in zip(tools, compacted, strict=True):
            # what the grammar and the guards see is unchanged, descriptions aside
            assert _without_descriptions(grammar_schema(after.parameters)) == _without_descriptions(
                grammar_schema(before.parameters)
            )
        sizes.append(_contract_size(compacted))
    assert sizes == sorted(sizes, reverse=True) and sizes[-1] < sizes[0] / 2
    names_only = render_contract(compact_tools(tools, COMPACT_LEVELS), "json-protocol", "auto")
    assert all(f"- {t.name}\n" in names_only for t in tools)


def _without_descriptions(schema: object) -> object:
    if isinstance(schema, dict):
        return {k: _without_descriptions(v) for k, v in schema.items() if k != "description"}
    if isinstance(schema, list):
        return [_without_descriptions(v) for v in schema]
    return schema


def test_descriptions_shrink_to_a_first_sentence() -> None:
    tool = ToolSpec(
        name="Bash",
        description="Executes a bash command. It returns the output.\n\nMore text here.",
        parameters={
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The command.  Second sentence."},
                "description": {"type": "string", "description": "A property named description."},
            },
        },
    )
    one = compact_tools([tool], 1)[0]
    assert one.description == "Executes a bash command."
    assert one.parameters["properties"]["command"]["description"] == "The command."
    assert set(one.parameters["properties"]) == {"command", "description"}  # a property, not a keyword
    two = compact_tools([tool], 2)[0]
    assert "description" not in two.parameters["properties"]["command"]
    assert compact_tools([tool], 3)[0].description == ""


def test_fit_picks_the_least_compaction_that_fits_and_clamps_max_tokens() -> None:
    tools = _claude_code_tools()
    full = _contract_size(tools)
    compact = _contract_size(compact_tools(tools, 2))
    context = compact + MIN_COMPLETION_TOKENS + 10
    fit = fit_prompt(tools, _contract_size, context, 64000)
    assert fit.level >= 1 and fit.prompt_tokens <= compact < full
    assert [t.name for t in fit.tools] == [t.name for t in tools]
    assert fit.max_tokens == context - fit.prompt_tokens  # 64000 clamped, not refused
    roomy = fit_prompt(tools, _contract_size, full + 5000, 100)
    assert (roomy.level, roomy.max_tokens, roomy.tools) == (0, 100, tools)


def test_fit_refuses_with_the_numbers_when_nothing_fits() -> None:
    tools = _claude_code_tools()
    with pytest.raises(PromptTooLong) as caught:
        fit_prompt(tools, _contract_size, 1000, 64000)
    smallest = _contract_size(compact_tools(tools, COMPACT_LEVELS))
    assert (caught.value.tokens, caught.value.maximum) == (smallest, 1000 - MIN_COMPLETION_TOKENS)
    assert str(caught.value) == f"prompt is too long: {smallest} tokens > {1000 - MIN_COMPLETION_TOKENS} maximum"


def test_a_small_max_tokens_reserves_only_that_much() -> None:
    fit = fit_prompt((), lambda _: 95, 100, 5)
    assert (fit.level, fit.max_tokens) == (0, 5)
    with pytest.raises(PromptTooLong):
        fit_prompt((), lambda _: 96, 100, 5)


def test_an_unknown_context_checks_nothing() -> None:
    fit = fit_prompt(_claude_code_tools(), lambda _: 10**6, None, 64000)
    assert (fit.level, fit.prompt_tokens, fit.max_tokens) == (0, 10**6, 64000)
