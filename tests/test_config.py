"""One run configuration: declared once, the same defaults at every entry point, checked values."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path
from typing import Any, get_args

import pytest
from typer.testing import CliRunner

from agentfsm.backends.scripted import ScriptedBackend
from agentfsm.batch.controller import run_batch
from agentfsm.batch.on_ray import run_batch_ray
from agentfsm.batch.task import TaskSettings
from agentfsm.cli import app
from agentfsm.core._types import DialectName, EnforcementLevel
from agentfsm.core.config import DEFAULTS, RunConfig, allowed_values
from agentfsm.engine.decisions import EngineConfig
from agentfsm.core.errors import UsageError
from agentfsm.core.events import AgentRunConfig, BatchRunConfig
from agentfsm.dialects import DIALECTS
from agentfsm.eval.runner import EvalPlan
from agentfsm.guards import budget, loops
from agentfsm.prompt.enforcement import LEVELS
from agentfsm.prompt.results import DEFAULT_MAX_CHARS
from agentfsm.runtime.agent import Agent
from agentfsm.server.app import create_app
from agentfsm.server.settings import Settings

runner = CliRunner()


class _Stop(Exception):
    """Raised by a stand-in once it has seen the configuration a command built."""


def _cli_config(monkeypatch: pytest.MonkeyPatch, target: str, attr: str, args: list[str]) -> Any:
    """The configuration ``agentfsm ARGS`` hands to ``target.attr`` (which is stubbed)."""
    import importlib

    seen: dict[str, Any] = {}

    def stand_in(*a: Any, **kw: Any) -> Any:
        seen.update(kw)
        seen["args"] = a
        raise _Stop

    monkeypatch.setattr(importlib.import_module(target), attr, stand_in)
    result = runner.invoke(app, args)
    assert isinstance(result.exception, _Stop), result.output
    return seen


def _cli_configs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, RunConfig]:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"id": "a", "prompt": "hi"}\n')
    # eval asks its backend what it can do before it plans: not the embedded model here
    monkeypatch.setattr("agentfsm.cli.eval.make_backend", lambda *a: ScriptedBackend([]))
    return {
        "run": _cli_config(monkeypatch, "agentfsm.cli.run", "_agent", ["run", "hi"])["args"][6],
        "chat": _cli_config(monkeypatch, "agentfsm.cli.run", "_agent", ["chat"])["args"][6],
        "serve": _cli_config(monkeypatch, "agentfsm.cli.serve", "build_app", ["serve"])["config"],
        "batch": _cli_config(
            monkeypatch, "agentfsm.batch.controller", "run_batch", ["batch", str(tasks), "-o", str(tmp_path / "o")]
        )["config"],
        "eval": _cli_config(monkeypatch, "agentfsm.eval.runner", "EvalPlan", ["eval", "bfcl", "--no-baseline"])["config"],
    }


def test_every_entry_point_starts_from_the_same_defaults(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    backend = ScriptedBackend(["ok"])
    assert Agent(backend).config == DEFAULTS
    assert create_app(backend).state.settings.run == DEFAULTS
    assert Settings().run == DEFAULTS
    assert TaskSettings().run == DEFAULTS
    assert run_batch([], output=tmp_path / "out.jsonl", backend=backend).settings.run == DEFAULTS
    # the Ray path starts Ray as it runs: its default is read from its signature
    assert inspect.signature(run_batch_ray).parameters["config"].default is DEFAULTS
    assert EvalPlan(categories=(), specs=()).config == DEFAULTS
    assert _cli_configs(monkeypatch, tmp_path) == dict.fromkeys(("run", "chat", "serve", "batch", "eval"), DEFAULTS)
    # the values other modules name as their defaults are the config's
    engine = EngineConfig()
    for name in ("dialect", "tool_choice", "parallel", "max_corrections", "loop_threshold"):
        assert getattr(engine, name) == getattr(DEFAULTS, name), name
    assert EngineConfig.of(DEFAULTS) == engine
    assert budget.DEFAULT_MAX_CORRECTIONS == DEFAULTS.max_corrections == 3
    assert loops.DEFAULT_THRESHOLD == DEFAULTS.loop_threshold
    assert DEFAULT_MAX_CHARS == DEFAULTS.result_max_chars
    recorded = AgentRunConfig().model_dump()
    for name in ("dialect", "enforcement", "tool_choice", "parallel", "max_steps", "max_corrections", "loop_threshold"):
        assert recorded[name] == DEFAULTS.as_dict()[name], name
    assert BatchRunConfig().max_steps == DEFAULTS.max_steps


def test_options_and_environment_reach_every_entry_point(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AGENTFSM_MAX_CORRECTIONS", "5")
    monkeypatch.setenv("AGENTFSM_DIALECT", "command")
    configs = _cli_configs(monkeypatch, tmp_path)
    assert {c.max_corrections for c in configs.values()} == {5}
    assert {k: c.dialect for k, c in configs.items()} == {
        "run": "command", "chat": "command", "serve": "command", "batch": "command",
        "eval": "json-action",  # eval takes its dialects as a list (--dialects)
    }
    seen = _cli_config(monkeypatch, "agentfsm.cli.run", "_agent",
                       ["run", "hi", "--enforcement", "prompt", "--no-parallel", "--max-steps", "4", "--tool-choice", "required"])
    assert seen["args"][6] == RunConfig(
        dialect="command", enforcement="prompt", parallel=False, max_steps=4, tool_choice="required", max_corrections=5
    )


def test_every_field_is_an_option_of_the_commands_that_use_it() -> None:
    """A new field appears in every command that does not leave it out on purpose."""
    names = [f.name for f in dataclasses.fields(RunConfig)]
    for command in (["run"], ["chat"], ["batch"]):
        out = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "250"}).output
        for name in names:
            assert "--" + name.replace("_", "-") in out, (command, name)
            assert "AGENTFSM_" + name.upper() in out, (command, name)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"dialect": "xml"}, "dialect must be one of json-action, json-protocol, command, smiley; got 'xml'"),
        ({"enforcement": "strict"}, "enforcement must be one of auto, prompt, prefill, constrained; got 'strict'"),
        ({"max_steps": 0}, "max_steps must be at least 1; got 0"),
        ({"max_corrections": "3"}, "max_corrections must be an integer"),
        ({"parallel": "yes"}, "parallel must be true or false"),
        ({"tool_choice": ""}, "tool_choice must be a non-empty string"),
    ],
)
def test_a_bad_value_is_a_usage_error_naming_what_is_allowed(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("(", r"\(")):
        RunConfig(**settings)
    with pytest.raises(UsageError, match=message.replace("(", r"\(")):
        Agent(ScriptedBackend([]), **settings)
    with pytest.raises(UsageError, match=message.replace("(", r"\(")):
        create_app(ScriptedBackend([]), config=DEFAULTS.replace(**settings))


def test_an_unknown_setting_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="unknown setting.*dialekt"):
        Agent(ScriptedBackend([]), dialekt="command")


def test_the_cli_names_the_allowed_values() -> None:
    result = runner.invoke(app, ["run", "hi", "--dialect", "xml"])
    assert result.exit_code == 2
    for name in DIALECTS:
        assert name in result.output
    result = runner.invoke(app, ["serve", "--max-corrections", "-1"])
    assert result.exit_code == 2 and "--max-corrections" in result.output


def test_the_literals_match_the_registries() -> None:
    assert allowed_values("dialect") == get_args(DialectName)
    assert set(get_args(DialectName)) == set(DIALECTS)
    assert allowed_values("enforcement") == get_args(EnforcementLevel) == LEVELS


@pytest.mark.parametrize(
    ("given", "policies"),
    [("none", ()), ("refusal, answers", ("refusal", "answers")), ("grounding", ("grounding",))],
)
def test_policies_are_a_comma_separated_option(monkeypatch: pytest.MonkeyPatch, given: str, policies: tuple[str, ...]) -> None:
    seen = _cli_config(monkeypatch, "agentfsm.cli.run", "_agent", ["run", "hi", "--policies", given])
    assert seen["args"][6] == RunConfig(policies=policies)  # type: ignore[arg-type]
    monkeypatch.setenv("AGENTFSM_POLICIES", given)
    seen = _cli_config(monkeypatch, "agentfsm.cli.serve", "build_app", ["serve"])
    assert seen["config"] == RunConfig(policies=policies)  # type: ignore[arg-type]


def test_an_unknown_policy_on_the_command_line_names_the_policies() -> None:
    result = runner.invoke(app, ["run", "hi", "--policies", "refusal,nope"])
    assert result.exit_code != 0
    assert "policies must list only refusal, answers" in str(result.exception) + result.output
