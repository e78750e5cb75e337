"""The policy seam: language policies selected by name, consulted through one interface,
off as a unit (``policies=()``: no module that reads the conversation's words is loaded)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agentfsm import Agent, RunConfig, ScriptedBackend, replay
from agentfsm.backends import Capabilities
from agentfsm.core._types import DEFAULT_POLICIES, POLICY_NAMES
from agentfsm.core.errors import UsageError
from agentfsm.core.events import RunStartEvent
from agentfsm.engine.decide import EngineConfig, policies_of
from agentfsm.policy import POLICY_MODULES, Policy, get_policy, policies_for
from agentfsm.runtime.transcript import read_events

ROOT = Path(__file__).parent.parent
CALL = '```json action\n{"tool": "add", "args": {"a": 2, "b": 5}}\n```'

_RUN = '''
import json, sys
from pathlib import Path
sys.path.insert(0, "tests")
import httpx
from _proxy import proxy
from agentfsm import Agent, RunConfig, ScriptedBackend, replay
from agentfsm.backends import Capabilities

def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b

names, out = json.loads(sys.argv[1]), Path(sys.argv[2])
config = RunConfig(policies=tuple(names))
call = %r
small = Capabilities(small_model=True)  # grounding auto: on, as for the embedded model
agent = Agent(ScriptedBackend([call, "It is 7."], capabilities=small), [add], config=config,
              transcript=out / "agent.jsonl")
assert agent.run("Add 2 and 5.").content == "It is 7."
assert replay(out / "agent.jsonl").identical
tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object",
          "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}}}]
with proxy(ScriptedBackend([call, call], capabilities=small), config=config, transcripts_dir=out / "proxy") as base:
    body = {"model": "m", "messages": [{"role": "user", "content": "Add 2 and 5."}], "tools": tools}
    for stream in (False, True):
        reply = httpx.post(f"{base}/v1/chat/completions", json={**body, "stream": stream}, timeout=30)
        assert reply.status_code == 200, reply.text
        assert "add" in reply.text
for path in sorted((out / "proxy").glob("*.jsonl")):
    assert replay(path).identical, path
print(json.dumps(sorted(m for m in sys.modules if m.startswith("agentfsm.policy"))))
''' % CALL


def _policy_modules_loaded(names: tuple[str, ...], tmp_path: Path) -> list[str]:
    """The ``agentfsm.policy`` modules a fresh interpreter has loaded after running the
    agent and the proxy (whole and streamed), and replaying both, with ``names``."""
    done = subprocess.run(
        [sys.executable, "-c", _RUN, json.dumps(names), str(tmp_path)],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    loaded: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


def test_no_policies_load_no_language_module(tmp_path: Path) -> None:
    """``RunConfig(policies=())``: agent, proxy and replay run with only the seam loaded."""
    assert _policy_modules_loaded((), tmp_path) == ["agentfsm.policy", "agentfsm.policy.base"]


def test_every_policy_is_loaded_where_it_runs(tmp_path: Path) -> None:
    loaded = _policy_modules_loaded(POLICY_NAMES, tmp_path)
    assert set(POLICY_MODULES.values()) <= set(loaded)


def test_registry_and_names_agree() -> None:
    assert tuple(POLICY_MODULES) == POLICY_NAMES
    # the default: the language-neutral ones; the English ones are opt-in
    assert RunConfig().policies == DEFAULT_POLICIES == ("refusal", "answers", "grounding")
    for name in POLICY_NAMES:
        policy = get_policy(name)
        assert isinstance(policy, Policy) and policy.name == name
    with pytest.raises(UsageError, match="unknown policy 'nope'"):
        get_policy("nope")


def test_grounding_gates_the_policies_for_small_models() -> None:
    on = policies_for(POLICY_NAMES, True).names
    off = policies_for(POLICY_NAMES, False).names
    assert on == POLICY_NAMES
    assert off == ("refusal", "answers")
    assert policies_of(EngineConfig(policies=())).names == ()
    small = EngineConfig.of(RunConfig(), capabilities=Capabilities(small_model=True))
    assert policies_of(small).names == DEFAULT_POLICIES
    english = EngineConfig.of(RunConfig(policies=POLICY_NAMES), capabilities=Capabilities(small_model=True))
    assert policies_of(english).names == POLICY_NAMES


@pytest.mark.parametrize("bad", [("nope",), ("refusal", "refusal"), "refusal"])
def test_run_config_checks_policy_names(bad: object) -> None:
    with pytest.raises(UsageError, match="policies"):
        RunConfig(policies=bad)  # type: ignore[arg-type]


def test_a_list_of_policies_reads_as_the_tuple() -> None:
    assert RunConfig(policies=["answers"]).policies == ("answers",)  # type: ignore[arg-type]


def test_without_policies_a_refusal_is_an_answer_and_replay_honours_it(tmp_path: Path) -> None:
    """The refusal phrases are the ``refusal`` policy's: without it, "I don't have any
    tools" under ``auto`` is the model's answer. Replay reads the recorded policies, so it
    decides the same (today's defaults would correct the reply)."""
    path = tmp_path / "t.jsonl"
    text = "I don't have any tools."
    result = Agent(ScriptedBackend([text]), [add], policies=(), transcript=path).run("Add 2 and 5.")
    assert result.content == text and result.corrections == 0
    start = read_events(path)[0]
    assert isinstance(start, RunStartEvent) and start.config.policies == ()
    assert replay(path).identical
    corrected = Agent(ScriptedBackend([text, CALL, "7"]), [add]).run("Add 2 and 5.")
    assert corrected.corrections == 1  # the default policies read it as a refusal


def test_recorded_policies_are_the_ones_that_ran(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    Agent(ScriptedBackend([CALL, "It is 7."]), [add], transcript=path).run("Add 2 and 5.")
    start = read_events(path)[0]
    assert isinstance(start, RunStartEvent)
    # a scripted backend is not a small model: grounding auto is off, so are its policies
    assert start.config.policies == ("refusal", "answers") and start.config.grounding is False


def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b
