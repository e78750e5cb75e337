"""Parallel calls by extension: one call, then a constrained list continuation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentfsm.core.choice import ToolChoice
from agentfsm.core.backend import Capabilities, GenerationOptions, ListContinuation
from agentfsm.engine.decide import CallTools, EngineConfig
from agentfsm.prompt.enforcement import action_item_schema
from agentfsm.prompt.extension import (
    CLOSE, MAX_EXTRA_CALLS, MAX_SPANS, SPAN_WORDS, copy_spans, extension_options, extension_prefill, nothing_to_list,
    read_extension,
)
from agentfsm.core.messages import ToolCall, ToolSpec, UserMessage
from agentfsm.replays.compare import replay
from agentfsm.runtime.agent import Agent
from agentfsm.testing import ScriptedBackend
from agentfsm.runtime.transcript import read_transcript
from agentfsm.core.events import TranscriptEvent, event_fields
from agentfsm.runtime.recorder import Recorder
from agentfsm.runtime.turn import TurnResult, run_turn

PLAY = ToolSpec(
    name="play",
    description="Play an artist for some minutes.",
    parameters={
        "type": "object",
        "properties": {"artist": {"type": "string"}, "minutes": {"type": "integer"}},
        "required": ["artist", "minutes"],
    },
)
EXTENDING = Capabilities(json_schema=True, prefill=True, list_continuation=True)
FIRST = '{"action": {"tool": "play", "args": {"artist": "Taylor Swift", "minutes": 20}}}'
SWIFT = ToolCall(id="call_0", name="play", arguments={"artist": "Taylor Swift", "minutes": 20})


def item(artist: str, minutes: int) -> str:
    return json.dumps({"tool": "play", "args": {"artist": artist, "minutes": minutes}})


def test_prefill_opens_the_list_after_the_first_call() -> None:
    assert extension_prefill(SWIFT) == '{"action": [' + item("Taylor Swift", 20)


def test_options_constrain_a_list_continuation_of_the_offered_tools() -> None:
    opts = extension_options(GenerationOptions(json_schema={"type": "object"}), SWIFT, [PLAY], ToolChoice.parse("auto"))
    assert opts is not None
    assert opts.json_schema is None
    assert opts.prefill == extension_prefill(SWIFT)
    assert opts.list_continuation == ListContinuation(
        item_schema=action_item_schema([PLAY], ToolChoice.parse("auto")) or {}, max_items=MAX_EXTRA_CALLS, close=CLOSE
    )
    assert extension_options(GenerationOptions(), SWIFT, [], ToolChoice.parse("auto")) is None
    # only the first call's tool is offered: other tools are more likely a chain's next step
    other = ToolSpec(name="stop", description="Stop playing.", parameters={"type": "object", "properties": {}})
    both = extension_options(GenerationOptions(), SWIFT, [other, PLAY], ToolChoice.parse("auto"))
    assert both is not None and both.list_continuation is not None
    assert both.list_continuation.item_schema == action_item_schema([PLAY], ToolChoice.parse("auto"))
    assert extension_options(GenerationOptions(), SWIFT, [other], ToolChoice.parse("auto")) is None
    # the continuation's token bound scales with the first call, within the caller's
    assert 64 <= opts.max_tokens < GenerationOptions().max_tokens
    small = extension_options(GenerationOptions(max_tokens=20), SWIFT, [PLAY], ToolChoice.parse("auto"))
    assert small is not None and small.max_tokens == 20
    # a repeat of the first call, as the prefill wrote it, ends the generation (the list
    # ends there anyway); the caller's stops are kept
    kept = extension_options(GenerationOptions(stop=("<|end|>",)), SWIFT, [PLAY], ToolChoice.parse("auto"))
    assert kept is not None
    assert kept.stop == ("<|end|>", "," + item("Taylor Swift", 20), ", " + item("Taylor Swift", 20))


@pytest.mark.parametrize(
    ("continuation", "artists"),
    [
        (f", {item('Maroon 5', 15)}]}}", ["Taylor Swift", "Maroon 5"]),
        ("]}", ["Taylor Swift"]),
        # the first repeat ends the list, even when other items follow it
        (f", {item('Maroon 5', 15)}, {item('Taylor Swift', 20)}, {item('Adele', 3)}]}}", ["Taylor Swift", "Maroon 5"]),
        # cut by the token limit: the completed items are kept
        (f", {item('Maroon 5', 15)}, {{\"tool\": \"play\", \"args\": {{\"art", ["Taylor Swift", "Maroon 5"]),
        # an item that is not a call ends the list
        (f", 42, {item('Maroon 5', 15)}]}}", ["Taylor Swift"]),
    ],
)
def test_read_extension(continuation: str, artists: list[str]) -> None:
    calls = read_extension(SWIFT, continuation)
    assert [c.arguments["artist"] for c in calls] == artists


def test_read_extension_adds_at_most_the_bound() -> None:
    items = "".join(f", {item(f'artist {i}', i)}" for i in range(10))
    assert len(read_extension(SWIFT, items + "]}")) == 1 + MAX_EXTRA_CALLS


def _config(parallel: bool = True) -> EngineConfig:
    # the scripted artists are not in the requests: grounding (policy/grounding.py) is
    # not what these tests are about
    return EngineConfig(tools=(PLAY,), dialect="json-action", tool_choice="auto", parallel=parallel, grounding=False)


async def _turn(backend: ScriptedBackend, request: str, config: EngineConfig) -> tuple[TurnResult, list[tuple[str, dict[str, Any]]]]:
    """One constrained turn for ``request``, and the events it emitted."""
    events: list[TranscriptEvent] = []
    result = await run_turn(backend, [UserMessage(content=request)], config=config, enforcement="constrained",
                            recorder=Recorder(on_event=events.append))
    return result, [(e.type, event_fields(e)) for e in events]


async def test_a_turn_extends_one_call_into_a_list() -> None:
    backend = ScriptedBackend([FIRST, f", {item('Maroon 5', 15)}]}}"], capabilities=EXTENDING)
    result, events = await _turn(backend, "Play Taylor Swift for 20 minutes and Maroon 5 for 15.", _config())
    assert isinstance(result.decision, CallTools)
    assert [c.arguments for c in result.decision.calls] == [
        {"artist": "Taylor Swift", "minutes": 20},
        {"artist": "Maroon 5", "minutes": 15},
    ]
    first, second = backend.requests
    # the first request is one action (no list branch); the second continues the list
    assert "array" not in json.dumps(first.options.json_schema)
    assert second.options.prefill == extension_prefill(SWIFT)
    assert second.options.list_continuation is not None
    assert result.attempts == 1
    outputs = [f for k, f in events if k == "model_output"]
    assert [bool(f.get("extension")) for f in outputs] == [False, True]
    assert outputs[1]["text"].startswith('{"action": [')


async def test_a_repeat_leaves_the_single_call() -> None:
    backend = ScriptedBackend([FIRST, f", {item('Taylor Swift', 20)}]}}"], capabilities=EXTENDING)
    result = await run_turn(backend, [UserMessage(content="Play Taylor Swift.")], config=_config(), enforcement="constrained")
    assert isinstance(result.decision, CallTools)
    assert len(result.decision.calls) == 1


async def test_a_refused_item_leaves_the_first_call_alone() -> None:
    # the model's own call is grounded; the item the extension adds is made up (grounding on)
    backend = ScriptedBackend([FIRST, f", {item('Nobody Known', 15)}]}}"], capabilities=EXTENDING)
    grounded = EngineConfig(tools=(PLAY,), dialect="json-action", tool_choice="auto", grounding=True)
    result, events = await _turn(backend, "Play Taylor Swift for 20 minutes.", grounded)
    assert isinstance(result.decision, CallTools)
    assert [c.arguments for c in result.decision.calls] == [{"artist": "Taylor Swift", "minutes": 20}]
    assert result.corrections == 0 and len(backend.requests) == 2
    guards = [f for k, f in events if k == "guard"]
    assert guards[0]["guard"] == "extension" and guards[0]["reason"] == "first_call_alone"
    assert "ungrounded_call" in guards[0]["detail"] or "missing_value" in guards[0]["detail"]


async def test_a_refused_call_is_corrected_without_an_extension() -> None:
    """A call the engine refuses is corrected as it is: the list an extension would make
    of it is refused with it, so no model call is spent on one."""
    made_up = '{"action": {"tool": "play", "args": {"artist": "Nobody Known", "minutes": 99}}}'
    backend = ScriptedBackend([made_up, FIRST], capabilities=EXTENDING)
    grounded = EngineConfig(tools=(PLAY,), dialect="json-action", tool_choice="auto", grounding=True, consensus=0)
    result, events = await _turn(backend, "Play Taylor Swift for 20 minutes.", grounded)
    assert isinstance(result.decision, CallTools) and result.corrections == 1
    requests = [f for k, f in events if k == "model_request"]
    # the refused call: its request alone, no extension (a retry is not extended either)
    assert [(r["attempt"], bool(r.get("extension"))) for r in requests] == [(1, False), (2, False)]
    assert len(backend.requests) == 2


@pytest.mark.parametrize("capabilities", [Capabilities(json_schema=True, prefill=True), EXTENDING])
async def test_no_extension_without_the_capability_or_when_serial(capabilities: Capabilities) -> None:
    backend = ScriptedBackend([FIRST], capabilities=capabilities)
    parallel = not capabilities.list_continuation  # serial on the extending backend
    await run_turn(backend, [UserMessage(content="Play.")], config=_config(parallel), enforcement="constrained")
    assert len(backend.requests) == 1
    schema = json.dumps(backend.requests[0].options.json_schema)
    # without list continuation a parallel turn's grammar may hold a list of actions
    assert ('"array"' in schema) == (parallel and not capabilities.list_continuation)


async def test_no_extension_after_a_final_answer() -> None:
    backend = ScriptedBackend(['{"final": {"content": "Done."}}'], capabilities=EXTENDING)
    result = await run_turn(backend, [UserMessage(content="Hi")], config=_config(), enforcement="constrained")
    assert len(backend.requests) == 1
    assert not isinstance(result.decision, CallTools)


def test_an_extended_run_replays_identically(tmp_path: Path) -> None:
    def play(artist: str, minutes: int) -> str:
        """Play an artist for some minutes."""
        return f"playing {artist} for {minutes} min"

    path = tmp_path / "run.jsonl"
    backend = ScriptedBackend(
        [FIRST, f", {item('Maroon 5', 15)}]}}", '{"final": {"content": "Both are playing."}}'],
        capabilities=EXTENDING,
    )
    result = Agent(backend, [play], enforcement="constrained", transcript=path).run("Play both.")
    assert result.content == "Both are playing."
    requests = [e for e in read_transcript(path) if e["type"] == "model_request"]
    assert [bool(e.get("extension")) for e in requests] == [False, True, False]
    report = replay(path)
    assert report.identical, report.divergence


ADD = ToolSpec(
    name="add",
    description="Add two numbers.",
    parameters={"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]},
)


def _add(a: float, b: float) -> ToolCall:
    return ToolCall(id="call_0", name="add", arguments={"a": a, "b": b})


@pytest.mark.parametrize(
    ("call", "tool", "conversation", "nothing"),
    [
        (_add(8, 5), ADD, "Add 8 and 5.", True),
        (_add(12.5, 4), ADD, "Wie viel ist 12,5 plus 4?", True),  # a decimal comma, any language
        (_add(8, 5), ADD, "¿Cuánto es 8 más 5, y 2 más 3?", False),  # numbers left: a second call
        (_add(8, 5), ADD, "8 + 5 = ?  Then 8 + 6.", False),
        (_add(8, 5), ADD, "What is eight plus five?", True),  # no digits left (words are not read)
        (SWIFT, PLAY, "Play Taylor Swift for 20 minutes.", False),  # a string: anything may be left
        (ToolCall(id="c", name="order", arguments={"food": "PIZZA"}),  # an enum of words the request may name
         ToolSpec(name="order", description="", parameters={"type": "object", "properties": {
             "food": {"type": "string", "enum": ["PIZZA", "BURGER"]}}}), "Pizza and a burger, please.", False),
        (ToolCall(id="c", name="dim", arguments={"level": 2, "on": True}),
         ToolSpec(name="dim", description="", parameters={"type": "object", "properties": {
             "level": {"enum": [1, 2, 3]}, "on": {"type": "boolean"}}}), "Dim to 2.", True),
        (ToolCall(id="c", name="stop", arguments={}),
         ToolSpec(name="stop", description="", parameters={"type": "object", "properties": {}}), "Stop.", True),
    ],
)
def test_nothing_is_left_to_list_when_every_number_is_used(call: ToolCall, tool: ToolSpec, conversation: str, nothing: bool) -> None:
    assert nothing_to_list(call, tool, conversation) is nothing
    opts = extension_options(GenerationOptions(), call, [tool], ToolChoice.parse("auto"), conversation)
    assert (opts is None) is nothing
    # without the conversation, the extension is offered as before
    assert extension_options(GenerationOptions(), call, [tool], ToolChoice.parse("auto")) is not None or not tool.parameters["properties"]


def test_numbers_spent_by_earlier_calls_of_the_turn_are_not_left_to_list() -> None:
    """The chain's step after multiply(12.5, 4) -> 50.0 is convert(50.0): 12.5 and 4 were
    spent by the earlier call, so nothing is left; without it, they are."""
    convert = ToolSpec(name="convert_km_to_miles", description="", parameters={
        "type": "object", "properties": {"km": {"type": "number"}}})
    step = ToolCall(id="call_1", name="convert_km_to_miles", arguments={"km": 50.0})
    conversation = "multiply 12.5 by 4, then convert the result from km to miles.\n50.0"
    assert nothing_to_list(step, convert, conversation, [ToolCall(id="call_0", name="multiply", arguments={"a": 12.5, "b": 4})])
    assert not nothing_to_list(step, convert, conversation)


async def test_a_call_that_used_every_number_is_not_extended() -> None:
    """"Add 8 and 5.": add(8, 5) is all the request holds; another add could only repeat
    it or make its numbers up, so no model call is spent on a list."""
    config = EngineConfig(tools=(ADD,), dialect="json-action", tool_choice="auto", parallel=True, grounding=False)
    backend = ScriptedBackend(['{"action": {"tool": "add", "args": {"a": 8, "b": 5}}}'], capabilities=EXTENDING)
    result, events = await _turn(backend, "Add 8 and 5.", config)
    assert isinstance(result.decision, CallTools) and len(backend.requests) == 1
    assert not any(f.get("extension") for k, f in events if k == "model_request")
    # with numbers left over, the list is extended as before
    two = ScriptedBackend(['{"action": {"tool": "add", "args": {"a": 8, "b": 5}}}', ', {"tool": "add", "args": {"a": 2, "b": 3}}]}'],
                          capabilities=EXTENDING)
    listed, _ = await _turn(two, "Add 8 and 5, and 2 and 3.", config)
    assert isinstance(listed.decision, CallTools) and len(listed.decision.calls) == 2


# --- a further call's strings are copies, where the grounding policy says so ---------------


@pytest.mark.parametrize(("text", "spans"), [
    ("Wie ist das Wetter in Paris und in Tokio?", {"Tokio", "in Tokio", "Paris und in Tokio", "Wie"}),
    ("¿Qué tiempo hace en París y en Tokio?", {"Qué", "París", "Tokio", "en París"}),
    ("Play Taylor Swift, then Maroon 5.", {"Taylor Swift", "Maroon 5", "Swift, then Maroon"}),
    ("서울과 부산의 날씨는 어때요?", {"서울과", "부산의 날씨는"}),  # Korean writes spaces
])
def test_copy_spans_are_runs_of_whole_words(text: str, spans: set[str]) -> None:
    found = copy_spans(text)
    assert spans <= set(found)
    assert len(found) == len(set(found))
    # punctuation at a run's ends is left out; no run is longer than SPAN_WORDS words
    assert not any(s.endswith(("?", ".", ",")) or s.startswith("¿") for s in found)
    assert max(len(s.split()) for s in found) <= SPAN_WORDS


@pytest.mark.parametrize("text", [
    "我想知道上海目前的天气状况",  # written without spaces: its words cannot be told apart
    "東京と大阪の天気は？",  # kanji and kana
    "อากาศที่กรุงเทพและเชียงใหม่เป็นอย่างไร",  # Thai
    "ရန်ကုန်နဲ့ မန္တလေး ရာသီဥတု",  # Myanmar, its phrases spaced, its words not
    "",
    " ".join(f"w{i}" for i in range(MAX_SPANS)),  # too many stretches for one grammar
])
def test_no_spans_where_none_can_be_told_apart(text: str) -> None:
    assert copy_spans(text) == ()


def test_no_span_holds_a_quote_or_backslash() -> None:
    # llama.cpp's converter writes an enum's JSON text into the grammar unescaped
    found = copy_spans('Say "hi" to C:\\temp now')
    assert "hi" in found and "now" in found
    assert not any('"' in s or "\\" in s for s in found)


def test_a_copied_list_holds_free_strings_to_the_spans_or_the_first_calls_value() -> None:
    listed = ToolSpec(name="play", description="Play.", parameters={
        "type": "object",
        "properties": {
            "artist": {"type": "string"}, "minutes": {"type": "integer"},
            "mood": {"type": "string", "enum": ["calm", "loud"]}, "tags": {"type": "array", "items": {"type": "string"}},
            "note": {"type": "string"},
        },
        "required": ["artist"],
    })
    first = ToolCall(id="call_0", name="play", arguments={"artist": "Taylor Swift", "note": "quiet please"})
    request = "Play Taylor Swift and Maroon 5."
    opts = extension_options(GenerationOptions(), first, [listed], ToolChoice.parse("auto"), copy_from=request)
    assert opts is not None and opts.list_continuation is not None
    props = opts.list_continuation.item_schema["properties"]["args"]["properties"]
    assert props["artist"] == {"enum": list(copy_spans(request))}
    assert "Maroon 5" in props["artist"]["enum"]
    assert props["note"]["enum"][-1] == "quiet please"  # the first call's own value
    assert props["minutes"] == {"enum": [5]} and props["mood"]["enum"] == ["calm", "loud"]  # the digits written
    assert props["tags"]["items"] == {"enum": list(copy_spans(request))}
    # without copy_from, or with nothing to copy, the strings are free
    for copy_from in (None, "我想知道"):
        free = extension_options(GenerationOptions(), first, [listed], ToolChoice.parse("auto"), copy_from=copy_from)
        assert free is not None and free.list_continuation is not None
        assert free.list_continuation.item_schema == action_item_schema([listed], ToolChoice.parse("auto"))


def test_a_copied_list_holds_free_numbers_to_the_written_ones_or_the_first_calls() -> None:
    """A list of convert(50) went on with convert(1.5): further numbers are the digits the
    text writes, or the first call's own (an integer: the whole ones)."""
    convert = ToolSpec(name="convert", description="Convert.", parameters={
        "type": "object",
        "properties": {"amount": {"type": "number"}, "times": {"type": "integer"}, "to": {"type": "string"}},
        "required": ["amount"],
    })
    first = ToolCall(id="call_0", name="convert", arguments={"amount": 50, "times": 3, "to": "EUR"})
    opts = extension_options(GenerationOptions(), first, [convert], ToolChoice.parse("auto"),
                             copy_from="Wie viel sind 50 US-Dollar und 12,5 Pfund in Euro?")
    assert opts is not None and opts.list_continuation is not None
    props = opts.list_continuation.item_schema["properties"]["args"]["properties"]
    assert props["amount"] == {"enum": [12.5, 50]}
    assert props["times"] == {"enum": [50, 3]}


