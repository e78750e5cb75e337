"""The runtime-text detector: answers that copy what the runtime wrote, in any language."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path

from agentfsm.backends.scripted import ScriptedBackend
from agentfsm.core.messages import PromptMessage, UserMessage
from agentfsm.eval.runner import EvalPlan, RunSpec, run_eval
from agentfsm.eval.quality_table import build_rows, echo_answers
from agentfsm.eval.runtime_text import echoes, find_runtime_text, runtime_text_of
from agentfsm.eval.suite import run_suite_task
from agentfsm.eval.suite_data import TASKS
from agentfsm.core.events import GuardEvent
from agentfsm.runtime.transcript import read_events

FIXTURES = Path(__file__).parent.parent / "fixtures" / "bfcl"
QUESTION = "Wie ist das Wetter in Oslo gerade?"
FRAMED = (
    "Tool result:\nThe result of get_weather is snowing, -3 °C.\n\n"
    f"The user asked: {QUESTION}\nIf you have what the user asked for, answer now, stating the results, in plain text."
)
CONTRACT = "You can call tools. Available tools:\n- get_weather: The current weather in a city.\n    city (string, required)"
ALLOWED = (QUESTION, "get_weather\nThe current weather in a city.\ncity", "snowing, -3 °C")


def _find(answer: str, runtime: Sequence[str] = (FRAMED, CONTRACT)) -> str | None:
    return find_runtime_text(answer, runtime, ALLOWED)


def test_answers_that_copy_runtime_text_are_flagged() -> None:
    found = _find(f"Es schneit, -3 °C. The user asked: {QUESTION}")
    assert found is not None and found.endswith("the user asked wie ist das wetter in oslo gerade")
    assert _find("If you have what the user asked for, answer now.") is not None
    assert _find("The result of get_weather is snowing, -3 °C.") is not None
    # folded: case and punctuation do not hide a copy
    assert _find("ANSWER NOW -- stating the results, in plain text!") is not None
    # a whole answer under six words, every word a stretch of the contract
    assert _find("you can call tools available") == "you can call tools available"


def test_answers_in_their_own_words_are_not_flagged() -> None:
    assert _find("In Oslo schneit es gerade, bei -3 °C.") is None
    assert _find("Il neige à Oslo : -3 °C.") is None
    assert _find("The weather in Oslo: snowing, -3 °C.") is None  # the result, restated
    assert _find(QUESTION) is None  # the user's own question (a bad answer, but not runtime text)
    assert _find(f"{QUESTION} If so, take a coat.") is None  # one runtime word after it is chance
    assert _find("The current weather in a city: snowing.") is None  # the tool's description is not the runtime's
    assert _find("Sure: you can call tools available at the desk.") is None  # five copied words in a reply: below the run
    assert _find("") is None


def test_a_result_restated_in_the_runtimes_order_is_not_flagged() -> None:
    """Seen on the embedded model: a right answer shares "Paris is sunny, 18 °C. The" with a
    correction; only "is" of it is not from the request or the results."""
    correction = "The result of get_weather(city='Paris') is sunny, 18 °C.\nThe result of get_weather(city='Tokyo') is cloudy, 22 °C."
    allowed = ("What's the weather in Paris and in Tokyo?", "get_weather\nThe current weather in a city.\ncity",
               "sunny, 18 °C", "cloudy, 22 °C")
    right = "The weather in Paris is sunny, 18 °C. The weather in Tokyo is cloudy, 22 °C."
    assert find_runtime_text(right, [correction], allowed) is None
    parroted = "The result of get_weather(city='Paris') is sunny, 18 °C."
    assert find_runtime_text(parroted, [correction], allowed) is not None


def test_the_detector_reads_no_language() -> None:
    """The runtime's texts may be in any language: copies are found by position, not by phrase lists."""
    runtime = ["Bitte antworte jetzt und nenne die Ergebnisse in einfachem Text.", "結果を平文で答えてください。次の手順"]
    assert find_runtime_text("Bitte antworte jetzt und nenne die Ergebnisse.", runtime, ()) is not None
    assert find_runtime_text("Die Ergebnisse: 13.", runtime, ()) is None
    # no spaces between words: a long enough stretch of characters counts
    assert find_runtime_text("結果を平文で答えてください。", ["ここでは結果を平文で答えてください。" * 3], ()) is None
    long_id = "werkzeug_fuer_die_waehrungsumrechnung_mit_tageskurs"
    assert find_runtime_text(f"Rufe {long_id} auf", [f"Rufe {long_id} auf, bitte."], ()) is not None


