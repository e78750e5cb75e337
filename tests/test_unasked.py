"""Where the retry's grammar offers the answer alone, the grammar asks for it: the prompt
shows the conversation without the turn's corrections and refused replies, so no
correction (the request it quoted included) is there for the model to copy; under prompt
enforcement, where no grammar asks, the correction is sent as before. After a call with
no value from the conversation, the retry's numbers are the conversation's."""

from __future__ import annotations

import json
from typing import Any

from agentfsm.backends.scripted import ScriptedBackend
from agentfsm.core.backend import Capabilities, GenerationOptions
from agentfsm.core.messages import AssistantMessage, Message, UserMessage
from agentfsm.engine.decide import CallTools, Correct, EngineConfig, step
from agentfsm.engine.plan import plan, unasked
from agentfsm.runtime.request import prepare_request

from tests._histories import MATH, PLACES, after, call

CONSTRAINED = ScriptedBackend([], capabilities=Capabilities(json_schema=True))
CONFIG = EngineConfig(tools=MATH, dialect="json-action", tool_choice="auto", parallel=False, grounding=True)


def _refuse(history: list[Message], reply: dict[str, Any], reason: str, config: EngineConfig = CONFIG) -> None:
    decision = step(history, json.dumps(reply), config)
    assert isinstance(decision, Correct) and decision.reason == reason
    history += [decision.assistant, decision.message]


def _prompt_text(history: list[Message], enforcement: str = "constrained") -> tuple[str, GenerationOptions]:
    prompt, opts, _, _ = prepare_request(CONSTRAINED, history, CONFIG, enforcement, GenerationOptions())  # type: ignore[arg-type]
    return "\n".join(m.content for m in prompt[1:]), opts


def test_after_made_up_calls_the_answer_is_asked_by_the_grammar_alone() -> None:
    request = "How many miles is 42 km?"
    history: list[Message] = [UserMessage(content=request)]
    _refuse(history, {"action": {"tool": "multiply", "args": {"a": 1, "b": 2}}}, "missing_value")
    _refuse(history, {"action": {"tool": "add", "args": {"a": 1, "b": 2}}}, "ungrounded_call")
    assert request in history[-1].content  # the correction quotes the request...
    p = plan(history, CONFIG, CONSTRAINED.capabilities, "constrained")
    assert p.corrections == "none" and p.tools == () and p.no_slot  # an answer that says something
    text, opts = _prompt_text(history)
    # ...the prompt does not: the request once, as the user wrote it, and nothing after it
    assert text == request
    schema = json.dumps(opts.json_schema)
    assert '"final"' in schema and '"action"' not in schema
    # no grammar to ask: the correction is the only way to say it
    assert plan(history, CONFIG, CONSTRAINED.capabilities, "prompt").corrections == "all"
    prompted, _ = _prompt_text(history, "prompt")
    assert prompted.count(request) == 3 and "multiply" in prompted


def test_after_results_the_prompt_keeps_the_calls_and_asks_for_the_answer() -> None:
    history = after("What's 7 plus 9?", (call("add", a=7, b=9), "16.0"))
    _refuse(history, {"action": {"tool": "add", "args": {"a": 7, "b": 9}}}, "repeated_call")
    _refuse(history, {"action": {"tool": "multiply", "args": {"a": 7, "b": 9}}}, "stale_call")
    text, _ = _prompt_text(history)
    assert "You already called" not in text and "multiply" not in text
    assert text.count('"add"') == 1 and "16.0" in text  # the accepted call and its result
    assert text.rstrip().endswith("Now answer the request in plain prose, using these results.")
    # before any correction the results close as always: a further call stays possible
    fresh, _ = _prompt_text(history[:3])
    assert "call the next tool" in fresh
    # an answer refused for what it lacks: that correction stays (the same prompt would
    # get the same greedy reply), the earlier ones do not
    _refuse(history, {"final": {"content": "100.0000001"}}, "unsupported_answer")
    assert plan(history, CONFIG, CONSTRAINED.capabilities, "constrained").corrections == "last"
    text, _ = _prompt_text(history)
    assert "You already called" not in text and "multiply" not in text
    assert text.endswith('100.0000001"}}\n' + history[-1].content) and "stating each of these results" in text


def test_unasked_drops_only_this_turns_corrections_and_the_replies_they_refused() -> None:
    earlier = after("What's 7 plus 9?", (call("add", a=7, b=9), "16.0"))
    earlier += [AssistantMessage(content="16"), UserMessage(content="Is it sunny in Oslo?")]
    history = list(earlier)
    config = EngineConfig(tools=PLACES, dialect="json-action", tool_choice="auto", parallel=False, grounding=True)
    _refuse(history, {"action": {"tool": "get_capital", "args": {"country": "Nowhere"}}}, "missing_value", config)
    assert unasked(history) == earlier
    assert unasked(earlier) == earlier


def test_after_a_missing_value_the_retry_holds_numbers_to_the_conversation() -> None:
    history: list[Message] = [UserMessage(content="How many miles is 42 km?")]
    _refuse(history, {"action": {"tool": "multiply", "args": {"a": 1, "b": 2}}}, "missing_value")
    p = plan(history, CONFIG, CONSTRAINED.capabilities, "constrained")
    assert p.numbers == (42.0,) and p.corrections == "all"
    assert [t.name for t in p.tools] == ["add", "convert_km_to_miles"]
    assert isinstance(step(history, json.dumps({"action": {"tool": "convert_km_to_miles", "args": {"km": 42}}}), CONFIG),
                      CallTools)


def test_the_answer_only_closing_of_results_is_runtime_text_to_the_guard() -> None:
    """The closing an answer-only retry shows ("Now answer the request in plain prose, using
    these results.") is the runtime's: an answer that copies it is sent back."""
    history = after("What's 7 plus 9?", (call("add", a=7, b=9), "16.0"))
    copied = {"final": {"content": "16.0. Now answer the request in plain prose, using these results."}}
    decision = step(history, json.dumps(copied), CONFIG)
    assert isinstance(decision, Correct) and decision.reason == "runtime_text"
    assert not isinstance(step(history, json.dumps({"final": {"content": "7 plus 9 is 16."}}), CONFIG), Correct)