@pytest.mark.parametrize(("grounding", "copied"), [(True, True), (False, False)])
async def test_the_grounding_policy_holds_an_extension_to_the_request_and_results(grounding: bool, copied: bool) -> None:
    backend = ScriptedBackend([FIRST, f", {item('Maroon 5', 15)}]}}"], capabilities=EXTENDING)
    config = EngineConfig(tools=(PLAY,), dialect="json-action", tool_choice="auto", grounding=grounding, consensus=0)
    result, _ = await _turn(backend, "Play Taylor Swift for 20 minutes and Maroon 5 for 15.", config)
    assert isinstance(result.decision, CallTools) and len(result.decision.calls) == 2
    continuation = backend.requests[1].options.list_continuation
    assert continuation is not None
    artist = continuation.item_schema["properties"]["args"]["properties"]["artist"]
    assert ("Maroon 5" in artist.get("enum", ())) == copied
    assert ("enum" in artist) == copied


def test_grounding_copies_from_the_latest_request_and_the_turns_results() -> None:
    from agentfsm.core.messages import AssistantMessage, ToolMessage, ToolResult
    from agentfsm.policy import grounding

    call = ToolCall(id="call_0", name="get_capital", arguments={"country": "Peru"})
    history = [
        UserMessage(content="Earlier: Oslo."), AssistantMessage(content="Fine."),
        UserMessage(content="Capitals of Peru and Kenya, then their weather."),
        AssistantMessage(content=None, tool_calls=(call,)),
        ToolMessage(result=ToolResult(call_id="call_0", name="get_capital", content="Lima")),
        UserMessage(content="That call was repeated.", correction="repeated_call"),
    ]
    text = grounding.POLICY.copied_from(history)
    assert text == "Capitals of Peru and Kenya, then their weather.\nLima"


def test_a_text_without_spaced_words_leaves_strings_free_and_still_holds_numbers() -> None:
    """Seen on BFCL live_simple_28: a Chinese request has digits but no stretch of spaced
    words; its strings were given an empty enum, which llama.cpp cannot parse."""
    order = ToolSpec(name="order", description="Order.", parameters={
        "type": "object",
        "properties": {"restaurant": {"type": "string"}, "items": {"type": "array", "items": {"type": "string"}},
                       "quantities": {"type": "array", "items": {"type": "integer"}}},
        "required": ["restaurant", "items", "quantities"],
    })
    first = ToolCall(id="call_0", name="order", arguments={"restaurant": "KFC", "items": ["a"], "quantities": [10]})
    opts = extension_options(GenerationOptions(), first, [order], ToolChoice.parse("auto"),
                             copy_from="我想在肯德基买10个麦辣鸡腿堡，50杯可口可乐")
    assert opts is not None and opts.list_continuation is not None
    props = opts.list_continuation.item_schema["properties"]["args"]["properties"]
    assert props["restaurant"] == {"type": "string"} and props["items"]["items"] == {"type": "string"}
    assert props["quantities"]["items"] == {"enum": [10, 50]}
