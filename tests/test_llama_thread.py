"""Every llama.cpp call runs on the process's one model thread (backends/_llama_thread)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from agentfsm.backends import GenerationOptions
from agentfsm.backends._llama_thread import MODEL_THREAD, ModelThread
from agentfsm.core.messages import PromptMessage


def test_calls_run_on_one_thread_whoever_calls() -> None:
    worker = ModelThread("test-model")
    seen: set[int] = set()

    def where() -> int:
        seen.add(threading.get_ident())
        return threading.get_ident()

    from_main = worker.call(where)
    from_thread: list[int] = []
    t = threading.Thread(target=lambda: from_thread.append(worker.call(where)))
    t.start()
    t.join()
    from_loop = asyncio.run(worker.acall(where))
    assert from_main == from_thread[0] == from_loop and seen == {from_main} != {threading.get_ident()}
    # a call from the thread itself runs inline (no deadlock)
    assert worker.call(lambda: worker.call(where)) == from_main


def _count(n: int | None, made: list[int]) -> Iterator[str]:
    i = 0
    while n is None or i < n:
        made.append(threading.get_ident())
        yield str(i)
        i += 1


def test_streams_are_made_on_the_thread_and_stop_when_closed() -> None:
    worker = ModelThread("test-model")
    made: list[int] = []
    assert "".join(worker.iterate(lambda: _count(5, made))) == "01234"
    assert set(made) != {threading.get_ident()} and len(set(made)) == 1
    made.clear()
    it = worker.iterate(lambda: _count(None, made))  # endless: only closing stops it
    assert next(it) == "0"
    it.close()  # type: ignore[attr-defined]
    stopped = len(made)
    assert worker.call(lambda: len(made)) == stopped  # the thread is free, the producer gone

    async def read() -> str:
        return "".join([d async for d in worker.aiterate(lambda: _count(4, made))])

    assert asyncio.run(read()) == "0123"


def test_a_producers_error_reaches_the_reader() -> None:
    worker = ModelThread("test-model")

    def broken() -> Iterator[str]:
        yield "a"
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        list(worker.iterate(broken))


def test_the_embedded_model_runs_only_on_the_model_thread() -> None:
    from agentfsm.backends.local import LocalBackend

    backend = LocalBackend()
    backend.load()
    llama = backend._model.llama
    threads: set[int] = set()
    original = llama.create_completion

    def watched(*args: Any, **kwargs: Any) -> Any:
        threads.add(threading.get_ident())
        return original(*args, **kwargs)

    llama.create_completion = watched
    try:
        messages = [PromptMessage(role="user", content="Say hi.")]
        options = GenerationOptions(max_tokens=4)
        backend.complete(messages, options)
        "".join(backend.stream(messages, options))

        async def both() -> None:
            await backend.acomplete(messages, options)
            "".join([d async for d in backend.astream(messages, options)])

        asyncio.run(both())
    finally:
        llama.create_completion = original
    assert threads == {MODEL_THREAD.call(threading.get_ident)}


def _in_child(worker: ModelThread, out: Any) -> None:
    out.put(worker.call(lambda: 7))


def test_a_forked_child_starts_its_own_thread() -> None:
    """A child forked after the thread started (Ray, a process pool) would wait forever on
    a thread it does not have; it starts its own on first use."""
    import multiprocessing

    worker = ModelThread("test-model")
    worker.call(lambda: None)  # started in the parent
    context = multiprocessing.get_context("fork")
    out = context.Queue()
    child = context.Process(target=_in_child, args=(worker, out))
    child.start()
    child.join(timeout=30)
    assert child.exitcode == 0 and out.get(timeout=5) == 7
