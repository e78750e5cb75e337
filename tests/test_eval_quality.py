"""The quality gate: tasks run with a scripted model, the plans, the rows and the table, the CLI."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from syrupy.assertion import SnapshotAssertion
from typer.testing import CliRunner

from agentfsm.backends.scripted import ScriptedBackend
from agentfsm.cli import app
from agentfsm.core.errors import UsageError
from agentfsm.core.messages import PromptMessage
from agentfsm.eval.bfcl_data import load_cases
from agentfsm.eval.quality import (
    CATEGORIES,
    FAST,
    FULL,
    LIVE_CATEGORIES,
    available_live_categories,
    plan_cases,
    run_quality,
    run_tasks,
    select_tasks,
)
from agentfsm.eval.quality_table import build_rows, render_markdown, target_checks
from agentfsm.eval.runner import CaseResult
from agentfsm.eval.runtime_text import CallsSpent
from agentfsm.eval.suite import SuiteTask, SuiteResult, run_suite_task
from agentfsm.eval.suite_data import TASKS
from agentfsm.testing import FakeUpstream
from agentfsm.testing.fake_upstream import ReceivedRequest

FIXTURES = Path(__file__).parent.parent / "fixtures" / "bfcl"


def act(tool: str, **args: object) -> str:
    return "```json action\n" + json.dumps({"tool": tool, "parameters": args}) + "\n```"


def _task(name: str) -> SuiteTask:
    return next(t for t in TASKS if t.name == name)


def test_a_chain_in_french_passes_on_values_and_fails_on_a_wrong_call(tmp_path: Path) -> None:
    task = _task("weather_french_capital.fr1")
    good = ScriptedBackend([act("get_capital", country="la France"), act("get_capital", country="France"),
                            act("get_weather", city="Paris"), "Il fait beau à Paris, 18 °C."])
    # "la France" is not a country name the check accepts: the unknown-country error result
    # sends the model back, and only the calls made count
    result = asyncio.run(run_suite_task(good, task, transcript=tmp_path / "t.jsonl", enforcement="prompt"))
    assert not result.valid and result.why == "calls" and len(result.calls) == 3
    good = ScriptedBackend([act("get_capital", country="France"), act("get_weather", city="París"),
                            "Il fait beau à Paris, 18 °C."])
    result = asyncio.run(run_suite_task(good, task, transcript=tmp_path / "t.jsonl", enforcement="prompt"))
    assert result.valid and result.protocol_valid and result.model_calls == 3 and result.runtime_text is None
    assert (tmp_path / "t.jsonl").is_file()
    wrong = ScriptedBackend([act("get_weather", city="France"), "Il fait gris."])
    bad = asyncio.run(run_suite_task(wrong, task, enforcement="prompt"))
    assert not bad.valid and bad.why == "calls"


def test_the_answer_must_state_the_results_with_either_decimal_mark() -> None:
    task = _task("laps_to_miles.de1")
    calls = [act("multiply", a=4, b=12.5), act("convert_km_to_miles", km=50)]
    ok = asyncio.run(run_suite_task(ScriptedBackend([*calls, "Das sind 31,07 Meilen."]), task, enforcement="prompt"))
    assert ok.valid, ok
    vague = asyncio.run(run_suite_task(ScriptedBackend([*calls, "Das ist weit."]), task, enforcement="prompt"))
    assert not vague.valid and vague.why == "answer"


def test_a_task_that_needs_no_tool_passes_on_any_answer_without_a_call() -> None:
    task = _task("joke.es1")
    assert task.kind == "no tool" and task.language == "es"
    ok = asyncio.run(run_suite_task(ScriptedBackend(["¿Por qué el libro de matemáticas estaba triste? ¡Tenía muchos problemas!"]),
                              task, enforcement="prompt"))
    assert ok.valid and ok.calls == () and ok.model_calls == 1


def test_the_fast_and_full_plans() -> None:
    assert FULL.limit == 40 and FULL.live_limit == 30 and FULL.categories == CATEGORIES
    assert set(CATEGORIES) == {"simple_python", "simple_java", "simple_javascript", "multiple", "parallel",
                               "parallel_multiple", "irrelevance"}
    assert LIVE_CATEGORIES == ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple",
                               "live_irrelevance", "live_relevance")
    assert FULL.tasks() == TASKS
    fast = FAST.tasks()
    assert FAST.limit == FAST.live_limit == 10
    assert {t.language for t in fast} == {"en", "de"} and not any(t.held_out for t in fast)
    assert len(fast) == 10 * 4  # ten tuned base tasks, three English wordings and one German
    with pytest.raises(UsageError, match="no task in language"):
        select_tasks(TASKS, languages=("xx",))
    assert {t.split for t in select_tasks(TASKS, split="held-out")} == {"held-out"}


def test_the_live_group_is_what_the_installed_bfcl_eval_ships() -> None:
    assert available_live_categories() == LIVE_CATEGORIES
    assert available_live_categories(FIXTURES) == ()
    cases = plan_cases(FULL)
    counts = {c: sum(1 for x in cases if x.category == c) for c in (*CATEGORIES, *LIVE_CATEGORIES)}
    assert all(counts[c] == 40 for c in CATEGORIES)
    # the first 30 of each live category, all of those with fewer
    assert counts == {**counts, "live_simple": 30, "live_multiple": 30, "live_irrelevance": 30,
                      "live_parallel": 16, "live_parallel_multiple": 24, "live_relevance": 16}
    assert [c.id for c in cases if c.category == "live_simple"] == [c.id for c in load_cases("live_simple", 30)]


def _reply(messages: Sequence[PromptMessage]) -> str:
    """Answers in prose, except a call for BFCL's weather fixture."""
    if any("What is the weather in Paris in celsius?" in m.content for m in messages if m.role == "user"):
        return act("weather.get", city="Paris")
    return "Hola."


