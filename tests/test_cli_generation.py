"""The command line's generation settings and usage errors, as real subprocess runs.

``run``, ``chat`` and ``batch`` take ``--max-tokens``, ``--temperature``, ``--seed`` and
``--top-p`` with the Python API's defaults and bounds (:class:`GenerationOptions`); the
values reach the upstream (the FakeUpstream records each body) and the transcript's
``model_request`` events; one out of bounds is a usage error naming the option. Each
can also come from its ``AGENTFSM_`` variable.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentfsm.core.errors import UsageError
from agentfsm.runtime.agent import Agent
from agentfsm.runtime.transcript import read_transcript
from agentfsm.testing import FakeUpstream, ScriptedBackend

ACTION = '```json action\n{"tool": "calculate", "args": {"expression": "6*7"}}\n```'
TOOLS = "agentfsm.testing.example_tools:CALCULATOR"
SET = ["--max-tokens", "77", "--temperature", "0.4", "--seed", "9", "--top-p", "0.5"]
#: what SET asks for, as the upstream and the transcript carry it
ASKED = {"max_tokens": 77, "temperature": 0.4, "seed": 9, "top_p": 0.5}
#: the Python API's defaults (Agent(options=None)): no top_p sent
DEFAULT = {"max_tokens": 512, "temperature": 0.0, "seed": 0, "top_p": None}


def _cli(*args: str, stdin: str | None = None, env_set: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTFSM_")} | (env_set or {})
    return subprocess.run([sys.executable, "-m", "agentfsm", *args], capture_output=True, text=True,
                          timeout=120, input=stdin, env=env)


def _sampling(body: Any) -> dict[str, Any]:
    return {key: body.get(key) for key in ASKED}


def _requested(transcript: Path) -> list[dict[str, Any]]:
    """The options of each model_request of a transcript."""
    return [_sampling(e["options"]) for e in read_transcript(transcript) if e["type"] == "model_request"]


@pytest.mark.parametrize(("flags", "expected"), [(SET, ASKED), ([], DEFAULT)], ids=["set", "defaults"])
def test_run_sends_the_generation_settings_and_records_them(
    tmp_path: Path, flags: list[str], expected: dict[str, Any]
) -> None:
    transcript = tmp_path / "t.jsonl"
    with FakeUpstream([ACTION, "The answer is 42."]) as fake:
        proc = _cli("run", "What is 6*7?", "--tools", TOOLS, "--backend", "openai", "--base-url", fake.base_url,
                    "--enforcement", "prompt", "--transcript", str(transcript), "--json", *flags)
        bodies = [r.body for r in fake.chat_requests]
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["content"] == "The answer is 42."
    assert len(bodies) == 2
    assert [_sampling(b) for b in bodies] == [expected, expected]
    assert all(("top_p" in b) == (expected["top_p"] is not None) for b in bodies)
    assert _requested(transcript) == [expected, expected]


def test_chat_sends_the_generation_settings_on_every_turn(tmp_path: Path) -> None:
    transcript = tmp_path / "t.jsonl"
    with FakeUpstream(["Hello.", "Still here."]) as fake:
        proc = _cli("chat", "--backend", "openai", "--base-url", fake.base_url, "--enforcement", "prompt",
                    "--transcript", str(transcript), *SET, stdin="hi\nagain\n\n")
        bodies = [r.body for r in fake.chat_requests]
    assert proc.returncode == 0, proc.stderr
    assert "Still here." in proc.stdout
    assert [_sampling(b) for b in bodies] == [ASKED, ASKED]
    assert _requested(transcript) == [ASKED, ASKED]


def test_batch_sends_the_generation_settings_for_every_task(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"t{i}", "prompt": f"question {i}"}) + "\n" for i in range(3)))
    with FakeUpstream(lambda request: "An answer.") as fake:
        proc = _cli("batch", str(tasks), "-o", str(tmp_path / "out.jsonl"), "--backend", "openai",
                    "--base-url", fake.base_url, "--enforcement", "prompt", "--transcripts", str(tmp_path / "tr"),
                    "--no-progress", "--json", *SET)
        bodies = [r.body for r in fake.chat_requests]
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["ok"] == 3
    assert [_sampling(b) for b in bodies] == [ASKED] * 3
    for transcript in sorted((tmp_path / "tr").glob("*.jsonl")):
        assert _requested(transcript) == [ASKED]


#: each option's environment variable
ENV = {"--max-tokens": "AGENTFSM_MAX_TOKENS", "--temperature": "AGENTFSM_TEMPERATURE", "--seed": "AGENTFSM_SEED",
       "--top-p": "AGENTFSM_TOP_P"}


def test_the_generation_settings_can_come_from_the_environment(tmp_path: Path) -> None:
    # as --backend, --dialect and every run setting can: a job's environment sets them once
    env = {ENV[flag]: value for flag, value in zip(SET[::2], SET[1::2], strict=True)}
    with FakeUpstream([ACTION, "The answer is 42."]) as fake:
        proc = _cli("run", "What is 6*7?", "--tools", TOOLS, "--backend", "openai", "--base-url", fake.base_url,
                    "--enforcement", "prompt", "--json", env_set=env)
        bodies = [r.body for r in fake.chat_requests]
    assert proc.returncode == 0, proc.stderr
    assert [_sampling(b) for b in bodies] == [ASKED] * 2


#: a value out of the Python API's bounds for each option, and the message both give
OUT_OF_BOUNDS = [
    ("--max-tokens", "max_tokens", "0", 0, "greater than or equal to 1"),
    ("--temperature", "temperature", "-0.5", -0.5, "greater than or equal to 0"),
    ("--temperature", "temperature", "nan", float("nan"), "a finite number"),
    ("--top-p", "top_p", "1.5", 1.5, "less than or equal to 1"),
    ("--top-p", "top_p", "-0.1", -0.1, "greater than or equal to 0"),
]


@pytest.mark.parametrize("command", ["run", "chat", "batch"])
@pytest.mark.parametrize(("flag", "name", "text", "value", "message"), OUT_OF_BOUNDS)
def test_a_setting_out_of_bounds_is_a_usage_error_as_in_the_python_api(
    command: str, flag: str, name: str, text: str, value: float, message: str
) -> None:
    with pytest.raises(UsageError, match=message):  # the Python API's bound
        Agent(ScriptedBackend([]), options={name: value})
    argument = {"run": ["hi"], "chat": [], "batch": ["tasks.jsonl", "-o", "out.jsonl"]}[command]
    proc = _cli(command, *argument, "--backend", "openai", "--base-url", "http://127.0.0.1:9", flag, text)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"agentfsm: error: Invalid value for '{flag}' (env var: '{ENV[flag]}'): Input should be {message}",
        f"Try 'python -m agentfsm {command} --help' for help.",
    ]


@pytest.mark.parametrize("command", ["run", "chat", "batch"])
def test_the_help_names_each_generation_setting_and_its_default(command: str) -> None:
    proc = _cli(command, "--help")
    assert proc.returncode == 0
    text = " ".join(proc.stdout.replace("│", " ").split())
    for flag in ("--max-tokens", "--temperature", "--seed", "--top-p"):
        assert flag in text
    assert "[default: 512]" in text and "Most tokens each model call may generate" in text


def test_run_batch_takes_the_options_as_the_agent_does(tmp_path: Path) -> None:
    from agentfsm.batch.controller import run_batch

    with pytest.raises(UsageError, match=r"options\.max_tokens: Input should be greater than or equal to 1"):
        run_batch([{"id": "a", "prompt": "hi"}], output=tmp_path / "out.jsonl", options={"max_tokens": 0})
    with pytest.raises(UsageError, match="unknown option"):
        run_batch([{"id": "a", "prompt": "hi"}], output=tmp_path / "out.jsonl", options={"max_token": 5})
