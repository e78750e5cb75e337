"""The quality suite's own logic: task checks, a task run with a scripted model, the table."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from typer.testing import CliRunner

from agentfsm.backends.scripted import ScriptedBackend
from agentfsm.cli import app
from agentfsm.eval.quality import CATEGORIES, render_markdown, rows_from, run_tasks
from agentfsm.eval.suite import TASKS, answer_matches, calls_match, get_capital, get_weather, run_suite_task


def act(tool: str, **args: object) -> str:
    return "```json action\n" + json.dumps({"tool": tool, "parameters": args}) + "\n```"


def test_the_suite_covers_every_kind_with_at_least_20_tasks() -> None:
    assert len(TASKS) >= 20
    assert len({t.name for t in TASKS}) == len(TASKS)
    kinds = {t.kind for t in TASKS}
    assert kinds == {"one call (auto)", "one call (required)", "two calls", "chain", "no tool",
                     "first tasks (held out)"}
    assert {t.tool_choice for t in TASKS} >= {"auto", "required"}
    assert set(CATEGORIES) == {
        "simple_python", "simple_java", "simple_javascript", "multiple", "parallel", "parallel_multiple", "irrelevance"
    }


def test_calls_match_exactly_in_any_order() -> None:
    want = (("get_weather", {"city": "Oslo"}), ("get_weather", {"city": "Paris"}))
    assert calls_match(want, [("get_weather", {"city": "paris"}), ("get_weather", {"city": "Oslo "})])
    assert not calls_match(want, [("get_weather", {"city": "Oslo"})])
    assert not calls_match(want, [("get_weather", {"city": "Oslo"}), ("get_weather", {"city": "Oslo"})])
    assert calls_match((("multiply", {"a": 12.5, "b": 4}),), [("multiply", {"a": 12.5, "b": 4.0})])
    assert not calls_match((("multiply", {"a": 12.5, "b": 4}),), [("multiply", {"a": 1.5, "b": 4})])
    assert not calls_match((("multiply", {"a": 1, "b": 4}),), [("multiply", {"a": 1, "b": 4, "c": 0})])
    assert calls_match((), [])


def test_answers_need_every_piece() -> None:
    assert answer_matches("12.5 times 4 is 50.0.", (50,))
    assert not answer_matches("It is 150.", (50,))
    assert answer_matches("That is about 26.1 miles.", (26.1,))
    assert answer_matches("Oslo: snowing, -3 °C; Paris: sunny.", ("snow|-3", "sunny|18"))
    assert not answer_matches("Oslo: snowing.", ("snow|-3", "sunny|18"))
    assert answer_matches("1,234 in all", (1234,))
    assert answer_matches("Hi!", ()) and not answer_matches("  ", ())


def test_fake_tools_are_deterministic() -> None:
    assert get_capital("france") == "Paris" and get_weather(get_capital("Norway")) == "snowing, -3 °C"
    assert get_weather("Example City") == "overcast, 12 °C"


def test_a_task_passes_on_its_calls_and_answer_and_fails_otherwise(tmp_path: Path) -> None:
    task = next(t for t in TASKS if t.name == "chain_france")
    good = ScriptedBackend([act("get_capital", country="France"), act("get_weather", city="Paris"), "Sunny, 18 °C."])
    result = asyncio.run(run_suite_task(good, task, transcript=tmp_path / "t.jsonl", enforcement="prompt"))
    assert result.valid and result.protocol_valid and result.attempts == 3
    assert result.calls == (("get_capital", {"country": "France"}), ("get_weather", {"city": "Paris"}))
    assert (tmp_path / "t.jsonl").is_file()
    wrong = ScriptedBackend([act("get_weather", city="France"), "It is overcast."])
    bad = asyncio.run(run_suite_task(wrong, task, enforcement="prompt"))
    assert not bad.valid and bad.why == "calls"


def test_rows_and_markdown(tmp_path: Path) -> None:
    tasks = [t for t in TASKS if t.kind == "no tool"][:2]
    backend = ScriptedBackend(["Hello there, Maria!", "Hi."])
    results = asyncio.run(run_tasks(backend, tasks, transcripts_dir=tmp_path))
    rows = rows_from(results, [])
    assert [r.category for r in rows] == ["tasks: no tool", "tasks"]
    assert rows[-1].cases == 2 and rows[-1].mean_attempts == 1.0
    text = render_markdown(rows, {"command": "agentfsm eval quality", "date": "d", "machine": "m"}, ["x: calls"])
    assert "| **tasks** |" in text and "agentfsm eval quality" in text and "- x: calls" in text
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"{t.name}.jsonl" for t in tasks)


def test_cli_quality_help_and_bad_category() -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["eval", "quality", "--help"])
    assert result.exit_code == 0 and "--categories" in result.output
    bad = runner.invoke(app, ["eval", "quality", "--categories", "nope", "--backend", "openai",
                              "--base-url", "http://127.0.0.1:9/v1"])
    assert bad.exit_code == 2
