"""Benchmark: tokens per second from the embedded SmolLM2-135M model, by way of calling it.

The reference is plain in-process generation (``LocalBackend.complete``), measured in
the same run; the other rows are ratios against it: streaming, JSON-schema grammar
constrained decoding (the embedded backend's, which asks the grammar about the drawn
token only, and llama-cpp-python's, the grammar over the whole vocabulary each step),
and the same model served by ``python -m llama_cpp.server`` on
127.0.0.1 and reached through ``OpenAICompatBackend`` (HTTP, JSON, SSE overhead).
Generation is greedy, so the same prompt gives the same tokens in every row. Each path
first runs every prompt once untimed (so no row pays for reading a prompt another row
already read), then :data:`REPEATS` timed rounds; a row shows the median round and the
range. In-process rows run on the model's own thread
(:mod:`agentfsm.backends._llama_thread`): the "worker thread" row shows what a caller
on another thread (an event loop) pays for the hand-over.
"""

from __future__ import annotations

import asyncio
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from agentfsm.backends import GenerationOptions, OpenAICompatBackend, Timeouts
from agentfsm.core.backend import Backend
from agentfsm.backends.local import LocalBackend, default_model_path
from agentfsm.core.messages import PromptMessage

__all__ = ["run"]

PROMPTS = (
    "Write a short story about a lighthouse keeper.",
    "Explain how a bicycle works, step by step.",
    "List ten fruits and describe each one.",
)
MAX_TOKENS = 64
#: the grammar row as llama-cpp-python samples it (the grammar over the whole vocabulary
#: at every step), beside the embedded backend's own (the grammar asked about the drawn token)
_STOCK = "in-process JSON-schema grammar, llama.cpp's grammar in the chain"
REPEATS = 3
SCHEMA = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "steps": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["title", "steps"],
}


def _messages(prompt: str) -> list[PromptMessage]:
    return [PromptMessage(role="user", content=prompt)]


def _tokens_per_second(
    generate: Callable[[list[PromptMessage]], tuple[str, int | None]], count: Callable[[str], int]
) -> tuple[int, list[float]]:
    """Tokens of one round over every prompt, and each timed round's seconds (after an
    untimed round)."""
    for prompt in PROMPTS:
        generate(_messages(prompt))
    tokens, rounds = 0, []
    for _ in range(REPEATS):
        tokens, seconds = 0, 0.0
        for prompt in PROMPTS:
            start = time.perf_counter()
            text, sampled = generate(_messages(prompt))
            seconds += time.perf_counter() - start
            tokens += count(text) if sampled is None else sampled
        rounds.append(seconds)
    return tokens, rounds


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def _llama_server(n_threads: int) -> Iterator[str]:
    port = _free_port()
    command = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(default_model_path()),
        "--chat_format", "chatml", "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", "4096", "--n_threads", str(n_threads),
    ]
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            base_url = f"http://127.0.0.1:{port}/v1"
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and process.poll() is None:
                try:
                    if httpx.get(f"{base_url}/models", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.25)
            else:
                raise RuntimeError("llama_cpp.server did not start")
            yield base_url
        finally:
            process.terminate()
            process.wait(timeout=10)


def _row(name: str, tokens: int, rounds: list[float], reference: float) -> list[Any]:
    rates = sorted(tokens / s for s in rounds)
    rate = statistics.median(rates)
    return [name, tokens, f"{statistics.median(rounds):.2f}", f"{rate:.1f} ({rates[0]:.1f}-{rates[-1]:.1f})",
            f"{rate / reference:.2f}x"]


def run() -> list[dict[str, Any]]:
    """One table: tokens/s per way of calling the model, as ratios to in-process complete."""
    local = LocalBackend()
    local.load()
    llama = local._model.llama

    def count(text: str) -> int:
        return len(llama.tokenize(text.encode(), add_bos=False, special=False))

    plain = GenerationOptions(max_tokens=MAX_TOKENS)
    constrained = GenerationOptions(max_tokens=MAX_TOKENS, json_schema=SCHEMA)

    def via(
        backend: Backend, options: GenerationOptions, mode: str
    ) -> Callable[[list[PromptMessage]], tuple[str, int | None]]:
        def generate(messages: list[PromptMessage]) -> tuple[str, int | None]:
            if mode == "stream":
                return "".join(backend.stream(messages, options)), None
            if mode == "astream":
                async def collect() -> str:
                    return "".join([d async for d in backend.astream(messages, options)])

                return asyncio.run(collect()), None
            done = backend.complete(messages, options)
            return done.text, done.usage.completion_tokens

        return generate

    paths: list[tuple[str, Backend | None, GenerationOptions, str]] = [
        ("in-process complete (reference)", local, plain, "complete"),
        ("in-process stream", local, plain, "stream"),
        ("in-process astream (to an event loop)", local, plain, "astream"),
        ("in-process JSON-schema grammar", local, constrained, "complete"),
        (_STOCK, local, constrained, "complete"),
        ("llama_cpp.server via HTTP complete", None, plain, "complete"),
        ("llama_cpp.server via HTTP stream (SSE)", None, plain, "stream"),
    ]
    measured: list[tuple[str, int, list[float]]] = []
    with _llama_server(local.n_threads) as base_url:
        timeouts = Timeouts(5, 120, 300)
        with OpenAICompatBackend(base_url, "smollm2", api_key="", timeout=timeouts) as upstream:
            for name, backend, options, mode in paths:
                generate = via(backend or upstream, options, mode)
                llama.lazy_grammar = name != _STOCK
                try:
                    measured.append((name, *_tokens_per_second(generate, count)))
                finally:
                    llama.lazy_grammar = True
    _, reference_tokens, reference_rounds = measured[0]
    reference = statistics.median(reference_tokens / s for s in reference_rounds)
    return [{
        "title": "Embedded model (SmolLM2-135M-Instruct Q4_1): tokens/s by way of calling it",
        "columns": ["path", "tokens per round", "seconds (median)", "tokens/s (median, range)",
                    "vs in-process complete"],
        "rows": [_row(name, tokens, rounds, reference) for name, tokens, rounds in measured],
        "notes": (
            f"{len(PROMPTS)} prompts a round, {REPEATS} timed rounds after an untimed one per path, "
            f"max_tokens={MAX_TOKENS}, greedy; n_threads={local.n_threads}. Tokens counted with "
            "the reply's usage (the tokens sampled) where the call reports it, else with the model's "
            "tokenizer on the returned text (the same count within a token for free text; a "
            "grammar's replies re-tokenize to fewer tokens than it sampled). The server is a separate process with "
            "the same thread count (idle while in-process rows run, and vice versa). Ratios are "
            "against in-process complete, measured in the same run."
        ),
    }]


if __name__ == "__main__":
    from run import print_tables  # bench/run.py

    print_tables(run(), __file__)
