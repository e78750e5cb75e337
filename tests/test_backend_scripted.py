"""ScriptedBackend and ReplayBackend: the in-process fakes, and create_backend."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from agentfsm.backends import (
    Capabilities,
    Completion,
    GenerationOptions,
    OpenAICompatBackend,
    ScriptedBackend,
    ScriptExhausted,
    create_backend,
)
from agentfsm.replays.backend import ReplayBackend, read_model_outputs
from agentfsm.core.backend import Backend
from agentfsm.core.errors import BackendError, BackendTimeout, TranscriptError, UsageError
from agentfsm.core.messages import PromptMessage
from tests._fake import MESSAGES, MODES, OPTIONS, call


@pytest.mark.parametrize("mode", MODES)
def test_queue_is_served_in_order_then_exhausted(mode: str) -> None:
    backend = ScriptedBackend(["first reply", "second reply, a longer one"])
    assert [call(backend, mode), call(backend, mode)] == ["first reply", "second reply, a longer one"]
    with pytest.raises(ScriptExhausted) as info:
        call(backend, mode)
    assert isinstance(info.value, BackendError) and info.value.served == 2


def test_requests_are_recorded() -> None:
    backend = ScriptedBackend(["a"])
    options = GenerationOptions(max_tokens=3)
    backend.complete(MESSAGES, options)
    assert backend.requests[0].messages == MESSAGES
    assert backend.requests[0].options == options


def test_function_script_sees_the_conversation() -> None:
    def answer(messages: Sequence[PromptMessage]) -> str:
        return f"{len(messages)} messages, last: {messages[-1].content}"

    backend = ScriptedBackend(answer)
    assert backend.complete(MESSAGES, OPTIONS).text == "2 messages, last: hi"
    assert backend.remaining == 0


def test_exceptions_and_completions_in_the_queue() -> None:
    cut = Completion(text="cut sh", finish_reason="length")
    backend = ScriptedBackend([BackendTimeout("scripted timeout"), cut])
    with pytest.raises(BackendTimeout):
        backend.complete(MESSAGES, OPTIONS)
    assert backend.complete(MESSAGES, OPTIONS).finish_reason == "length"


def test_prefill_is_stripped_from_a_whole_reply() -> None:
    backend = ScriptedBackend(['```json action\n{"tool": "t"}\n```', '{"tool": "t"}'])
    options = GenerationOptions(prefill="```json action\n")
    assert backend.complete(MESSAGES, options).text == '{"tool": "t"}\n```'
    assert backend.complete(MESSAGES, options).text == '{"tool": "t"}'


def test_stream_comes_in_small_chunks_and_enqueue_appends() -> None:
    backend = ScriptedBackend([], capabilities=Capabilities(prefill=True, json_schema=True))
    backend.enqueue("x" * 20)
    assert list(backend.stream(MESSAGES, OPTIONS)) == ["x" * 8, "x" * 8, "x" * 4]
    assert backend.capabilities.json_schema
    assert isinstance(backend, Backend)
    assert "remaining=0" in repr(backend)


def test_usage_is_approximated() -> None:
    completion = ScriptedBackend(["twelve chars"]).complete(MESSAGES, OPTIONS)
    assert completion.usage.completion_tokens == 3
    assert completion.usage.prompt_tokens > 0


T = "2025-01-06T09:00:00.000+00:00"


def _output(run: str, seq: int, text: str, **fields: object) -> dict[str, object]:
    return {"v": 1, "run": run, "seq": seq, "t": T, "type": "model_output", "text": text, **fields}


def write_transcript(path: Path, torn: bool = False) -> None:
    events = [
        {"v": 1, "run": "r1", "seq": 0, "t": T, "type": "run_start", "config": {}},
        _output("r1", 1, "```json action\n{}\n```", usage={"prompt_tokens": 10, "completion_tokens": 4}),
        _output("r2", 0, "other run", usage={"prompt_tokens": 1, "completion_tokens": 1}),
        _output("r1", 2, "The answer is 4.", usage={"prompt_tokens": 20, "completion_tokens": 5}, finish_reason="length"),
    ]
    text = "".join(json.dumps(e) + "\n" for e in events)
    if torn:
        text += '{"v": 1, "run": "r1", "seq": 3, "type": "model_out'
    path.write_text(text, encoding="utf-8")


@pytest.mark.parametrize("torn", [False, True], ids=["whole", "torn-last-line"])
def test_replay_serves_recorded_outputs_in_order(tmp_path: Path, torn: bool) -> None:
    path = tmp_path / "run.jsonl"
    write_transcript(path, torn=torn)
    backend = ReplayBackend(path, run="r1")
    first = backend.complete(MESSAGES, GenerationOptions(prefill="```json action\n"))
    assert first.text == "{}\n```"
    second = backend.complete(MESSAGES, OPTIONS)
    assert (second.text, second.finish_reason, second.usage.completion_tokens) == (
        "The answer is 4.", "length", 5,
    )
    assert (backend.served, backend.remaining) == (2, 0)
    with pytest.raises(ScriptExhausted, match="replay"):
        backend.complete(MESSAGES, OPTIONS)


def test_replay_async_and_stream_from_events() -> None:
    events = [_output("r", 0, "one"), _output("r", 1, "two")]
    backend = ReplayBackend(events)
    assert call(backend, "astream") == "one"
    assert call(backend, "acomplete") == "two"
    assert backend.capabilities.prefill and backend.name == "replay"


def test_replay_all_runs_when_no_run_given(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    write_transcript(path)
    assert [c.text for c in read_model_outputs(path)][1] == "other run"


@pytest.mark.parametrize(
    "content", ['{"type": "run_start"}\nnot json\n{"type": "run_end"}\n', "[1]\n", ""]
)
def test_replay_rejects_malformed_transcripts(tmp_path: Path, content: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content, encoding="utf-8")
    if content:
        with pytest.raises(TranscriptError):
            ReplayBackend(path)
    else:
        assert ReplayBackend(path).remaining == 0


def test_replay_missing_file_and_textless_event(tmp_path: Path) -> None:
    with pytest.raises(TranscriptError):
        ReplayBackend(tmp_path / "absent.jsonl")
    with pytest.raises(TranscriptError):
        ReplayBackend([{"v": 1, "run": "r", "seq": 4, "t": T, "type": "model_output"}])


def test_create_backend_by_kind(tmp_path: Path) -> None:
    scripted = create_backend("scripted", replies=["x"])
    assert isinstance(scripted, ScriptedBackend)
    openai = create_backend("openai", base_url="http://127.0.0.1:9/v1", model="m", api_key="")
    assert isinstance(openai, OpenAICompatBackend)
    path = tmp_path / "t.jsonl"
    write_transcript(path)
    assert isinstance(create_backend("replay", path_or_events=path), ReplayBackend)
    with pytest.raises(UsageError, match="unknown backend kind"):
        create_backend("telepathy")


def test_scripted_backend_is_safe_across_threads() -> None:
    backend = ScriptedBackend([str(i) for i in range(50)])

    async def many() -> list[str]:
        replies = await asyncio.gather(
            *(asyncio.to_thread(backend.complete, MESSAGES, OPTIONS) for _ in range(50))
        )
        return [c.text for c in replies]

    assert sorted(asyncio.run(many()), key=int) == [str(i) for i in range(50)]


def test_scores_are_scripted_like_replies() -> None:
    from agentfsm.core.backend import ScoresContinuations

    plain = ScriptedBackend(["a"])
    assert not isinstance(plain, ScoresContinuations) and not plain.capabilities.scoring
    backend = ScriptedBackend(["a"], Capabilities(prefill=True), scores=[[-0.5, -3.0], UsageError("x")])
    assert isinstance(backend, ScoresContinuations) and isinstance(backend, ScriptedBackend)
    assert backend.capabilities.scoring and backend.capabilities.prefill
    assert backend.score(MESSAGES, OPTIONS, ["yes", "no"]) == [-0.5, -3.0]
    with pytest.raises(UsageError):
        asyncio.run(backend.ascore(MESSAGES, OPTIONS, ["yes"]))
    with pytest.raises(ScriptExhausted):
        backend.score(MESSAGES, OPTIONS, ["yes"])
    assert backend.score_requests[0].continuations == ("yes", "no")
    assert backend.score_requests[0].messages == MESSAGES
    assert backend.complete(MESSAGES, OPTIONS).text == "a"  # replies are their own queue


def test_scores_from_a_function_and_their_count_is_checked() -> None:
    def longer_is_likelier(messages: Sequence[PromptMessage], continuations: Sequence[str]) -> list[float]:
        return [-1.0 / (1 + len(text)) for text in continuations]

    backend = ScriptedBackend([], scores=longer_is_likelier)
    assert backend.score(MESSAGES, OPTIONS, ["a", "abc"]) == [-0.5, -0.25]
    miscounted = ScriptedBackend([], scores=[[1.0]])
    with pytest.raises(UsageError, match="1 numbers for 2 continuations"):
        miscounted.score(MESSAGES, OPTIONS, ["a", "b"])
