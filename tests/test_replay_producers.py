"""A transcript from every producer replays identical: the agent (``agentfsm run``), the
proxy (OpenAI, Anthropic and Responses, streamed and not), batch and eval.

Each transcript is made by really running its producer: the CLI and the proxy against
a scripted model or the FakeUpstream loopback server, the official SDKs as clients.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from typer.testing import CliRunner

from agentfsm.cli import app
from agentfsm.core.events import (
    AgentRunConfig,
    BatchRunConfig,
    EvalRunConfig,
    GuardEvent,
    ModelOutputEvent,
    ProxyRunConfig,
    RunStartEvent,
    ToolCallEvent,
    event_fields,
)
from agentfsm.replays.compare import replay
from agentfsm.runtime.transcript import read_events
from agentfsm.testing import FakeUpstream, ScriptedBackend
from fixtures.batch.upstream import TOOLS_MODULE, make_script, task_lines
from tests._proxy import TOOLS_ANTHROPIC, TOOLS_OPENAI, action, proxy, serve_command
from tests.test_eval_runner import FIXTURES as BFCL_FIXTURES
from tests.test_eval_runner import _fake_answer

REPO = Path(__file__).resolve().parent.parent
ASK = "What is the weather in Lima?"
TOOLS_RESPONSES: list[Any] = [
    {"type": "function", "name": t["function"]["name"], "description": t["function"]["description"],
     "parameters": t["function"]["parameters"]}
    for t in TOOLS_OPENAI
]


def replay_cli(*paths: Path) -> subprocess.CompletedProcess[str]:
    """``python -m agentfsm replay PATH...`` in a fresh interpreter."""
    return subprocess.run(
        [sys.executable, "-m", "agentfsm", "replay", *map(str, paths)],
        capture_output=True, text=True, timeout=120, cwd=REPO,
    )


def config_of(path: Path) -> Any:
    start = read_events(path)[0]
    assert isinstance(start, RunStartEvent)
    return start.config


# -- the agent ----------------------------------------------------------------------


def test_an_agent_run_from_the_cli_replays_identical(tmp_path: Path) -> None:
    transcript = tmp_path / "run.jsonl"
    script = ['```json action\n{"tool": "calculate", "arguments": {"expr": "6*7"}}\n```',
              action("calculate", expression="6*7"), "6*7 = 42"]
    with FakeUpstream(script) as fake:
        proc = subprocess.run(
            [sys.executable, "-m", "agentfsm", "run", "What is 6*7?", "--tools", "agentfsm.testing.example_tools:TOOLS",
             "--backend", "openai", "--base-url", fake.base_url, "--model", "fake", "--enforcement", "prompt",
             "--transcript", str(transcript), "--json"],
            capture_output=True, text=True, timeout=120, cwd=REPO,
        )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["content"] == "6*7 = 42"
    config = config_of(transcript)
    assert isinstance(config, AgentRunConfig) and config.max_steps == 10
    report = replay(transcript)
    assert report.identical and report.compared > 5 and not report.contract_changed
    assert any(isinstance(e, GuardEvent) and e.verdict == "correct" for e in read_events(transcript))
    done = replay_cli(transcript)
    assert done.returncode == 0 and "identical" in done.stdout, done.stdout + done.stderr


# -- the proxy ----------------------------------------------------------------------


def _ask(url: str, protocol: str, stream: bool) -> None:
    """One request that must call a tool, through the official SDK of ``protocol``."""
    if protocol == "anthropic":
        with anthropic.Anthropic(base_url=url, api_key="k", max_retries=0) as a:
            body: Any = {"model": "m", "max_tokens": 256, "messages": [{"role": "user", "content": ASK}],
                         "tools": TOOLS_ANTHROPIC, "tool_choice": {"type": "any"}}
            if stream:
                with a.messages.stream(**body) as s:
                    s.get_final_message()
            else:
                a.messages.create(**body)
        return
    with openai.OpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0) as c:
        if protocol == "responses":
            result: Any = c.responses.create(model="m", input=ASK, tools=TOOLS_RESPONSES, tool_choice="required",
                                             stream=stream)
        else:
            result = c.chat.completions.create(model="m", messages=[{"role": "user", "content": ASK}],
                                               tools=TOOLS_OPENAI, tool_choice="required", stream=stream)
        if stream:
            list(result)


def record_proxy(directory: Path, protocol: str, stream: bool, replies: list[str]) -> Path:
    """Serve one request through the proxy (``agentfsm serve --transcripts``'s app); its transcript."""
    with proxy(ScriptedBackend(replies), transcripts_dir=directory) as url:
        _ask(url, protocol, stream)
    (path,) = directory.glob("*.jsonl")
    return path


PROXY_CASES = [(p, s) for p in ("openai", "anthropic", "responses") for s in (False, True)]


@pytest.mark.parametrize(("protocol", "stream"), PROXY_CASES, ids=[f"{p}-{'stream' if s else 'whole'}" for p, s in PROXY_CASES])
def test_a_proxy_transcript_replays_identical_through_the_proxy(tmp_path: Path, protocol: str, stream: bool) -> None:
    # a refusal is corrected, then the model calls the tool: decisions on both attempts
    path = record_proxy(tmp_path, protocol, stream, ["I cannot use tools.", action("get_weather", city="Lima")])
    config = config_of(path)
    assert isinstance(config, ProxyRunConfig)
    assert (config.protocol, config.stream, config.max_steps, str(config.tool_choice)) == (protocol, stream, None, "required")
    report = replay(path)
    assert report.identical, report.divergence
    assert report.compared >= 7 and not report.contract_changed
    assert any(e.type == "contract" for e in read_events(path))
    calls = [e for e in read_events(path) if isinstance(e, ToolCallEvent)]
    assert [c.call.name for c in calls] == ["get_weather"]


def test_proxy_transcripts_replay_from_the_command_line(tmp_path: Path) -> None:
    paths = [record_proxy(tmp_path / f"{p}-{s}", p, s, ["No tools here.", action("get_weather", city="Lima")])
             for p, s in PROXY_CASES]
    done = replay_cli(*paths)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("identical") == len(paths)


def test_a_proxy_replay_that_decides_differently_diverges_where_it_does(tmp_path: Path) -> None:
    path = record_proxy(tmp_path, "openai", False, ["I cannot use tools.", action("get_weather", city="Lima")])
    events = read_events(path)
    # today the first reply is a clean call: no refusal guard, no second attempt
    changed = [
        e.model_copy(update={"text": action("get_weather", city="Quito")})
        if isinstance(e, ModelOutputEvent) and e.text == "I cannot use tools." else e
        for e in events
    ]
    path.write_text("".join(json.dumps(event_fields(e, envelope=True)) + "\n" for e in changed), encoding="utf-8")
    report = replay(path)
    assert not report.identical and report.divergence is not None
    parse = next(i for i, e in enumerate(events) if e.type == "parse")
    assert report.divergence.index == parse and report.divergence.event_type == "parse"
    assert report.divergence.now["tool_calls"][0]["arguments"] == {"city": "Quito"}
    assert replay_cli(path).returncode == 1


# -- batch and eval -----------------------------------------------------------------


def test_batch_transcripts_replay_identical(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(line + "\n" for line in task_lines(3)), encoding="utf-8")
    runs = tmp_path / "runs"
    with FakeUpstream(make_script()) as fake:
        result = CliRunner().invoke(app, [
            "batch", str(tasks), "-o", str(tmp_path / "out.jsonl"), "--transcripts", str(runs),
            "--backend", "openai", "--base-url", fake.base_url, "--model", "fake",
            "--tools-module", TOOLS_MODULE, "--no-progress",
        ])
    assert result.exit_code == 0, result.output
    paths = sorted(runs.glob("*.jsonl"))
    assert [p.name for p in paths] == ["t0.jsonl", "t1.jsonl", "t2.jsonl"]
    for path in paths:
        config = config_of(path)
        assert isinstance(config, BatchRunConfig) and config.task == path.stem
        assert replay(path).identical
    assert replay_cli(*paths).returncode == 0


def test_eval_transcripts_replay_identical(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    with FakeUpstream(_fake_answer) as fake:
        result = CliRunner().invoke(app, [
            "eval", "bfcl", "--categories", "simple_python,irrelevance", "--limit", "1",
            "--backend", "openai", "--base-url", fake.base_url, "--enforcement", "prompt",
            "--data-dir", str(BFCL_FIXTURES), "-o", str(tmp_path / "report"), "--transcripts", str(runs),
        ])
    assert result.exit_code == 0, result.output
    paths = sorted(runs.glob("*.jsonl"))
    assert [p.name for p in paths] == ["irrelevance_0.json-action.prompt.jsonl", "simple_python_0.json-action.prompt.jsonl"]
    kinds = {p.name.split(".")[0]: [e.type for e in read_events(p)] for p in paths}
    assert "tool_call" in kinds["simple_python_0"] and "final" in kinds["irrelevance_0"]
    for path in paths:
        config = config_of(path)
        assert isinstance(config, EvalRunConfig) and config.case == path.name.split(".")[0]
        report = replay(path)
        assert report.identical and report.compared > 0 and not report.contract_changed
    assert replay_cli(*paths).returncode == 0


def test_the_serve_command_then_the_replay_command(tmp_path: Path) -> None:
    """The reported defect, end to end: ``agentfsm serve --transcripts DIR``, then
    ``agentfsm replay DIR`` (it used to crash on the proxy's ``max_steps: null``)."""
    runs = tmp_path / "runs"
    with FakeUpstream(["I can't call tools.", action("get_weather", city="Lima"), action("get_time", tz="UTC")]) as fake:
        with serve_command(fake.base_url, runs, cwd=REPO) as served:
            _ask(served.url, "openai", False)
            _ask(served.url, "anthropic", True)
    assert len(list(runs.glob("*.jsonl"))) == 2
    done = replay_cli(runs)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("identical") == 2
