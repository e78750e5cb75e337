"""The settings surface as one thing: each setting read, checked and recorded the same way
wherever it is set (Agent keywords, CLI flags and AGENTFSM_* variables, the models file and
its profiles, batch task lines, create_app, a client's generation options).

Each test drives the real part: the CLI in a subprocess, the proxy over a FakeUpstream
through the official SDKs, the models file as ``agentfsm serve`` reads it.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from agentfsm import Agent
from agentfsm.backends.scripted import ScriptedBackend
from agentfsm.core.config import DEFAULTS
from agentfsm.core.errors import UsageError
from agentfsm.core.profile import ModelProfile, Profile
from agentfsm.prompt.contract import render_contract
from agentfsm.server.app import create_app
from agentfsm.server.models_file import load_models_file
from agentfsm.server.settings import NOT_FOR_THE_PROXY
from agentfsm.testing import FakeUpstream
from agentfsm.testing.example_tools import TOOLS
from tests._proxy import (  # fake: a fixture
    TOOLS_ANTHROPIC,
    TOOLS_OPENAI,
    fake,
    free_port,
    proxy,
    upstream_backend,
    wait_until_serving,
)

USER = [{"role": "user", "content": "What is the weather in Paris?"}]


def _agentfsm(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentfsm", *args], capture_output=True, text=True, timeout=120,
        env={**os.environ, "COLUMNS": "200", **(env or {})}, cwd=cwd,
    )


def _one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    """The single ``agentfsm: error: ...`` line a refused command ends with (exit 2, no traceback)."""
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("agentfsm: error: "), done.stderr
    return lines[0]


# --- `agentfsm tools` prints the contract `run` would send: parallel included -----------------


@pytest.mark.parametrize("how", [["--no-parallel"], []], ids=["flag", "env"])
def test_tools_prints_the_contract_of_a_run_without_parallel_calls(how: list[str]) -> None:
    env = {} if how else {"AGENTFSM_PARALLEL": "false"}
    done = _agentfsm("tools", "agentfsm.testing.example_tools:TOOLS", *how, env=env)
    assert done.returncode == 0, done.stderr
    tools: list[Any] = list(TOOLS)
    single = render_contract(tools, parallel=False)
    assert single != render_contract(tools, parallel=True)
    assert done.stdout.rstrip().endswith(single.rstrip())


# --- generation options: the Agent checks what the proxy checks -------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_tokenz": 64}, "unknown option(s) max_tokenz; options: max_tokens, temperature"),
        ({"max_tokens": 0}, "options.max_tokens: Input should be greater than or equal to 1"),
        ({"temperature": -0.5}, "options.temperature: Input should be greater than or equal to 0"),
        ({"top_p": 1.5}, "options.top_p: Input should be less than or equal to 1"),
        ({"top_k": -1}, "options.top_k: Input should be greater than or equal to 0"),
    ],
)
def test_an_agents_bad_generation_option_is_a_usage_error(options: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError) as caught:
        Agent(ScriptedBackend(["hi"]), options=options)
    assert message in str(caught.value)


@pytest.mark.parametrize(("field", "value"), [("max_tokens", 0), ("temperature", -0.5), ("top_p", 1.5)])
def test_the_proxy_refuses_the_same_options_in_the_providers_shape(fake: FakeUpstream, field: str, value: float) -> None:
    with proxy(upstream_backend(fake)) as url:
        with openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0) as client, \
                pytest.raises(openai.BadRequestError) as caught:
            client.chat.completions.create(model="m", messages=USER, tools=TOOLS_OPENAI, **{field: value})  # type: ignore[call-overload]
        assert caught.value.status_code == 400 and caught.value.body["param"] == field  # type: ignore[index]
        with anthropic.Anthropic(base_url=url, api_key="unused", max_retries=0) as aclient, \
                pytest.raises(anthropic.BadRequestError) as refused:
            # this SDK has no sampling keywords: they go as the body's own fields
            body: dict[str, Any] = {"max_tokens": 64, field: value}
            aclient.messages.create(model="m", max_tokens=64, messages=USER, tools=TOOLS_ANTHROPIC,  # type: ignore[arg-type]
                                    extra_body=body)
        assert refused.value.status_code == 400 and field in str(refused.value)
    assert fake.chat_requests == []  # refused before any model call


# --- settings a served model does not take: refused alike everywhere ---------------------------


@pytest.mark.parametrize("name", NOT_FOR_THE_PROXY)
def test_create_app_refuses_a_setting_the_proxy_would_drop(name: str) -> None:
    value: Any = {"tool_choice": "required", "parallel": False, "max_steps": 3, "result_max_chars": 100}[name]
    with pytest.raises(UsageError, match=rf"^{name}: each request brings its own tool_choice and parallel"):
        create_app(ScriptedBackend([]), **{name: value})
    create_app(ScriptedBackend([]), dialect="command", max_corrections=1)  # the ones it takes


def _profile(folder: Path, chosen: dict[str, Any]) -> None:
    entry = ModelProfile(model="openai:m", chosen=chosen, table=(), rule="r", date="d", versions={}, items=(), seconds=1)
    (folder / "p.json").write_text(json.dumps(Profile().with_model(entry).to_json()))


@pytest.mark.parametrize(
    ("chosen", "message"),
    [
        ({"dialect": "yaml"}, "chosen: dialect must be one of json-action, json-protocol, command, smiley; got 'yaml'"),
        ({"dialekt": "command"}, "chosen: unknown setting(s) dialekt"),
        ({"max_steps": 4}, "chosen: max_steps: each request brings its own tool_choice and parallel"),
    ],
)
def test_a_mistake_in_a_profile_names_the_profile(tmp_path: Path, chosen: dict[str, Any], message: str) -> None:
    """Not the models file's entry, which does not hold the bad value."""
    _profile(tmp_path, chosen)
    path = tmp_path / "models.toml"
    path.write_text("[models.a]\nbase_url = 'http://127.0.0.1:9/v1'\nmodel = 'm'\nprofile = 'p.json'\n")
    line = _one_error_line(_agentfsm("serve", "--models", str(path), "--port", "0"))
    where = f"{path}: models.a: {tmp_path / 'p.json'}: models.openai:m.chosen: "
    assert where + message.removeprefix("chosen: ") in line
    # the entry's own settings: the same check, naming the entry
    path.write_text("[models.a]\nbase_url = 'http://127.0.0.1:9/v1'\nmax_steps = 4\n")
    with pytest.raises(UsageError, match=r"models.a: max_steps: each request brings its own"):
        load_models_file(path, environ={})