def test_run_quality_runs_tasks_then_cases_and_writes_transcripts(tmp_path: Path) -> None:
    tasks = [_task("greeting.de1"), _task("add_8_5.fr1")]
    cases = load_cases("simple_python", 1, FIXTURES) + load_cases("irrelevance", 1, FIXTURES)
    seen: list[str] = []
    task_results, case_results = asyncio.run(run_quality(
        ScriptedBackend(_reply), tasks, cases, tmp_path,
        on_task=lambda r: seen.append(r.task.name), on_case=lambda r: seen.append(r.case_id),
    ))
    assert seen == ["greeting.de1", "add_8_5.fr1", "simple_python_0", "irrelevance_0"]
    assert [r.valid for r in task_results] == [True, False] and [r.valid for r in case_results] == [True, True]
    assert sorted(p.name for p in (tmp_path / "tasks").iterdir()) == ["add_8_5.fr1.jsonl", "greeting.de1.jsonl"]
    assert len(list((tmp_path / "bfcl").iterdir())) == 2


def _result(name: str, valid: bool, calls: int = 2, leak: str | None = None,
            spent: CallsSpent = CallsSpent()) -> SuiteResult:
    return SuiteResult(_task(name), valid, True, calls, 1.5, answer="Hola." if valid else "", why="" if valid else "calls",
                      runtime_text=leak, spent=spent)


def _case(case_id: str, category: str, valid: bool, leak: str | None = None) -> CaseResult:
    return CaseResult(case_id, category, "json-action", "prompt", valid, None, 1, 1, 0, True, seconds=0.5,
                      model_calls=3, answer="x", runtime_text=leak)


def _results() -> tuple[list[SuiteResult], list[CaseResult]]:
    tasks = [
        _result("add_8_5.en1", True, spent=CallsSpent(extensions=1)), _result("add_8_5.de1", False),
        _result("multiply_12_5.en1", True, spent=CallsSpent(corrections=1)), _result("multiply_12_5.fr1", True, calls=1),
        _result("greeting.es1", False, leak="the user asked hola que tal estas hoy"),
        _result("joke.en2", True, calls=1),
    ]
    cases = [_case("simple_python_0", "simple_python", True), _case("irrelevance_0", "irrelevance", False),
             _case("live_irrelevance_0-0-0", "live_irrelevance", True, leak="if you have what the user asked for")]
    return tasks, cases


def test_rows_put_tuned_and_held_out_side_by_side_with_intervals() -> None:
    tasks, cases = _results()
    rows = build_rows(tasks, cases, live={"live_irrelevance"})
    labels = [(r.group, r.label) for r in rows]
    assert labels == [
        ("tasks by kind", "one call (auto), tuned"),
        ("tasks by kind", "one call (required), held-out"),
        ("tasks by kind", "no tool, tuned"),
        ("tasks by kind", "no tool, held-out"),
        ("tasks by language", "en"), ("tasks by language", "de"), ("tasks by language", "es"),
        ("tasks by language", "fr"),
        ("tasks", "tuned"), ("tasks", "held-out"), ("tasks", "all"),
        ("BFCL", "simple_python"), ("BFCL", "irrelevance"),
        ("BFCL live (untuned)", "live_irrelevance"),
        ("cost", "one-call tasks"), ("cost", "irrelevant requests"),
    ]
    by = {(r.group, r.label): r for r in rows}
    assert by[("tasks", "all")].cases == 6 and by[("tasks", "all")].correct == 4
    assert by[("tasks", "held-out")].runtime_text == 1
    low, high = by[("tasks", "all")].interval
    assert low == pytest.approx(30.0, abs=0.1) and high == pytest.approx(90.3, abs=0.1)
    one_call = by[("cost", "one-call tasks")]
    assert one_call.cases == 4 and one_call.model_calls / one_call.cases == 1.75
    # of its 7 model calls, one extended a call and one corrected a reply
    assert one_call.spent == CallsSpent(1, 0, 1) and one_call.cells()[7] == "14 / 0 / 14"
    irrelevant = by[("cost", "irrelevant requests")]  # no-tool tasks and both irrelevance categories
    assert irrelevant.cases == 4 and irrelevant.model_calls == 1 + 2 + 3 + 3