def _act(tool: str, **args: object) -> str:
    return "```json action\n" + json.dumps({"tool": tool, "parameters": args}) + "\n```"


def _copy_the_correction(messages: Sequence[PromptMessage]) -> str:
    """A model that calls a tool that does not exist, then answers with the correction's words."""
    last = messages[-1]
    if last.role == "user" and last.content.startswith("There is no tool"):
        return " ".join(last.content.split()[:9])
    return _act("subtract", a=8, b=5)


def test_a_task_whose_answer_copies_a_correction_is_refused_and_gives_up(tmp_path: Path) -> None:
    """The guard refuses an answer that copies a correction (one path with this detector):
    a model that only copies spends its budget and the task gives up; no answer carries
    runtime text, so the table counts none."""
    task = next(t for t in TASKS if t.name == "add_8_5.es1")
    path = tmp_path / "t.jsonl"
    result = asyncio.run(run_suite_task(ScriptedBackend(_copy_the_correction), task, transcript=path, enforcement="prompt"))
    assert not result.valid and result.error == "RetryBudgetExceeded" and result.runtime_text is None
    assert "runtime_text" in (result.why or "")
    refused = [e for e in read_events(path) if isinstance(e, GuardEvent) and e.reason == "runtime_text"]
    assert refused and runtime_text_of(read_events(path)) is None


def test_a_bfcl_answer_that_copies_a_correction_is_refused() -> None:
    plan = EvalPlan(categories=("irrelevance",), specs=(RunSpec("json-action", "prompt"),), limit=1, data_dir=FIXTURES)
    [result] = asyncio.run(run_eval(ScriptedBackend(_copy_the_correction), plan))
    assert result.answer is None and result.runtime_text is None
    clean = asyncio.run(run_eval(ScriptedBackend(["Herman Melville wrote it."]), plan))[0]
    assert clean.valid and clean.runtime_text is None and clean.model_calls == 1


def test_an_answer_that_repeats_the_request_is_an_echo_in_any_language() -> None:
    assert echoes(QUESTION, QUESTION)
    assert echoes("wie ist das Wetter in Oslo gerade", QUESTION)  # case and punctuation set aside
    assert echoes("Hi! Who wrote Romeo and Juliet?", "Who wrote Romeo and Juliet?")
    assert echoes("¿Qué tiempo hace en Madrid?", "¿Qué tiempo hace en Madrid?")
    assert not echoes("In Oslo schneit es gerade, bei -3 °C.", QUESTION)
    # the request quoted inside a longer reply of its own is a reply
    assert not echoes(f"You asked: {QUESTION} In Oslo schneit es gerade, bei -3 °C, mit Wind aus Nord.", QUESTION)
    assert not echoes("", QUESTION) and not echoes("Hello!", "")
    # the first half of the request, cut, is an echo; a value taken from it is a reply
    assert echoes("Wie ist das Wetter", QUESTION)
    assert not echoes("Oslo", QUESTION) and not echoes("10.0", "What is 10.0 plus 0?")


def test_echoes_are_counted_and_listed_not_failed() -> None:
    """A task that needs no tool passes on any answer, an echo too; the table counts it."""
    task = next(t for t in TASKS if t.base == "greeting" and t.language == "en")
    echoed = asyncio.run(run_suite_task(ScriptedBackend([task.prompt]), task, enforcement="prompt"))
    replied = asyncio.run(run_suite_task(ScriptedBackend(["I am well, thank you!"]), task, enforcement="prompt"))
    assert echoed.valid and echoed.echo and replied.valid and not replied.echo
    rows = build_rows([echoed, replied], [])
    assert {r.label: r.echoes for r in rows if r.group == "tasks"}["all"] == 1
    assert echo_answers([echoed, replied], []) == [f"{task.name}: {task.prompt!r}"]
    plan = EvalPlan(categories=("irrelevance",), specs=(RunSpec("json-action", "prompt"),), limit=1, data_dir=FIXTURES)
    case = asyncio.run(run_eval(ScriptedBackend(lambda messages: messages[-1].content), plan))[0]
    assert case.valid and case.echo and case.to_json()["echo"] is True


