"""Grammar-constrained sampling that checks the grammar on the drawn token only, on the
real embedded model: greedy, the same tokens as llama.cpp's grammar in the chain; sampled,
every reply within the grammar; each grammar parsed once per model."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import jsonschema
import llama_cpp
import pytest
from llama_cpp.llama_grammar import json_schema_to_gbnf

from agentfsm.backends import GenerationOptions
from agentfsm.backends._lazy_grammar import GrammarSamplers, lazy_grammar_llama
from agentfsm.backends.local import LocalBackend, default_model_path
from agentfsm.core.messages import PromptMessage

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"title": {"type": "string"}, "steps": {"type": "array", "items": {"type": "string"}}},
    "required": ["title", "steps"],
}
CALL: dict[str, Any] = {
    "type": "object",
    "properties": {
        "tool": {"const": "get_weather"},
        "args": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                 "required": ["city", "days"]},
    },
    "required": ["tool", "args"],
}
#: prose requests (the model's own first choice is not JSON: many steps are drawn again)
#: and a request the grammar's JSON answers
PROMPTS = (
    "Write a short story about a lighthouse keeper.",
    "List ten fruits and describe each one.",
    "Wie ist das Wetter in Berlin für die nächsten 3 Tage?",
)


def _chatml(text: str) -> str:
    return f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def models() -> Iterator[tuple[Any, Any]]:
    path = str(default_model_path())
    stock = llama_cpp.Llama(model_path=path, n_ctx=1024, n_threads=2, seed=1, verbose=False)
    lazy = lazy_grammar_llama(llama_cpp)(model_path=path, n_ctx=1024, n_threads=2, seed=1, verbose=False)
    yield stock, lazy
    stock.close()
    lazy.close()


def _reply(llama: Any, schema: dict[str, Any], prompt: str, **kwargs: Any) -> str:
    grammar = llama_cpp.LlamaGrammar.from_string(json_schema_to_gbnf(json.dumps(schema)), verbose=False)
    llama.reset()
    out = llama.create_completion(_chatml(prompt), grammar=grammar, **kwargs)
    return str(out["choices"][0]["text"])


@pytest.mark.parametrize("schema", [SCHEMA, CALL], ids=["steps", "call"])
def test_greedy_gives_the_tokens_of_the_grammar_in_the_chain(models: tuple[Any, Any], schema: dict[str, Any]) -> None:
    stock, lazy = models
    counts = lazy.grammar_samplers
    before = (counts.sampled, counts.redrawn) if counts else (0, 0)
    for prompt in PROMPTS:
        assert _reply(lazy, schema, prompt, max_tokens=48, temperature=0.0) == _reply(
            stock, schema, prompt, max_tokens=48, temperature=0.0
        )
    counts = lazy.grammar_samplers
    sampled, redrawn = counts.sampled - before[0], counts.redrawn - before[1]
    # the grammar refused some drawn tokens (so the second draw was exercised), not most
    assert sampled > 0 and 0 < redrawn < sampled


def test_sampled_replies_stay_within_the_grammar(models: tuple[Any, Any]) -> None:
    _, lazy = models
    bounded = json.loads(json.dumps(CALL))
    bounded["properties"]["args"]["properties"]["city"]["maxLength"] = 24  # every reply ends
    for seed in range(4):
        for prompt in PROMPTS:
            text = _reply(lazy, bounded, prompt, max_tokens=120, temperature=1.0, seed=seed, repeat_penalty=1.1)
            # llama.cpp's JSON grammar lets a string hold a raw control character
            jsonschema.validate(json.loads(text, strict=False), bounded)


def test_a_grammar_is_parsed_once_and_reused(models: tuple[Any, Any]) -> None:
    _, lazy = models
    _reply(lazy, CALL, PROMPTS[2], max_tokens=8, temperature=0.0)
    counts = lazy.grammar_samplers
    parsed, reused = counts.parsed, counts.reused
    for _ in range(3):
        _reply(lazy, CALL, PROMPTS[2], max_tokens=8, temperature=0.0)
    assert (counts.parsed, counts.reused) == (parsed, reused + 3)


def test_the_oldest_grammar_is_freed_past_the_limit_and_a_bad_one_is_refused(models: tuple[Any, Any]) -> None:
    _, lazy = models
    samplers = GrammarSamplers(llama_cpp, lazy._model.vocab, limit=2)
    try:
        texts = [json_schema_to_gbnf(json.dumps({"type": "object", "properties": {k: {"type": "string"}}})) for k in "abc"]
        samplers.get(texts[0], "root")
        samplers.get(texts[1], "root")
        samplers.get(texts[2], "root")
        assert samplers.parsed == 3
        assert samplers.get(texts[2], "root") is not None and samplers.reused == 1
        samplers.get(texts[0], "root")  # pushed out by the third: parsed again
        assert (samplers.parsed, samplers.reused) == (4, 1)
        with pytest.raises(ValueError, match="could not parse"):
            samplers.get('root ::= "unclosed', "root")
    finally:
        samplers.close()


def test_the_embedded_backend_samples_its_grammars_this_way() -> None:
    backend = LocalBackend()
    options = GenerationOptions(max_tokens=60, json_schema=CALL)
    reply = backend.complete((PromptMessage(role="user", content=PROMPTS[2]),), options)
    jsonschema.validate(json.loads(reply.text), CALL)
    counts = backend._model.llama.grammar_samplers
    assert counts is not None and counts.sampled > 0


def test_the_grammars_the_runtime_makes_parse_in_llama_cpp(models: tuple[Any, Any]) -> None:
    """``LlamaGrammar.from_string`` only keeps the text: llama.cpp parses it when a
    generation starts. Every kind of grammar the runtime sends parses: a real client's
    21-tool set (serial, parallel, required), a list continuation of one of its tools,
    and a client's response_format schema."""
    from pathlib import Path

    from agentfsm.backends._local_grammar import GrammarCache
    from agentfsm.core.backend import ListContinuation
    from agentfsm.core.choice import ToolChoice
    from agentfsm.core.messages import ToolSpec
    from agentfsm.prompt.enforcement import action_item_schema, build_action_schema
    from agentfsm.prompt.grammar import grammar_schema

    _, lazy = models
    fixture = Path(__file__).resolve().parent.parent / "fixtures" / "clients" / "claude_code_request_full_tools.json"
    body = json.loads(fixture.read_text(encoding="utf-8"))["body"]
    tools = [ToolSpec.from_anthropic(t) for t in body["tools"] if "input_schema" in t]
    assert len(tools) >= 20
    cache = GrammarCache()
    texts = [
        cache.gbnf(build_action_schema(tools, ToolChoice.AUTO, parallel=False)),
        cache.gbnf(build_action_schema(tools, ToolChoice.AUTO, parallel=True)),
        cache.gbnf(build_action_schema(tools, ToolChoice.REQUIRED, parallel=False)),
        cache.gbnf(action_item_schema(tools[:1], ToolChoice.AUTO) or {},
                   ListContinuation(item_schema=action_item_schema(tools[:1], ToolChoice.AUTO) or {}, max_items=3)),
        cache.gbnf(grammar_schema(SCHEMA)),
    ]
    samplers = GrammarSamplers(llama_cpp, lazy._model.vocab)
    try:
        for text in texts:
            assert text is not None
            samplers.get(text, "root")  # raises ValueError when llama.cpp refuses it
        assert samplers.parsed == len(set(texts))
    finally:
        samplers.close()