def test_the_targets_are_checked_on_the_rows() -> None:
    tasks, cases = _results()
    lines = target_checks(build_rows(tasks, cases), runtime_text=2)
    assert lines == [
        "held-out 66.7 % against tuned 66.7 %: +0.0 points (within 10): met",
        "de 0.0 % against English 100.0 % (at least 80 % of it): **not met**",
        "es 0.0 % against English 100.0 % (at least 80 % of it): **not met**",
        "fr 100.0 % against English 100.0 % (at least 80 % of it): met",
        "model calls per case, one-call tasks: 1.75 (at most 2.5): met",
        "model calls per case, irrelevant requests: 2.25 (at most 3): met",
        "answers carrying runtime text: 2 (none): **not met**",
    ]
    slow = [SuiteResult(_task("add_8_5.en1"), True, True, 3, 1.0, answer="13"),
            SuiteResult(_task("add_8_5.en2"), False, True, 3, 1.0, answer="")]
    assert target_checks(build_rows(slow, []), runtime_text=0) == [
        "model calls per case, one-call tasks: 3.00 (at most 2.5): **not met**",
        "answers carrying runtime text: 0 (none): met",
    ]


def test_the_markdown_table(snapshot: SnapshotAssertion) -> None:
    tasks, cases = _results()
    rows = build_rows(tasks, cases, live={"live_irrelevance"})
    meta = {"command": "agentfsm eval quality --fast", "date": "2026-01-01", "machine": "m", "bfcl_eval": None}
    text = render_markdown(rows, meta, tasks, cases)
    assert "**2**" in text and "bfcl_eval" not in text
    assert text == snapshot


def _fake_answer(request: ReceivedRequest) -> str:
    return _reply([PromptMessage(role=m["role"], content=m["content"]) for m in request.messages])


def test_cli_quality_runs_against_an_openai_compatible_upstream(tmp_path: Path) -> None:
    out = tmp_path / "q.md"
    with FakeUpstream(_fake_answer) as fake:
        result = CliRunner().invoke(app, [
            "eval", "quality", "--fast", "--languages", "es", "--categories", "simple_python,irrelevance",
            "--limit", "1", "--live-categories", "none", "--data-dir", str(FIXTURES),
            "--backend", "openai", "--base-url", fake.base_url, "-o", str(out), "--transcripts", str(tmp_path / "t"),
        ])
    assert result.exit_code == 0, result.output
    assert "[12/12, " in result.output  # ten tuned base tasks in Spanish, two BFCL cases
    text = out.read_text()
    assert "| tasks by language | es | 10 |" in text and "| BFCL | simple_python | 1 | 100.0 |" in text
    assert "held-out" not in text.split("Failed tasks")[0].split("| group |")[1]
    assert len(list((tmp_path / "t" / "tasks").iterdir())) == 10
    with FakeUpstream(_fake_answer) as fake:  # --split all: the held-out split beside the tuned one
        both = CliRunner().invoke(app, [
            "eval", "quality", "--fast", "--split", "all", "--languages", "fr", "--categories", "none",
            "--live-categories", "none", "--backend", "openai", "--base-url", fake.base_url, "-o", str(out),
        ])
    assert both.exit_code == 0, both.output
    assert "[15/15, " in both.output and "| **tasks** | **held-out** | **5** |" in out.read_text()


def test_cli_quality_help_and_bad_options() -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["eval", "quality", "--help"])
    assert result.exit_code == 0 and "--fast" in result.output and "--live-limit" in result.output
    for bad in (["--categories", "nope"], ["--split", "both"], ["--languages", "xx"]):
        outcome = runner.invoke(app, ["eval", "quality", *bad, "--backend", "openai", "--base-url",
                                      "http://127.0.0.1:9/v1"])
        assert outcome.exit_code == 2, bad
