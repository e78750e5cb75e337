"""Batch controller: task files, the exactly-once results log, runs against a real HTTP fake."""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from agentfsm.core.choice import ToolChoice
from agentfsm.backends.openai_compat import OpenAICompatBackend
from agentfsm.batch.controller import BatchStats, run_batch, run_batch_sync
from agentfsm.batch.loop import YOUNG_COLLECTION_THRESHOLD, batch_collector
from agentfsm.batch.task import Task, TaskResult, transcript_name
from agentfsm.batch.io import ResultLog, load_tasks
from agentfsm.cli import app
from agentfsm.dialects import get_dialect
from agentfsm.core.errors import UsageError
from agentfsm.core.messages import ToolCall
from agentfsm.replays.compare import replay
from agentfsm.testing import FakeReply, FakeUpstream, ScriptedBackend
from agentfsm.runtime.transcript import read_transcript
from fixtures.batch.upstream import TOOLS_MODULE, make_script, task_lines

REPO = Path(__file__).resolve().parent.parent


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _results(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _assert_exactly_once(path: Path, ids: set[str]) -> list[dict[str, Any]]:
    raw = path.read_bytes()
    assert raw.endswith(b"\n")
    rows = _results(path)  # every line parses
    seen = [r["id"] for r in rows]
    assert len(seen) == len(set(seen)), "an id appears twice"
    assert set(seen) == ids
    return rows


# --- task files ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"id": "a", "prompt": "x"}', "{not json"], ":2: not a JSON line"),
        (['{"id": "a", "prompt": "x"}', '{"id": "a", "prompt": "y"}'], "duplicate task id 'a'"),
        (['{"id": "a"}'], ":1: bad task"),
        (['{"id": "a", "prompt": "x", "messages": []}'], "exactly one of 'prompt' or 'messages'"),
        (['{"id": "", "prompt": "x"}'], ":1: bad task: id"),
        (['{"id": "a", "prompt": "x", "colour": 1}'], ":1: bad task: colour"),
    ],
)
def test_bad_task_files_are_refused_naming_the_line(tmp_path: Path, lines: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_tasks(_write(tmp_path / "tasks.jsonl", lines))


def test_task_ids_may_be_integers_and_tool_shapes_are_both_accepted() -> None:
    openai_tool = {"type": "function", "function": {"name": "calculate", "parameters": {"type": "object"}}}
    anthropic_tool = {"name": "convert_units", "input_schema": {"type": "object"}}
    task = Task.model_validate({"id": 7, "prompt": "hi", "tools": [openai_tool, anthropic_tool],
                                "tool_choice": {"type": "tool", "name": "calculate"}})
    assert task.id == "7"
    assert [s.name for s in task.specs() or ()] == ["calculate", "convert_units"]
    assert str(task.choice(ToolChoice.AUTO)) == "calculate"
    assert Task(id="x", prompt="p", tool_choice={"type": "any"}).choice(ToolChoice.AUTO) is ToolChoice.REQUIRED
    fn_choice = {"type": "function", "function": {"name": "calculate"}}
    assert Task(id="x", prompt="p", tool_choice=fn_choice).choice(ToolChoice.AUTO) == ToolChoice.of_tool("calculate")


def test_openai_shaped_messages_become_a_history() -> None:
    task = Task(id="m", messages=[{"role": "system", "content": "be brief"},
                                  {"role": "user", "content": [{"type": "text", "text": "hello"}]}])
    history = task.history()
    assert [m.role for m in history] == ["system", "user"]
    assert history[1].content == "hello"


def test_task_values_that_are_not_tasks_are_refused_naming_the_item(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="task #2: bad task: expected a Task or a mapping, got str"):
        run_batch_sync([{"id": "a", "prompt": "x"}, '{"id": "b", "prompt": "y"}'], output=tmp_path / "out.jsonl",
                       backend=ScriptedBackend([]), tools_module=TOOLS_MODULE)
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize("task_id", ["plain-id_1.x", "has space/slash", "ü" * 3, "../escape"])
def test_transcript_names_are_safe_file_names(task_id: str) -> None:
    name = transcript_name(task_id)
    assert name.endswith(".jsonl") and "/" not in name and not name.startswith(".")


def test_a_tool_the_module_lacks_is_refused_before_anything_runs(tmp_path: Path) -> None:
    tool = {"type": "function", "function": {"name": "launch_rocket"}}
    tasks = [{"id": "a", "prompt": "go", "tools": [tool]}]
    out = tmp_path / "out.jsonl"
    with pytest.raises(UsageError, match="launch_rocket"):
        run_batch_sync(tasks, output=out, backend=ScriptedBackend([]), tools_module=TOOLS_MODULE)
    assert not out.exists() or out.read_text() == ""


# --- the results log -----------------------------------------------------------------


def _result(task_id: str, ok: bool = True) -> TaskResult:
    return TaskResult(id=task_id, ok=ok, content="x" if ok else None, error=None if ok else "RunError: no")


def test_results_log_repairs_a_torn_last_line(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    with ResultLog(out) as log:
        log.append(_result("a"))
        log.append(_result("b"))
    with out.open("ab") as fh:
        fh.write(b'{"id": "c", "ok": tr')  # a writer killed mid-line
    log = ResultLog(out)
    assert log.repaired and set(log.done) == {"a", "b"}
    log.append(_result("c"))
    log.close()
    _assert_exactly_once(out, {"a", "b", "c"})


def test_results_log_refuses_a_file_it_did_not_write(tmp_path: Path) -> None:
    out = _write(tmp_path / "out.jsonl", ['{"hello": 1}'])
    with pytest.raises(UsageError, match=":1: not a result line"):
        ResultLog(out)


def test_results_log_drop_rewrites_without_the_given_ids(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    with ResultLog(out) as log:
        for i, ok in enumerate([True, False, True]):
            log.append(_result(f"r{i}", ok))
        log.drop({"r1"})
        log.append(_result("r1"))
    rows = _assert_exactly_once(out, {"r0", "r1", "r2"})
    assert all(r["ok"] for r in rows)


def test_a_second_writer_on_one_results_file_is_refused_while_the_first_holds_it(tmp_path: Path) -> None:
    # defect (issue 29, item 8): no lock; two batches on one file each ran and wrote every task
    out = tmp_path / "out.jsonl"
    with ResultLog(out) as first:
        first.append(_result("a"))
        with pytest.raises(UsageError, match="another batch is writing results to"):
            ResultLog(out)
        first.drop({"a"})  # the file is replaced: the new one is locked before it takes the path
        with pytest.raises(UsageError, match="another batch is writing results to"):
            ResultLog(out)
        first.append(_result("b"))
    with ResultLog(out) as again:  # released on close
        assert set(again.done) == {"b"}


def test_two_batch_processes_on_one_file_run_every_task_once(tmp_path: Path) -> None:
    n = 60
    tasks = _write(tmp_path / "tasks.jsonl", task_lines(n))
    out = tmp_path / "out.jsonl"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    script, gate = make_script(latency=0.01), threading.Event()

    def held(request: Any) -> Any:  # the first batch waits, holding its file, until the second is done
        gate.wait(120)
        return script(request)

    with FakeUpstream(held) as fake:
        cmd = _batch_cmd(tasks, out, tmp_path / "runs", fake.base_url)
        first = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        while not fake.requests and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        second = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, timeout=120)
        gate.set()
        first_out, first_err = first.communicate(timeout=300)
        model_calls = len(fake.chat_requests)
    assert first.returncode == 0, first_err.decode()[-2000:]
    assert second.returncode == 2, second.stdout
    assert b"another batch is writing results to" in second.stderr and b"Traceback" not in second.stderr
    assert json.loads(first_out)["done"] == n
    _assert_exactly_once(out, {f"t{i}" for i in range(n)})
    assert model_calls == 2 * n  # each task's two model calls, once


# --- runs ----------------------------------------------------------------------------


def _always_unknown_tool(_messages: Any) -> str:
    return get_dialect("json-action").render_call(ToolCall(id="c", name="no_such_tool", arguments={}))


def test_failed_tasks_are_recorded_and_only_retried_when_asked(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    # a required call whose budget runs out fails (under auto the run would end with an answer)
    tasks = [{"id": "bad", "prompt": "x", "tool_choice": "required"}]
    stats = run_batch_sync(tasks, output=out, backend=ScriptedBackend(_always_unknown_tool), tools_module=TOOLS_MODULE)
    assert (stats.done, stats.failed) == (1, 1)
    assert stats.guards.get("unknown_tool", 0) >= 1
    [row] = _results(out)
    assert row["ok"] is False and row["error"].startswith("RetryBudgetExceeded")
    again = run_batch_sync(tasks, output=out, backend=ScriptedBackend(_always_unknown_tool), tools_module=TOOLS_MODULE)
    assert (again.skipped, again.done) == (1, 0)
    fixed = run_batch_sync([{"id": "bad", "prompt": "x"}], output=out, backend=ScriptedBackend(["fine"]),
                           tools_module=TOOLS_MODULE, retry_failed=True)
    assert (fixed.done, fixed.ok) == (1, 1)
    [row] = _assert_exactly_once(out, {"bad"})
    assert row["ok"] is True and row["content"] == "fine"


async def test_run_batch_is_an_async_iterator_that_writes_before_yielding(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    tasks = [Task(id=f"a{i}", prompt=f"say {i}") for i in range(5)]
    run = run_batch(tasks, output=out, backend=lambda: ScriptedBackend(lambda m: "ok"), concurrency=2)
    await run.start()
    assert run.stats.pending == 5
    seen = []
    async for result in run:
        assert result.id in {r["id"] for r in _results(out)}
        seen.append(result.id)
    assert sorted(seen) == [f"a{i}" for i in range(5)]
    assert isinstance(run.stats, BatchStats) and run.stats.ok == 5


def test_thousand_tasks_at_concurrency_64_against_a_fake_upstream(tmp_path: Path) -> None:
    tasks = _write(tmp_path / "tasks.jsonl", task_lines(1000))
    out = tmp_path / "out.jsonl"
    with FakeUpstream(make_script(latency=0.005)) as fake:
        backend = OpenAICompatBackend(fake.base_url, model="fake", api_key="sk-test")
        stats = run_batch_sync(tasks, output=out, backend=backend, tools_module=TOOLS_MODULE, concurrency=64)
        assert len(fake.chat_requests) == 2000
    assert (stats.done, stats.ok, stats.tool_calls, stats.model_calls) == (1000, 1000, 1000, 2000)
    rows = _assert_exactly_once(out, {f"t{i}" for i in range(1000)})
    for row in rows:
        n = int(row["id"][1:])
        assert row["content"] == f"{n} + 1 = {n + 1}"
        assert row["tool_calls"][0]["result"]["content"] == f"{float(n + 1)}"
        assert row["usage"]["prompt_tokens"] > 0


def test_cli_batch_prints_a_summary_and_writes_transcripts(tmp_path: Path) -> None:
    tasks = _write(tmp_path / "tasks.jsonl", task_lines(12))
    out, transcripts = tmp_path / "out.jsonl", tmp_path / "runs"
    with FakeUpstream(make_script()) as fake:
        result = CliRunner().invoke(app, [
            "batch", str(tasks), "-o", str(out), "--concurrency", "4", "--transcripts", str(transcripts),
            "--backend", "openai", "--base-url", fake.base_url, "--model", "fake",
            "--tools-module", TOOLS_MODULE, "--no-progress",
        ])
    assert result.exit_code == 0, result.output
    assert "success rate" in result.output and "100.0%" in result.output
    _assert_exactly_once(out, {f"t{i}" for i in range(12)})
    assert len(list(transcripts.glob("*.jsonl"))) == 12
    events = read_transcript(transcripts / "t3.jsonl")
    assert events[-1]["type"] == "run_end" and events[-1]["status"] == "final"
    assert replay(transcripts / "t3.jsonl").identical  # a batch transcript replays without the upstream


def _collector_seen(seen: list[tuple[int, bool]]) -> Any:
    script = make_script()

    def recording(request: Any) -> Any:  # runs in the fake's thread: the collector is the process's
        seen.append((gc.get_threshold()[0], gc.get_freeze_count() > 0))
        return script(request)

    return recording


def test_a_batch_runs_with_the_collector_tuned_and_restores_it(tmp_path: Path) -> None:
    before = (gc.get_threshold(), gc.get_freeze_count())
    seen: list[tuple[int, bool]] = []
    with FakeUpstream(_collector_seen(seen)) as fake:
        stats = run_batch_sync(map(json.loads, task_lines(3)), output=tmp_path / "out.jsonl", tools_module=TOOLS_MODULE,
                               backend=OpenAICompatBackend(fake.base_url, model="fake"))
        assert stats.ok == 3
        assert set(seen) == {(YOUNG_COLLECTION_THRESHOLD, True)}
        assert (gc.get_threshold(), gc.get_freeze_count()) == before
        seen.clear()
        result = CliRunner().invoke(app, [  # the CLI drives its batch the same way
            "batch", _write(tmp_path / "tasks.jsonl", task_lines(2)).as_posix(), "-o", str(tmp_path / "cli.jsonl"),
            "--backend", "openai", "--base-url", fake.base_url, "--model", "fake",
            "--tools-module", TOOLS_MODULE, "--no-progress",
        ])
    assert result.exit_code == 0, result.output
    assert set(seen) == {(YOUNG_COLLECTION_THRESHOLD, True)}
    assert (gc.get_threshold(), gc.get_freeze_count()) == before


def test_a_callers_own_frozen_collector_is_left_frozen() -> None:
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with batch_collector():
            assert gc.get_threshold()[0] == YOUNG_COLLECTION_THRESHOLD
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()


async def test_blocking_batch_calls_are_refused_inside_a_running_loop(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="inside a running event loop"):
        run_batch_sync([{"id": "t", "prompt": "x"}], output=tmp_path / "out.jsonl", backend=ScriptedBackend(["x"]))
    assert not (tmp_path / "out.jsonl").exists()


def test_workers_start_spread_over_the_ramp(tmp_path: Path) -> None:
    first_request: list[float] = []

    def script(request: Any) -> FakeReply:  # each answer outlasts the ramp: every worker gets one task
        first_request.append(time.monotonic())
        return FakeReply(text="done", latency=1.2)

    tasks = [{"id": f"t{i}", "prompt": f"task {i}"} for i in range(4)]
    with FakeUpstream(script) as fake:
        stats = run_batch_sync(tasks, output=tmp_path / "out.jsonl", concurrency=4, ramp=0.8,
                               backend=OpenAICompatBackend(fake.base_url, model="fake"))
    assert stats.ok == 4 and len(first_request) == 4
    starts = sorted(first_request)
    # worker i waits ramp * i / concurrency before its first task: 0, 0.2, 0.4, 0.6 s (the
    # requests reach the upstream later by scheduling jitter: half a step is allowed for it;
    # without the ramp they arrive within a few milliseconds of each other)
    assert all(later - earlier >= 0.1 for earlier, later in zip(starts, starts[1:]))
    assert starts[-1] - starts[0] >= 0.45


@pytest.mark.parametrize("ramp", [-0.1, float("nan")])
def test_a_bad_ramp_is_refused(tmp_path: Path, ramp: float) -> None:
    with pytest.raises(UsageError, match="ramp must be a number of seconds >= 0"):
        run_batch([{"id": "t", "prompt": "x"}], output=tmp_path / "out.jsonl", backend=ScriptedBackend([]), ramp=ramp)


def test_cli_batch_takes_a_ramp_and_refuses_a_negative_one(tmp_path: Path) -> None:
    tasks = _write(tmp_path / "tasks.jsonl", task_lines(3))
    with FakeUpstream(make_script()) as fake:
        args = ["batch", str(tasks), "-o", str(tmp_path / "out.jsonl"), "--backend", "openai", "--base-url",
                fake.base_url, "--model", "fake", "--tools-module", TOOLS_MODULE, "--no-progress", "--json"]
        bad = CliRunner().invoke(app, [*args, "--ramp", "-1"])
        assert bad.exit_code == 2 and not (tmp_path / "out.jsonl").exists()
        result = CliRunner().invoke(app, [*args, "--ramp", "0"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output.strip().splitlines()[-1])["ok"] == 3


def _batch_cmd(tasks: Path, out: Path, transcripts: Path, base_url: str) -> list[str]:
    return [
        sys.executable, "-m", "agentfsm", "batch", str(tasks), "-o", str(out),
        "--concurrency", "16", "--transcripts", str(transcripts), "--fsync-every", "0",
        "--backend", "openai", "--base-url", base_url, "--model", "fake",
        "--tools-module", TOOLS_MODULE, "--no-progress", "--json",
    ]


def _lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def test_sigkill_at_several_points_then_rerun_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    n = 240
    tasks = _write(tmp_path / "tasks.jsonl", task_lines(n))
    out, transcripts = tmp_path / "out.jsonl", tmp_path / "runs"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with FakeUpstream(make_script(latency=0.05)) as fake:
        cmd = _batch_cmd(tasks, out, transcripts, fake.base_url)
        for kill_at in (1, 40, 120, 200):
            proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            deadline = time.monotonic() + 120
            while _lines(out) < kill_at and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.005)
            proc.send_signal(signal.SIGKILL)
            _, err = proc.communicate()
            assert proc.returncode == -signal.SIGKILL, err.decode()[-2000:]
            whole = out.read_bytes().split(b"\n")[:-1]  # at most a torn last line after a kill
            ids = [json.loads(line)["id"] for line in whole]
            assert len(ids) == len(set(ids))
        final = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, timeout=300)
    assert final.returncode == 0, final.stderr.decode()[-2000:]
    summary = json.loads(final.stdout)
    assert summary["skipped"] + summary["done"] == n
    rows = _assert_exactly_once(out, {f"t{i}" for i in range(n)})
    assert all(r["ok"] for r in rows)
    for i in range(n):  # a killed task's partial transcript was replaced by its re-run
        events = read_transcript(transcripts / f"t{i}.jsonl")
        assert [e["type"] for e in events].count("run_start") == 1
        assert events[-1]["type"] == "run_end"


def _counts_from_transcript(path: str) -> dict[str, Any]:
    """What a task's transcript says it did: the definition the result row must match."""
    events = read_transcript(path)
    outputs = [e for e in events if e["type"] == "model_output"]
    guards: dict[str, int] = {}
    for e in events:
        if e["type"] == "guard" and e["verdict"] in ("correct", "stop"):
            guards[e["guard"]] = guards.get(e["guard"], 0) + 1
    return {
        "steps": sum(not e.get("extension") for e in outputs),
        "corrections": sum(e["type"] == "retry" for e in events),
        "guards": guards,
        "usage": {"prompt_tokens": sum(e["usage"]["prompt_tokens"] for e in outputs),
                  "completion_tokens": sum(e["usage"]["completion_tokens"] for e in outputs)},
        "calls": [e["call"]["name"] for e in events if e["type"] == "tool_call"],
    }


@pytest.mark.parametrize("choice", ["auto", "required"])
def test_a_result_row_counts_what_its_transcript_records(tmp_path: Path, choice: str) -> None:
    # a wrong tool first (consensus draws candidates, which agree on nothing), then a good
    # call and an answer; under required the budget runs out on the wrong tool instead
    good = get_dialect("json-action").render_call(ToolCall(id="c", name="calculate", arguments={"expression": "1 + 1"}))
    replies = iter([_always_unknown_tool(None)] * 3 + ([good, "1 + 1 = 2"] if choice == "auto" else []))

    def script(_messages: Any) -> str:
        return next(replies, _always_unknown_tool(None))

    out = tmp_path / "out.jsonl"
    run_batch_sync([{"id": "t", "prompt": "what is 1 + 1?", "tool_choice": choice}], output=out,
                   backend=ScriptedBackend(script), tools_module=TOOLS_MODULE,
                   transcripts_dir=tmp_path / "tr", consensus="on", consensus_samples=2, max_corrections=2)
    [row] = _results(out)
    seen = _counts_from_transcript(row["transcript"])
    assert seen["guards"].get("consensus", 0) == 1 and seen["steps"] >= 4
    assert (row["steps"], row["corrections"], row["guards"], row["usage"]) == (
        seen["steps"], seen["corrections"], seen["guards"], seen["usage"])
    assert [c["call"]["name"] for c in row["tool_calls"]] == seen["calls"]
    assert row["ok"] is (choice == "auto")
    assert seen["calls"] == (["calculate"] if choice == "auto" else [])


def test_progress_shows_failures_by_reason_and_corrections_by_guard_as_they_come(tmp_path: Path) -> None:
    from agentfsm.batch.controller import BatchStats, failure_reason
    from agentfsm.cli.batch import live_counters
    from agentfsm.core.messages import PromptMessage
    from agentfsm.testing.sample_batch import sample_reply, write_sample_batch

    assert live_counters(BatchStats()) == "failed 0  corrections 0  0.0 calls/s"
    assert failure_reason("RetryBudgetExceeded: no acceptable reply") == "RetryBudgetExceeded"
    assert failure_reason(None) == failure_reason("weird text") == "error"
    stats = BatchStats(failed=2, failures={"LoopDetected": 1, "BackendTimeout": 1},
                       corrections=9, guards={"a": 1, "b": 2, "c": 3, "d": 3})
    line = live_counters(stats)
    assert line.startswith("failed 2 (BackendTimeout 1, LoopDetected 1)  corrections 9 (c 3, d 3, b 2, …)  ")
    # the CLI's bar, as the sample batch runs on the same script behind a real HTTP upstream
    write_sample_batch(tmp_path / "sample", 8)
    tasks = tmp_path / "sample" / "tasks.jsonl"

    def model(request: Any) -> str:
        return sample_reply([PromptMessage(role=m["role"], content=m["content"]) for m in request.messages])

    with FakeUpstream(model) as fake:
        result = CliRunner(env={"COLUMNS": "200"}).invoke(app, ["batch", str(tasks), "-o", str(tmp_path / "out.jsonl"), "--backend", "openai",
                                          "--base-url", fake.base_url, "--model", "fake",
                                          "--tools-module", "agentfsm.testing.example_tools:TOOLS", "--concurrency", "1"])
    assert result.exit_code == 1  # one task failed
    assert "failed 1 (RetryBudgetExceeded 1)" in result.output
    assert "corrections 7 (refusal 4, unknown_tool 4, budget 2, …)" in result.output, result.output[:400]
    assert "failed by reason: RetryBudgetExceeded" in result.output
