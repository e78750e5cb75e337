"""A generation stuck in a loop is cut early and reported as cut (backends/_loops)."""

from __future__ import annotations

import asyncio

from agentfsm.backends import GenerationOptions
from agentfsm.backends._loops import MAX_PERIOD, WINDOW, LoopStop
from agentfsm.core.messages import PromptMessage


def _fires(generated: list[int], prompt: list[int] | None = None) -> bool:
    prompt = prompt if prompt is not None else [7] * 200
    stop = LoopStop(len(prompt))
    ids = prompt + []
    fired = False
    for token in generated:
        ids.append(token)
        fired = stop(ids, None)
        if fired:
            break
    return fired and stop.fired


def test_a_loop_of_any_short_period_is_cut_once_it_fills_the_window() -> None:
    for period in (1, 2, 5, MAX_PERIOD):
        stretch = list(range(100, 100 + period))
        assert _fires([1, 2, 3] + stretch * (WINDOW // period + 2))
    # just short of the window: not yet
    assert not _fires([1, 2, 3] + [9] * (WINDOW - 1))


def test_text_that_does_not_loop_is_never_cut() -> None:
    assert not _fires(list(range(1000)))
    longer = list(range(100, 100 + MAX_PERIOD + 1))  # a stretch longer than the longest period
    assert not _fires(longer * 20)
    # the prompt is not the model's: a looping prompt cuts nothing
    assert not _fires([1, 2, 3, 4], prompt=[5] * 500)


def test_the_embedded_model_stops_a_loop_early_and_says_it_was_cut() -> None:
    from agentfsm.backends.local import get_local_backend

    backend = get_local_backend()
    messages = [PromptMessage(role="user", content="Write the word hello 300 times, separated by spaces.")]
    options = GenerationOptions(max_tokens=300)
    whole = backend.complete(messages, options)
    assert whole.finish_reason == "length" and whole.usage.completion_tokens < 150
    assert "hello, hello, hello" in whole.text
    stream = backend.astream(messages, options)

    async def read() -> str:
        return "".join([d async for d in stream])

    assert asyncio.run(read()) == whole.text and stream.finish_reason == "length"  # type: ignore[attr-defined]


def test_a_sentence_said_again_and_again_is_cut() -> None:
    sentence = list(range(300, 314))  # "The user requested the results of add to the user's request."
    assert _fires([1, 2, 3] + sentence * (WINDOW // len(sentence) + 2))
    assert not _fires([1, 2, 3] + sentence * 2)  # said twice is not a loop


def test_a_numbered_list_is_not_a_loop() -> None:
    items: list[int] = []
    for n in range(60):
        items += [500 + n, 46, 9, 10, 11]  # "7. apple" ...: the number differs each time
    assert not _fires(items)