def test_a_profiles_list_reads_as_the_configs_tuple(tmp_path: Path) -> None:
    _profile(tmp_path, {"policies": ["refusal"], "dialect": "command"})
    path = tmp_path / "models.toml"
    path.write_text("[models.a]\nbase_url = 'http://127.0.0.1:9/v1'\nmodel = 'm'\nprofile = 'p.json'\npolicies = ['answers']\n")
    (served,) = load_models_file(path, environ={}).models
    assert served.run == DEFAULTS.replace(policies=("answers",), dialect="command")
    assert served.settings_from == "profile p.json + models file"


# --- a batch task's tool_choice: checked when the file is read, naming the line ---------------


@pytest.mark.parametrize("choice", ['""', '"  "', '{"type": "tool", "name": ""}', '{"type": "bogus"}'])
def test_a_bad_task_tool_choice_names_its_line(tmp_path: Path, choice: str) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"id": "a", "prompt": "hi"}\n{"id": "b", "prompt": "hi", "tool_choice": ' + choice + "}\n")
    done = _agentfsm("batch", str(tasks), "-o", str(tmp_path / "out.jsonl"), "--backend", "openai",
                     "--base-url", "http://127.0.0.1:9/v1", "--tools-module", "agentfsm.testing.example_tools")
    line = _one_error_line(done)
    assert f"{tasks}:2: bad task: tool_choice:" in line and "a tool's name, or an OpenAI or Anthropic tool_choice object" in line
    assert not (tmp_path / "out.jsonl").exists() or (tmp_path / "out.jsonl").read_text() == ""


def test_task_tool_choice_forms_read_as_before() -> None:
    from agentfsm.batch.task import Task
    from agentfsm.core.choice import ToolChoice

    forms = {"any": ToolChoice.REQUIRED, "multiply": ToolChoice.of_tool("multiply")}
    objects: list[tuple[Any, Any]] = [({"type": "tool", "name": "add"}, "add"), ({"type": "function", "function": {"name": "add"}}, "add"),
               ({"type": "none"}, "none"), ({"type": "any"}, "required")]
    for raw, expected in [*forms.items(), *objects]:
        assert Task(id="t", prompt="p", tool_choice=raw).choice(ToolChoice.AUTO) == (
            expected if isinstance(expected, ToolChoice) else ToolChoice.parse(expected))
    assert Task(id="t", prompt="p").choice(ToolChoice.NONE) is ToolChoice.NONE


# --- calibrate: one default bound per model call ----------------------------------------------


def test_calibrate_cli_and_library_share_the_max_tokens_default(monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    from agentfsm.cli.calibrate import calibrate
    from agentfsm.eval import calibrate as library

    assert inspect.signature(calibrate).parameters["max_tokens"].default == library.DEFAULT_MAX_TOKENS
    seen: list[int | None] = []

    async def run_item(*args: Any) -> Any:
        seen.append(args[4].max_tokens)
        raise asyncio.CancelledError

    monkeypatch.setattr(library, "run_item", run_item)
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(library.run_calibration(ScriptedBackend([]), library.load_items()[:1], [{}]))
    assert seen == [library.DEFAULT_MAX_TOKENS]


# --- run_start records the effective config: result_max_chars too ------------------------------


def _run_start(path: Path) -> dict[str, Any]:
    first = json.loads(path.read_text().splitlines()[0])
    assert first["type"] == "run_start"
    return dict(first["config"])


def test_run_start_records_result_max_chars_from_the_cli_and_batch(tmp_path: Path) -> None:
    with FakeUpstream(["It is 4.", "It is 4."]) as upstream:
        transcript = tmp_path / "run.jsonl"
        done = _agentfsm("run", "--backend", "openai", "--base-url", upstream.base_url, "--model", "m",
                         "--enforcement", "prompt", "--transcript", str(transcript), "What is 2 + 2?",
                         env={"AGENTFSM_RESULT_MAX_CHARS": "120"})
        assert done.returncode == 0, done.stderr
        assert _run_start(transcript)["result_max_chars"] == 120
        tasks = tmp_path / "tasks.jsonl"
        tasks.write_text('{"id": "q", "prompt": "What is 2 + 2?", "tools": []}\n')
        done = _agentfsm("batch", str(tasks), "-o", str(tmp_path / "out.jsonl"), "--transcripts", str(tmp_path / "t"),
                         "--backend", "openai", "--base-url", upstream.base_url, "--model", "m",
                         "--enforcement", "prompt", "--result-max-chars", "90", "--no-progress")
        assert done.returncode == 0, done.stderr
        recorded = _run_start(tmp_path / "t" / "q.jsonl")
        assert (recorded["producer"], recorded["task"], recorded["result_max_chars"]) == ("batch", "q", 90)


# --- precedence: entry > profile > flag > environment > default, the same in header and run_start


@contextmanager
def _serve(args: list[str], env: dict[str, str], transcripts: Path) -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "agentfsm", "serve", "--port", str(port), "--transcripts", str(transcripts), *args],
        env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    try:
        wait_until_serving(f"http://127.0.0.1:{port}", process)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.communicate(timeout=20)


def test_each_layer_wins_where_documented_and_the_header_and_run_start_agree(tmp_path: Path) -> None:
    call = '{"tool": "get_weather", "parameters": {"city": "Paris"}}'
    with FakeUpstream([call]) as upstream:
        _profile(tmp_path, {"dialect": "command", "max_corrections": 1})
        models = tmp_path / "models.toml"
        models.write_text(f"""
[models.m]
base_url = "{upstream.base_url}"
json_schema_mode = "off"
max_retries = 0
profile = "p.json"
dialect = "json-action"
""")
        env = {"AGENTFSM_LOOP_THRESHOLD": "5", "AGENTFSM_CONSENSUS_SAMPLES": "4", "AGENTFSM_MAX_CORRECTIONS": "2"}
        args = ["--models", str(models), "--loop-threshold", "4", "--max-corrections", "0", "--enforcement", "prompt"]
        with _serve(args, env, tmp_path / "t") as url, \
                openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0) as client:
            raw = client.chat.completions.with_raw_response.create(model="m", messages=USER, tools=TOOLS_OPENAI)  # type: ignore[arg-type]
            assert raw.parse().choices[0].message.tool_calls
        # dialect: the entry over its profile; max_corrections: the profile over the flag; loop_threshold:
        # the flag over the environment; consensus_samples: the environment over the default
        assert raw.headers["x-agentfsm-settings"] == (
            "dialect=json-action; enforcement=prompt; max_corrections=1; loop_threshold=4; consensus_samples=4"
        )
        (transcript,) = (tmp_path / "t").glob("*.jsonl")
        recorded = _run_start(transcript)
        assert {k: recorded[k] for k in ("dialect", "enforcement", "max_corrections", "loop_threshold", "settings_from")} == {
            "dialect": "json-action", "enforcement": "prompt", "max_corrections": 1, "loop_threshold": 4,
            "settings_from": "profile p.json + models file",
        }
