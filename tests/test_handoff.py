"""read_in_thread / Mailbox: a worker thread's deltas reach the event loop in batches."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator, Iterator
from typing import Any, cast

import pytest

from agentfsm.backends._handoff import Mailbox, read_in_thread


async def test_deltas_arrive_in_order_and_wake_the_loop_only_when_the_reader_waits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loop = asyncio.get_running_loop()
    wakes: list[object] = []
    original = loop.call_soon_threadsafe

    def counting(*args: Any) -> asyncio.Handle:
        wakes.append(args[0])
        return original(*args)

    monkeypatch.setattr(loop, "call_soon_threadsafe", counting)
    mailbox = Mailbox(loop)
    for piece in "abc":
        mailbox.put(piece)  # nobody waits: nothing scheduled on the loop
    assert wakes == [] and await mailbox.take() == "abc"
    waiting = asyncio.ensure_future(mailbox.take())
    await asyncio.sleep(0)  # the reader now waits

    def produce() -> None:
        for piece in "def":
            mailbox.put(piece)
        mailbox.close()

    producer = threading.Thread(target=produce)
    producer.start()
    producer.join()
    # one wake-up for the waiting reader; "def" and the end are then read without any
    assert len(wakes) == 1
    assert await waiting == "def" and await mailbox.take() is None


async def test_a_producer_error_reaches_the_reader_after_its_deltas() -> None:
    def produce() -> Iterator[str]:
        yield "one"
        yield "two"
        raise ValueError("boom")

    seen: list[str] = []
    with pytest.raises(ValueError, match="boom"):
        async for text in read_in_thread(produce):
            seen.append(text)
    assert "".join(seen) == "onetwo"


async def test_closing_the_reader_stops_the_producer_and_closes_its_generator() -> None:
    produced: list[int] = []
    closed = threading.Event()
    gate = threading.Event()

    def produce() -> Iterator[str]:
        try:
            for i in range(10_000):
                produced.append(i)
                yield f"{i} "
                gate.wait(1)  # one delta at a time until the reader has read the first
        finally:
            closed.set()

    stream = cast(AsyncGenerator[str, None], read_in_thread(produce))
    assert await anext(stream) == "0 "
    await stream.aclose()
    gate.set()
    assert closed.is_set() and len(produced) < 10_000


async def test_with_an_interval_the_first_delta_comes_at_once_and_the_rest_in_batches() -> None:
    gate = threading.Event()

    def produce() -> Iterator[str]:
        yield "a"
        gate.wait(10)  # the rest only once the first has been read
        yield from "bcdefghijklmnopqrstuvwxyz"

    texts: list[str] = []
    async for text in read_in_thread(produce, interval=1.0):
        texts.append(text)
        gate.set()
    assert texts[0] == "a" and "".join(texts) == "abcdefghijklmnopqrstuvwxyz"
    assert len(texts) < 26  # read in batches: the reader waited a second before each take


async def test_the_end_of_a_stream_is_read_at_once_not_after_the_interval() -> None:
    """The last deltas come when the producer ends, not when the batching interval is up
    (a 25 ms wait after every reply was 3 % of a short one)."""
    gate = threading.Event()

    def produce() -> Iterator[str]:
        yield "a"
        gate.wait(10)
        yield "b"  # and the end, right after the first was read

    loop = asyncio.get_running_loop()
    texts: list[str] = []
    start = loop.time()
    async for text in read_in_thread(produce, interval=30.0):
        texts.append(text)
        gate.set()
    assert texts == ["a", "b"] and loop.time() - start < 10