def test_a_client_system_message_is_the_users_text() -> None:
    """What the client sent (a system prompt of its own) is allowed; only the runtime's additions count."""
    from agentfsm.core.events import ModelRequestEvent, RequestEvent
    from agentfsm.eval.runtime_text import RunTexts

    client_system = "You are a terse assistant for the weather desk of a small newspaper in Oslo."
    texts = RunTexts()
    texts(RequestEvent(run="r", seq=0, t="t", messages=(UserMessage(content=QUESTION),)))
    texts(ModelRequestEvent(run="r", seq=1, t="t", attempt=1, messages=(
        PromptMessage(role="system", content=CONTRACT + "\n\n" + client_system),
        PromptMessage(role="user", content=QUESTION),
    )))
    assert texts.finding("You are a terse assistant for the weather desk.") is not None  # not in the request
    texts.allowed.append(client_system)
    assert texts.finding("You are a terse assistant for the weather desk.") is None
    assert texts.model_calls == 1


def test_the_table_allows_what_the_guard_allows() -> None:
    """Seen on the embedded model: "The result of add is 13.0. ..." is the plain statement of
    the result the guard allows (guards/_history.calls_and_results); the table counted it as
    runtime text because it read the results without their calls. One rule, one reading."""
    from agentfsm.core.events import ModelRequestEvent, RequestEvent, RetryEvent, ToolCallEvent, ToolResultEvent
    from agentfsm.core.messages import ToolCall, ToolResult
    from agentfsm.eval.runtime_text import RunTexts

    framing = ("Tool result:\nThe result of add is 13.0.\n\nIf you have what the user asked for, "
               "answer now, stating the results.")
    texts = RunTexts()
    texts(RequestEvent(run="r", seq=0, t="t", messages=(UserMessage(content="Add 8 and 5."),)))
    texts(ToolCallEvent(run="r", seq=1, t="t", call=ToolCall(id="call_0", name="add", arguments={"a": 8, "b": 5})))
    texts(ToolResultEvent(run="r", seq=2, t="t", result=ToolResult(call_id="call_0", content="13.0", name="add")))
    texts(ModelRequestEvent(run="r", seq=3, t="t", attempt=1, messages=(PromptMessage(role="user", content=framing),)))
    # a correction states the result plainly, as the answer may
    texts(RetryEvent(run="r", seq=4, t="t", reason="repeated_call", attempt=2, message="add was already called. The result of add is 13.0. Answer now."))
    assert texts.finding("The result of add is 13.0.") is None
    assert texts.finding("If you have what the user asked for, answer now.") is not None


def test_calls_are_counted_by_what_they_were_for() -> None:
    """The quality table's shares: extensions, consensus candidates, corrections (attempts
    after the first; a correction's extension is an extension)."""
    from agentfsm.core.events import ModelRequestEvent
    from agentfsm.eval.runtime_text import CallsSpent, RunTexts

    texts = RunTexts()
    for attempt, extension, candidate in [(1, False, 0), (1, True, 0), (1, False, 1), (1, False, 2), (2, False, 0),
                                          (2, True, 0), (3, False, 0)]:
        texts(ModelRequestEvent(run="r", seq=0, t="t", attempt=attempt, extension=extension, candidate=candidate))
    assert texts.model_calls == 7 and texts.spent == CallsSpent(extensions=2, candidates=2, corrections=2)


def test_tools_offered_again_are_kept_once() -> None:
    """Each request of a multi-turn run offers its tools again; the table keeps each once."""
    from agentfsm.core.events import RequestEvent
    from agentfsm.core.messages import ToolSpec
    from agentfsm.eval.runtime_text import RunTexts

    add = ToolSpec(name="add", description="Add two numbers.", parameters={"type": "object"})
    texts = RunTexts()
    for seq in range(3):
        texts(RequestEvent(run="r", seq=seq, t="t", messages=(UserMessage(content="Add 8 and 5."),), tools=(add,)))
    assert [t.name for t in texts.tools] == ["add"]
    assert len(texts.allowed) == 4  # three requests, one tool text
