"""GrammarCache: the embedded backend's GBNF per schema, converted once and kept."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from llama_cpp.llama_grammar import json_schema_to_gbnf
from loguru import logger

from agentfsm.backends._local_grammar import GrammarCache, continuation_gbnf, strict_strings
from agentfsm.core.backend import ListContinuation

CALL: dict[str, Any] = {
    "type": "object",
    "properties": {"tool": {"const": "get_weather"}, "args": {"type": "object", "properties": {"city": {"type": "string"}}}},
    "required": ["tool", "args"],
}


def test_a_schema_is_converted_once_and_served_from_the_cache_after() -> None:
    cache = GrammarCache()
    first = cache.gbnf(CALL)
    assert first == strict_strings(json_schema_to_gbnf(json.dumps(CALL)))
    assert all(cache.gbnf(json.loads(json.dumps(CALL))) == first for _ in range(5))  # an equal copy
    assert (cache.misses, cache.hits) == (1, 5)


def test_a_list_continuation_is_its_own_entry() -> None:
    cache = GrammarCache()
    plain = cache.gbnf(CALL)
    two = ListContinuation(item_schema=CALL, max_items=2)
    continued = cache.gbnf(CALL, two)
    assert plain is not None and continued == continuation_gbnf(plain, two)
    assert cache.gbnf(CALL, ListContinuation(item_schema=CALL, max_items=3)) != continued
    assert cache.gbnf(CALL, two) == continued
    assert (cache.misses, cache.hits) == (3, 1)


def test_property_order_is_part_of_the_key() -> None:
    cache = GrammarCache()
    reordered = {"type": "object", "properties": dict(reversed(list(CALL["properties"].items())))}
    assert cache.gbnf(CALL) != cache.gbnf(reordered)
    assert cache.misses == 2


def test_a_refused_schema_is_none_and_warned_about_once() -> None:
    lines: list[str] = []
    logger.enable("agentfsm")
    sink = logger.add(lambda message: lines.append(str(message)), level="WARNING", format="{message}")
    try:
        cache = GrammarCache()
        refused = {"$ref": "#/$defs/missing"}
        assert cache.gbnf(refused) is None and cache.gbnf(refused) is None
    finally:
        logger.remove(sink)
    assert len(lines) == 1 and "no grammar for this JSON schema (AssertionError)" in lines[0]
    assert (cache.misses, cache.hits) == (1, 1)


def test_the_cache_keeps_at_most_its_limit_the_least_recently_used_dropped() -> None:
    cache = GrammarCache(limit=2)

    def schema(city: str) -> dict[str, Any]:
        return {**CALL, "properties": {**CALL["properties"], "args": {"type": "object", "properties": {
            "city": {"enum": [city]}}}}}

    cache.gbnf(schema("Paris"))
    cache.gbnf(schema("Tokio"))
    cache.gbnf(schema("Paris"))  # used again: Tokio is now the oldest
    cache.gbnf(schema("Lima"))
    assert (cache.misses, cache.hits) == (3, 1)
    cache.gbnf(schema("Paris"))
    assert cache.hits == 2
    cache.gbnf(schema("Tokio"))  # dropped: converted again
    assert cache.misses == 4


def test_strings_hold_no_raw_control_character() -> None:
    # llama-cpp-python's converter lets a string hold a raw line break; JSON does not
    loose = json_schema_to_gbnf(json.dumps(CALL))
    assert any(line.startswith(r'char ::= [^"\\] | ') for line in loose.splitlines())
    strict = strict_strings(loose)
    char = next(line for line in strict.splitlines() if line.startswith("char ::= "))
    assert char.startswith(r'char ::= [^"\\\x7F\x00-\x1F] | "\\" (')
    assert strict_strings(strict) == strict
    assert strict.replace(char, "") == loose.replace(next(x for x in loose.splitlines() if x.startswith("char")), "")


@pytest.mark.model
def test_the_embedded_model_writes_no_raw_line_break_in_a_string() -> None:
    """A recorded request whose reply, under the loose rule, "closed" the call inside an
    unclosed string and went on in prose over many lines to the token limit."""
    from agentfsm.backends.local import get_local_backend
    from agentfsm.core.backend import GenerationOptions
    from agentfsm.core.messages import PromptMessage

    recorded = json.loads((Path(__file__).parent.parent / "fixtures" / "grammar" / "string_runaway_request.json").read_text())
    options = GenerationOptions(**{k: v for k, v in recorded["options"].items() if k in GenerationOptions.model_fields})
    text = get_local_backend().complete([PromptMessage(**m) for m in recorded["messages"]], options).text
    inside = escaped = False
    for ch in text:
        if inside and not escaped and ord(ch) < 0x20:
            raise AssertionError(f"a raw control character inside a string: {text[:300]!r}")
        if inside and escaped:
            escaped = False
        elif inside and ch == "\\":
            escaped = True
        elif ch == '"':
            inside = not inside
