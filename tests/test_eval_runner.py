"""The BFCL runner, report and CLI, on hand-made cases with scripted and fake-HTTP models."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentfsm.core.backend import Capabilities
from agentfsm.backends.scripted import ScriptedBackend
from agentfsm.cli import app
from agentfsm.core.config import RunConfig
from agentfsm.dialects import get_dialect
from agentfsm.core.errors import UsageError
from agentfsm.eval.chart import write_chart
from agentfsm.eval.report import aggregate, render_markdown, write_report
from agentfsm.eval.runner import BASELINE, EvalPlan, RunSpec, resolve_specs, run_eval
from agentfsm.core.messages import PromptMessage, ToolCall
from agentfsm.testing import FakeUpstream
from agentfsm.testing.fake_script import ReceivedRequest

FIXTURES = Path(__file__).parent.parent / "fixtures" / "bfcl"
BFCL_PROMPT_START = "You are an expert in composing functions."

#: question -> (runtime call or None for prose, baseline reply)
ANSWERS: dict[str, tuple[ToolCall | None, str]] = {
    "What is the weather in Paris in celsius?": (
        ToolCall(id="c", name="weather.get", arguments={"city": "Paris", "unit": "celsius"}),
        "Sure! The weather in Paris is nice.",
    ),
    "Who wrote the novel Moby-Dick?": (None, "[triangle_area(base=1.0, height=2.0)]"),
    "Look up the population of Oslo and of Lima.": (
        ToolCall(id="c", name="city.population", arguments={"city": "Oslo"}),
        "[city.population(city='Oslo'), city.population(city='Lima')]",
    ),
}


def _reply(messages: Sequence[PromptMessage]) -> str:
    question = next(m.content for m in messages if m.role == "user")
    call, baseline = ANSWERS[question]
    if messages[0].content.startswith(BFCL_PROMPT_START):
        return baseline
    if call is None:
        return "Herman Melville wrote Moby-Dick."
    return get_dialect("json-action").render_call(call)


def _cases_plan(specs: tuple[RunSpec, ...]) -> EvalPlan:
    return EvalPlan(categories=("simple_python", "irrelevance", "parallel"), specs=specs, limit=1, data_dir=FIXTURES)


def test_runtime_and_baseline_rows_are_scored_as_bfcl_does() -> None:
    backend = ScriptedBackend(_reply)
    specs = resolve_specs(backend, "json-action", "prompt")
    assert specs == (BASELINE, RunSpec("json-action", "prompt"))
    results = asyncio.run(run_eval(backend, _cases_plan(specs)))
    verdicts = {(r.case_id, r.enforcement): r.valid for r in results}
    assert verdicts == {
        ("simple_python_0", "baseline"): False,
        ("simple_python_0", "prompt"): True,
        ("irrelevance_0", "baseline"): False,
        ("irrelevance_0", "prompt"): True,
        ("parallel_0", "baseline"): True,
        ("parallel_0", "prompt"): False,
    }
    baseline_prose = next(r for r in results if r.case_id == "simple_python_0" and r.enforcement == "baseline")
    assert baseline_prose.error_type == "ast_decoder:decoder_failed" and not baseline_prose.protocol_valid
    runtime = [r for r in results if r.enforcement == "prompt"]
    assert all(r.protocol_valid and r.replies == 1 and r.parsed_replies == 1 for r in runtime)

    rows = aggregate(results)
    mean = {r.spec: r for r in rows if r.category == "mean"}
    assert mean[RunSpec("json-action", "prompt")].accuracy == pytest.approx(200 / 3)
    assert mean[BASELINE].accuracy == pytest.approx(100 / 3)
    assert mean[RunSpec("json-action", "prompt")].gain == pytest.approx(100 / 3)
    assert mean[BASELINE].gain is None
    markdown = render_markdown(rows, {"command": "agentfsm eval bfcl", "date": "2026-01-01"})
    assert "| **mean** | **json-action / prompt** | **3** | **66.7** | **+33.3** |" in markdown


def test_corrections_are_counted_by_guard() -> None:
    right = get_dialect("json-action").render_call(ToolCall(id="c", name="weather.get", arguments={"city": "Paris"}))
    wrong = get_dialect("json-action").render_call(ToolCall(id="c", name="weather.fetch", arguments={"city": "Paris"}))
    backend = ScriptedBackend([wrong, right])
    plan = EvalPlan(categories=("simple_python",), specs=(RunSpec("json-action", "prompt"),), limit=1, data_dir=FIXTURES)
    [result] = asyncio.run(run_eval(backend, plan))
    assert result.valid and result.replies == 2 and result.corrections == {"unknown_tool": 1}
    [row] = aggregate([result])
    assert row.mean_attempts == 2 and row.corrections == {"unknown_tool": 1}


def test_a_spent_budget_is_wrong_and_not_protocol_valid() -> None:
    wrong = get_dialect("json-action").render_call(ToolCall(id="c", name="nope", arguments={}))
    backend = ScriptedBackend([wrong] * 3)
    plan = EvalPlan(
        categories=("simple_python",), specs=(RunSpec("json-action", "prompt"),), limit=1, data_dir=FIXTURES, config=RunConfig(max_corrections=2)
    )
    [result] = asyncio.run(run_eval(backend, plan))
    assert not result.valid and not result.protocol_valid and result.replies == 3


def test_specs_follow_backend_capabilities() -> None:
    plain = ScriptedBackend([])
    assert resolve_specs(plain, "all", "all", baseline=False) == tuple(
        RunSpec(d, "prompt") for d in ("json-action", "json-protocol", "command", "smiley")
    )
    strong = ScriptedBackend([], capabilities=Capabilities(json_schema=True, prefill=True))
    assert resolve_specs(strong, "smiley", "auto", baseline=False) == (RunSpec("smiley", "constrained"),)
    assert [s.enforcement for s in resolve_specs(strong, "command", "all")] == ["baseline", "prompt", "constrained"]
    with pytest.raises(UsageError):
        resolve_specs(plain, "json-action", "constrained")
    with pytest.raises(UsageError):
        resolve_specs(plain, "yaml", "prompt")


def test_report_files_and_chart(tmp_path: Path) -> None:
    backend = ScriptedBackend(_reply)
    results = asyncio.run(run_eval(backend, _cases_plan(resolve_specs(backend, "json-action", "prompt"))))
    rows = aggregate(results)
    written = write_report(tmp_path / "out" / "bfcl.json", rows, results, {"command": "x"})
    assert [p.name for p in written] == ["bfcl.json", "bfcl.md"]
    data = json.loads(written[0].read_text())
    assert len(data["cases"]) == 6 and data["rows"][0]["category"] == "simple_python"
    png = write_chart(rows, tmp_path / "out" / "bfcl.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _fake_answer(request: ReceivedRequest) -> str:
    messages = [PromptMessage(role=m["role"], content=m["content"]) for m in request.messages]
    return _reply(messages)


def test_cli_runs_against_an_openai_compatible_upstream(tmp_path: Path) -> None:
    with FakeUpstream(_fake_answer) as fake:
        result = CliRunner().invoke(
            app,
            [
                "eval", "bfcl", "--categories", "simple_python,irrelevance", "--limit", "1",
                "--backend", "openai", "--base-url", fake.base_url, "--enforcement", "prompt",
                "--data-dir", str(FIXTURES), "-o", str(tmp_path / "report"),
            ],
        )
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "report.json").read_text())
    accuracy = {(r["category"], r["run"]): r["accuracy"] for r in report["rows"]}
    assert accuracy[("mean", "json-action / prompt")] == 100.0
    assert accuracy[("mean", "BFCL prompt (baseline)")] == 0.0
    assert (tmp_path / "report.md").read_text().startswith("# BFCL through agentfsm")
    assert (tmp_path / "report.png").is_file()


def test_cli_rejects_an_unknown_category() -> None:
    result = CliRunner().invoke(app, ["eval", "bfcl", "--categories", "no_such_category"])
    assert result.exit_code == 2
    assert "unknown BFCL category" in result.output


@pytest.mark.model
def test_one_case_on_the_embedded_model() -> None:
    from agentfsm.backends import create_backend

    backend = create_backend("local")
    specs = resolve_specs(backend, "json-action", "constrained")
    plan = EvalPlan(categories=("simple_python",), specs=specs, limit=1, data_dir=FIXTURES)
    baseline, runtime = asyncio.run(run_eval(backend, plan))
    assert baseline.enforcement == "baseline" and baseline.replies == 1
    assert runtime.enforcement == "constrained" and runtime.protocol_valid
    assert runtime.decoded and next(iter(runtime.decoded[0])) == "weather.get"
