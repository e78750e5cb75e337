"""A task suite of short agent requests, the first things a new user tries.

Each task is one user message to an :class:`~agentfsm.runtime.agent.Agent` with the
default settings (the tools run: they are deterministic fakes). A task passes when
the calls made are exactly the expected ones (name and arguments, in any order; a
number matches within 1e-6, a string case-insensitively) and the final answer holds
every expected piece (a number within rounding, or one of ``|``-separated words).

Kinds: one call (under ``auto``, under ``required`` or a named tool), two independent
calls, a chain (the second call needs the first one's result), and no tool needed.
Numbers and names come from the user's words; the answers need the tools' results.

The last kind, ``first tasks (held out)``, are one-call requests in other words, added
after the contract was tuned on the rest: tune nothing on them. Their row says whether a
change that helps the suite carries over to phrasings it was not made for.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentfsm.core.backend import Backend, GenerationOptions
from agentfsm.core.errors import AgentFSMError
from agentfsm.core.events import ToolCallEvent, TranscriptEvent
from agentfsm.testing.example_tools import convert_km_to_miles, multiply

__all__ = ["TASKS", "TOOLS", "SuiteResult", "SuiteTask", "add", "answer_matches", "calls_match", "get_capital",
           "get_weather", "run_suite_task"]


def add(a: float, b: float) -> float:
    """Add two numbers: a plus b."""
    return float(a) + float(b)


_CAPITALS = {"france": "Paris", "japan": "Tokyo", "norway": "Oslo", "peru": "Lima", "kenya": "Nairobi"}
_WEATHER = {"paris": (18, "sunny"), "tokyo": (22, "cloudy"), "oslo": (-3, "snowing"), "lima": (24, "clear"),
            "nairobi": (26, "rainy")}


def get_capital(country: str) -> str:
    """The capital city of a country."""
    capital = _CAPITALS.get(country.strip().lower())
    if capital is None:
        raise ValueError(f"unknown country {country!r}")
    return capital


def get_weather(city: str) -> str:
    """The current weather in a city."""
    temp, sky = _WEATHER.get(city.strip().lower(), (12, "overcast"))
    return f"{sky}, {temp} °C"


#: the suite's tools, by name
TOOLS: dict[str, Callable[..., Any]] = {
    f.__name__: f for f in (multiply, add, convert_km_to_miles, get_weather, get_capital)
}
_MATH = ("multiply", "add", "convert_km_to_miles")
_PLACES = ("get_weather", "get_capital")
_ALL = _MATH + _PLACES


@dataclass(frozen=True)
class SuiteTask:
    """One request, the calls it needs and what its answer must say."""

    name: str
    kind: str
    prompt: str
    tools: tuple[str, ...]
    calls: tuple[tuple[str, dict[str, Any]], ...]
    #: every item must appear in the answer: a number, or words separated by ``|`` (any one)
    answer: tuple[float | str, ...] = ()
    #: as the agent's ``tool_choice`` setting spells it
    tool_choice: str = "auto"


def _one(name: str, prompt: str, tools: tuple[str, ...], call: tuple[str, dict[str, Any]],
         answer: tuple[float | str, ...], choice: str = "auto") -> SuiteTask:
    kind = "one call (auto)" if choice == "auto" else "one call (required)"
    return SuiteTask(name, kind, prompt, tools, (call,), answer, choice)


def _held_out(name: str, prompt: str, tools: tuple[str, ...], call: tuple[str, dict[str, Any]],
              answer: tuple[float | str, ...]) -> SuiteTask:
    return SuiteTask(name, "first tasks (held out)", prompt, tools, (call,), answer)


#: the suite (30 tasks, the last 6 held out)
TASKS: tuple[SuiteTask, ...] = (
    _one("multiply_named", "What is 12.5 times 4? Use the multiply tool.", _MATH, ("multiply", {"a": 12.5, "b": 4}), (50,)),
    _one("add_words", "Add 17 and 26.", _MATH, ("add", {"a": 17, "b": 26}), (43,)),
    _one("km_to_miles", "How many miles is 42 km?", _MATH, ("convert_km_to_miles", {"km": 42}), (26.1,)),
    _one("weather_oslo", "What's the weather in Oslo?", _PLACES, ("get_weather", {"city": "Oslo"}), ("snow|-3",)),
    _one("capital_japan", "What is the capital of Japan?", _PLACES, ("get_capital", {"country": "Japan"}), ("Tokyo",)),
    _one("multiply_1_5", "What is 1.5 times 2?", _MATH, ("multiply", {"a": 1.5, "b": 2}), (3,)),
    _one("weather_example_city", "What's the weather like in Example City?", _PLACES,
         ("get_weather", {"city": "Example City"}), ("overcast|12",)),
    _one("multiply_decimals", "Multiply 0.75 by 8.", _MATH, ("multiply", {"a": 0.75, "b": 8}), (6,)),
    _one("multiply_required", "What is 12.5 times 4? Use the multiply tool.", _MATH,
         ("multiply", {"a": 12.5, "b": 4}), (50,), "required"),
    _one("add_required", "Add 17 and 26.", _MATH, ("add", {"a": 17, "b": 26}), (43,), "required"),
    _one("km_required", "Convert 100 km to miles.", _MATH, ("convert_km_to_miles", {"km": 100}), (62.14,), "required"),
    _one("weather_required", "Weather in Lima?", _PLACES, ("get_weather", {"city": "Lima"}), ("clear|24",), "required"),
    _one("multiply_tool_named", "Multiply 6 by 9.", _MATH, ("multiply", {"a": 6, "b": 9}), (54,), "multiply"),
    SuiteTask("two_weathers", "two calls", "What is the weather in Oslo and in Paris?", _PLACES,
         (("get_weather", {"city": "Oslo"}), ("get_weather", {"city": "Paris"})), ("snow|-3", "sunny|18")),
    SuiteTask("two_sums", "two calls", "Multiply 3 by 7, and add 10 and 5.", _MATH,
         (("multiply", {"a": 3, "b": 7}), ("add", {"a": 10, "b": 5})), (21, 15)),
    SuiteTask("two_capitals", "two calls", "What are the capitals of Peru and Kenya?", _PLACES,
         (("get_capital", {"country": "Peru"}), ("get_capital", {"country": "Kenya"})), ("Lima", "Nairobi")),
    SuiteTask("chain_france", "chain", "What is the weather in the capital of France?", _PLACES,
         (("get_capital", {"country": "France"}), ("get_weather", {"city": "Paris"})), ("sunny|18",)),
    SuiteTask("chain_norway", "chain", "Find the capital of Norway, then tell me its weather.", _PLACES,
         (("get_capital", {"country": "Norway"}), ("get_weather", {"city": "Oslo"})), ("snow|-3",)),
    SuiteTask("chain_multiply_convert", "chain", "Multiply 12.5 by 4, then convert the result from km to miles.", _MATH,
         (("multiply", {"a": 12.5, "b": 4}), ("convert_km_to_miles", {"km": 50})), (31.07,)),
    SuiteTask("chain_add_convert", "chain", "Add 30 and 12, then convert the sum from km to miles.", _MATH,
         (("add", {"a": 30, "b": 12}), ("convert_km_to_miles", {"km": 42})), (26.1,)),
    SuiteTask("greeting", "no tool", "Hello! How are you today?", _ALL, ()),
    SuiteTask("say_hello", "no tool", "Say hello to Maria.", _ALL, (), ("Maria",)),
    SuiteTask("thanks", "no tool", "Thanks, that's all for now.", _ALL, ()),
    SuiteTask("sea_sentence", "no tool", "Write one short sentence about the sea.", _ALL, (), ("sea|ocean",)),
    _held_out("held_multiply_please", "Please multiply 9 by 11.", _MATH, ("multiply", {"a": 9, "b": 11}), (99,)),
    _held_out("held_plus", "What's 8 plus 5?", _MATH, ("add", {"a": 8, "b": 5}), (13,)),
    _held_out("held_km_need", "I need 250 km in miles.", _MATH, ("convert_km_to_miles", {"km": 250}), (155.34,)),
    _held_out("held_add_tool_named", "Use the add tool to add 2.5 and 7.5.", _MATH,
              ("add", {"a": 2.5, "b": 7.5}), (10,)),
    _held_out("held_capital_kenya", "Could you tell me the capital of Kenya?", _PLACES,
              ("get_capital", {"country": "Kenya"}), ("Nairobi",)),
    _held_out("held_rain_nairobi", "Is it raining in Nairobi right now?", _PLACES,
              ("get_weather", {"city": "Nairobi"}), ("rain|26",)),
)


def _same(expected: Any, got: Any) -> bool:
    if isinstance(expected, bool) or isinstance(got, bool):
        return expected is got
    if isinstance(expected, int | float) and isinstance(got, int | float):
        return abs(float(expected) - float(got)) <= 1e-6
    if isinstance(expected, str) and isinstance(got, str):
        return expected.strip().lower() == got.strip().lower()
    return bool(expected == got)


def _call_is(expected: tuple[str, dict[str, Any]], name: str, args: dict[str, Any]) -> bool:
    want_name, want_args = expected
    return name == want_name and set(args) == set(want_args) and all(_same(v, args[k]) for k, v in want_args.items())


def calls_match(expected: Sequence[tuple[str, dict[str, Any]]], made: Sequence[tuple[str, dict[str, Any]]]) -> bool:
    """Whether ``made`` is exactly ``expected``, in any order (each expected call matched once)."""
    if len(made) != len(expected):
        return False
    left = list(made)
    for want in expected:
        index = next((i for i, (name, args) in enumerate(left) if _call_is(want, name, args)), None)
        if index is None:
            return False
        left.pop(index)
    return True


_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def answer_matches(answer: str, expected: Sequence[float | str]) -> bool:
    """Whether ``answer`` holds every expected piece; a task that expects nothing needs some prose."""
    if not answer.strip():
        return False
    numbers = [float(m.group().replace(",", "")) for m in _NUMBER.finditer(answer)]
    lowered = answer.lower()
    for item in expected:
        if isinstance(item, str):
            if not any(word.lower() in lowered for word in item.split("|")):
                return False
        elif not _has_number(numbers, float(item)):
            return False
    return True


def _has_number(numbers: Sequence[float], value: float) -> bool:
    return any(abs(n - value) <= max(0.01, 0.005 * abs(value)) for n in numbers)


@dataclass(frozen=True)
class SuiteResult:
    """How one task went."""

    task: SuiteTask
    valid: bool
    protocol_valid: bool
    attempts: int
    seconds: float
    calls: tuple[tuple[str, dict[str, Any]], ...] = ()
    answer: str = ""
    error: str | None = None
    why: str = field(default="")


async def run_suite_task(
    backend: Backend,
    task: SuiteTask,
    options: GenerationOptions | None = None,
    transcript: Path | None = None,
    **agent_options: Any,
) -> SuiteResult:
    """Run ``task`` through an :class:`~agentfsm.runtime.agent.Agent` (defaults unless
    ``agent_options`` say otherwise) and check its calls and answer."""
    from agentfsm.runtime.agent import Agent  # the eval package loads the runtime lazily

    made: list[tuple[str, dict[str, Any]]] = []

    def on_event(event: TranscriptEvent) -> None:
        if isinstance(event, ToolCallEvent):
            made.append((event.call.name, dict(event.call.arguments)))

    agent = Agent(
        backend,
        [TOOLS[name] for name in task.tools],
        tool_choice=task.tool_choice,
        options=options,
        transcript=transcript,
        on_event=on_event,
        **agent_options,
    )
    start = time.perf_counter()
    try:
        result = await agent.arun(task.prompt)
    except AgentFSMError as exc:
        seconds = time.perf_counter() - start
        return SuiteResult(task, False, False, 0, seconds, tuple(made), error=type(exc).__name__, why=str(exc)[:200])
    seconds = time.perf_counter() - start
    calls_ok = calls_match(task.calls, made)
    answer_ok = answer_matches(result.content, task.answer)
    why = "" if calls_ok and answer_ok else ("calls" if not calls_ok else "answer")
    return SuiteResult(
        task,
        valid=calls_ok and answer_ok,
        protocol_valid=not result.exhausted,
        attempts=result.steps,
        seconds=seconds,
        calls=tuple(made),
        answer=result.content,
        why=why,
    )
