"""derive_state and history_facts: states, wire shapes, repair rules, scale, and the machine as reference."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentfsm.core.errors import UsageError
from agentfsm.core.machine import AgentMachine, replay_events
from agentfsm.core.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolResult,
    UserMessage,
)
from agentfsm.core.states import DECIDING_STATES, State, derive_state, history_facts, pending_calls

History = list[Message | Mapping[str, Any]]


def user(text: str = "hi") -> UserMessage:
    return UserMessage(content=text)


def correction(reason: str = "schema_mismatch") -> UserMessage:
    return UserMessage(content="Send the action again.", correction=reason)


def calls(*ids: str, name: str = "add") -> AssistantMessage:
    return AssistantMessage(tool_calls=tuple(ToolCall(id=i, name=name) for i in ids))


def result(call_id: str, name: str | None = None) -> ToolMessage:
    return ToolMessage(result=ToolResult(call_id=call_id, content="ok", name=name))


def answer(text: str = "done") -> AssistantMessage:
    return AssistantMessage(content=text)


# --- the five states, on our models -------------------------------------------------

CASES: dict[str, tuple[History, State]] = {
    "empty": ([], State.FIRST_DECISION),
    "only-system": ([SystemMessage(content="be nice")], State.FIRST_DECISION),
    "user": ([SystemMessage(content="s"), user()], State.FIRST_DECISION),
    "answered": ([user(), answer()], State.FINAL),
    "calls-no-results": ([user(), calls("a", "b")], State.AWAITING_RESULT),
    "one-of-two": ([user(), calls("a", "b"), result("b")], State.AWAITING_RESULT),
    "all-results": ([user(), calls("a", "b"), result("b"), result("a")], State.RESULT_RECEIVED),
    "system-between": ([user(), calls("a"), SystemMessage(content="x"), result("a")], State.RESULT_RECEIVED),
    "second-tool-turn": ([user(), calls("a"), result("a"), calls("b")], State.AWAITING_RESULT),
    "answer-after-tools": ([user(), calls("a"), result("a"), answer()], State.FINAL),
    "new-user-after-final": ([user(), answer(), user("more")], State.FIRST_DECISION),
    "new-user-after-results": ([user(), calls("a"), result("a"), user("more")], State.FIRST_DECISION),
    "correction-first": ([user(), answer("bad"), correction()], State.FIRST_DECISION),
    "correction-after-results": ([user(), calls("a"), result("a"), answer("bad"), correction()], State.RESULT_RECEIVED),
    "correction-without-reply": ([user(), calls("a"), result("a"), correction()], State.RESULT_RECEIVED),
    "correction-of-rejected-calls": ([user(), calls("a"), correction()], State.FIRST_DECISION),
    "correction-then-calls": ([user(), answer("bad"), correction(), calls("a")], State.AWAITING_RESULT),
    "starts-with-assistant": ([answer()], State.FINAL),
}


@pytest.mark.parametrize(("history", "expected"), CASES.values(), ids=CASES.keys())
def test_derive_state_on_models(history: History, expected: State) -> None:
    assert derive_state(history) is expected


@pytest.mark.parametrize(("history", "expected"), CASES.values(), ids=CASES.keys())
def test_derive_state_on_dumps_of_models(history: History, expected: State) -> None:
    dumps = [m.model_dump(mode="json") for m in history if not isinstance(m, Mapping)]
    assert derive_state(dumps) is expected


def test_tool_emitted_is_never_derived_from_a_stored_history() -> None:
    derived = {derive_state(history) for history, _ in CASES.values()}
    assert State.TOOL_EMITTED not in derived
    assert derived == set(State) - {State.TOOL_EMITTED}


def test_state_values_are_the_transcript_names() -> None:
    assert [s.value for s in State] == [
        "first-decision", "tool-emitted", "awaiting-result", "result-received", "final",
    ]
    assert DECIDING_STATES == {State.FIRST_DECISION, State.RESULT_RECEIVED}


def test_pending_calls_in_call_order() -> None:
    history: History = [user(), calls("a", "b", "c"), result("b")]
    assert pending_calls(history) == ("a", "c")
    assert pending_calls([*history, result("a"), result("c")]) == ()
    assert pending_calls([user()]) == ()


# --- wire shapes -------------------------------------------------------------------

def oa_calls(*ids: str | None, name: str = "add") -> dict[str, Any]:
    tool_calls = []
    for i in ids:
        call: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": "{}"}}
        if i is not None:
            call["id"] = i
        tool_calls.append(call)
    return {"role": "assistant", "content": None, "tool_calls": tool_calls}


def oa_result(call_id: str, name: str | None = None) -> dict[str, Any]:
    msg = {"role": "tool", "tool_call_id": call_id, "content": "ok"}
    return msg if name is None else {**msg, "name": name}


def an_calls(*ids: str, text: str | None = "Let me check.") -> dict[str, Any]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    blocks += [{"type": "tool_use", "id": i, "name": "add", "input": {}} for i in ids]
    return {"role": "assistant", "content": blocks}


def an_results(*ids: str, extra_text: str | None = None) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = [{"type": "tool_result", "tool_use_id": i, "content": "ok"} for i in ids]
    if extra_text is not None:
        blocks.append({"type": "text", "text": extra_text})
    return {"role": "user", "content": blocks}


WIRE: dict[str, tuple[History, State]] = {
    "openai-user": ([{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}], State.FIRST_DECISION),
    "openai-developer-ignored": ([{"role": "user", "content": "hi"}, {"role": "developer", "content": "x"}], State.FIRST_DECISION),
    "openai-final": ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}], State.FINAL),
    "openai-empty-tool-calls": ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo", "tool_calls": []}], State.FINAL),
    "openai-awaiting": ([{"role": "user", "content": "q"}, oa_calls("c1", "c2"), oa_result("c1")], State.AWAITING_RESULT),
    "openai-received": ([{"role": "user", "content": "q"}, oa_calls("c1", "c2"), oa_result("c2"), oa_result("c1")], State.RESULT_RECEIVED),
    "openai-legacy-function": (
        [{"role": "user", "content": "q"}, {"role": "assistant", "content": None, "function_call": {"name": "add", "arguments": "{}"}},
         {"role": "function", "name": "add", "content": "3"}],
        State.RESULT_RECEIVED,
    ),
    "anthropic-user-string": ([{"role": "user", "content": "hi"}], State.FIRST_DECISION),
    "anthropic-user-blocks": ([{"role": "user", "content": [{"type": "text", "text": "hi"}]}], State.FIRST_DECISION),
    "anthropic-final": ([{"role": "user", "content": "q"}, {"role": "assistant", "content": [{"type": "text", "text": "a"}]}], State.FINAL),
    "anthropic-awaiting": ([{"role": "user", "content": "q"}, an_calls("t1", "t2"), an_results("t1")], State.AWAITING_RESULT),
    "anthropic-received": ([{"role": "user", "content": "q"}, an_calls("t1", "t2"), an_results("t2", "t1")], State.RESULT_RECEIVED),
    "anthropic-results-are-not-a-user-turn": ([{"role": "user", "content": "q"}, an_calls("t1", text=None), an_results("t1")], State.RESULT_RECEIVED),
    "anthropic-mixed-results-and-text": ([{"role": "user", "content": "q"}, an_calls("t1"), an_results("t1", extra_text="and now?")], State.FIRST_DECISION),
    "unknown-role-ignored": ([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}, {"role": "critic", "content": "x"}], State.FINAL),
}


@pytest.mark.parametrize(("history", "expected"), WIRE.values(), ids=WIRE.keys())
def test_derive_state_on_wire_dicts(history: History, expected: State) -> None:
    assert derive_state(history) is expected


def test_mixed_models_and_dicts_in_one_history() -> None:
    history: History = [user(), oa_calls("c1"), result("c1")]
    assert derive_state(history) is State.RESULT_RECEIVED


# --- facts: corrections, tool history ------------------------------------------------

def test_corrections_are_counted_from_the_latest_decision_point() -> None:
    history: History = [user(), answer("bad"), correction(), answer("bad"), correction()]
    facts = history_facts(history)
    assert (facts.state, facts.corrections) == (State.FIRST_DECISION, 2)
    history += [calls("a"), result("a")]
    assert history_facts(history).corrections == 0
    history += [answer("bad"), correction()]
    assert (history_facts(history).state, history_facts(history).corrections) == (State.RESULT_RECEIVED, 1)
    assert history_facts([*history, user("new")]).corrections == 0


def test_tool_history_is_detected_but_makes_nothing_mandatory() -> None:
    facts = history_facts([user(), calls("a"), result("a"), answer(), user("next")])
    assert facts.has_tool_history
    assert facts.state is State.FIRST_DECISION  # the same state as with no tool history at all
    assert not history_facts([user(), answer()]).has_tool_history


# --- repair rules ----------------------------------------------------------------------

def test_orphaned_results_are_ignored_and_counted() -> None:
    facts = history_facts([result("x"), user(), calls("a"), result("zzz"), result("a"), result("a")])
    assert facts.state is State.RESULT_RECEIVED
    assert facts.orphaned_results == 3
    assert derive_state([user(), answer(), result("a")]) is State.FINAL


def test_duplicated_ids_go_to_the_first_unanswered_call() -> None:
    history: History = [user(), calls("dup", "dup", "b")]
    assert pending_calls([*history, result("dup")]) == ("dup", "b")
    assert derive_state([*history, result("dup"), result("dup"), result("b")]) is State.RESULT_RECEIVED
    third = history_facts([*history, result("dup"), result("dup"), result("dup")])
    assert (third.state, third.orphaned_results, third.pending) == (State.AWAITING_RESULT, 1, ("b",))


def test_calls_without_ids_are_matched_by_name_then_position() -> None:
    history: History = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "tool_calls": [
            {"type": "function", "function": {"name": "add"}},
            {"type": "function", "function": {"name": "mul"}},
            {"type": "function", "id": "", "function": {"name": "add"}},
        ]},
    ]
    assert pending_calls(history) == ("", "", "")
    after_mul = [*history, oa_result("whatever", name="mul")]
    assert derive_state(after_mul) is State.AWAITING_RESULT
    assert history_facts(after_mul).orphaned_results == 0
    done = [*after_mul, {"role": "tool", "content": "1"}, {"role": "tool", "content": "2"}]
    assert derive_state(done) is State.RESULT_RECEIVED


def test_results_without_ids_answer_calls_in_order() -> None:
    history: History = [user(), calls("a", "b"), {"role": "tool", "content": "1"}]
    assert pending_calls(history) == ("b",)
    two_tools = AssistantMessage(tool_calls=(ToolCall(id="a", name="add"), ToolCall(id="b", name="mul")))
    named: History = [user(), two_tools, {"role": "tool", "name": "mul", "content": "2"}]
    assert pending_calls(named) == ("a",)


def test_integer_ids_are_read_as_text() -> None:
    history: History = [{"role": "user", "content": "q"}, oa_calls("7"), {"role": "tool", "tool_call_id": 7, "content": "x"}]
    assert derive_state(history) is State.RESULT_RECEIVED


def test_unanswered_calls_are_abandoned_by_a_user_turn_or_a_new_reply() -> None:
    by_user = history_facts([user(), calls("a", "b"), result("a"), user("never mind")])
    assert (by_user.state, by_user.abandoned_calls, by_user.pending) == (State.FIRST_DECISION, 1, ())
    by_reply = history_facts([user(), calls("a", "b"), calls("c")])
    assert (by_reply.state, by_reply.abandoned_calls, by_reply.pending) == (State.AWAITING_RESULT, 2, ("c",))
    late = history_facts([user(), calls("a", "b"), calls("c"), result("a"), result("c")])
    assert (late.state, late.orphaned_results) == (State.RESULT_RECEIVED, 1)


def test_malformed_wire_pieces_never_crash() -> None:
    history: History = [
        {"role": "user"},
        {"role": "assistant", "tool_calls": ["not a call", {"function": "nope"}]},
        {"role": "user", "content": [{"type": "tool_result"}, "junk"]},
        {"content": "no role"},
        {"role": "tool"},
    ]
    assert derive_state(history) is State.FIRST_DECISION


def test_an_item_that_is_no_message_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="history item 1"):
        derive_state([user(), "hello"])  # type: ignore[list-item]


# --- scale: linear-time scan (correctness only; timing lives in bench/bench_states.py) ---

def _cycles(n: int) -> list[Message]:
    out: list[Message] = []
    for i in range(n):
        out += [user(), calls(f"a{i}", f"b{i}"), result(f"b{i}"), result(f"a{i}"), answer()]
    return out


@pytest.mark.parametrize("cycles", [2_000, 20_000], ids=["10k", "100k"])
def test_long_histories(cycles: int) -> None:
    history = _cycles(cycles)
    assert len(history) == cycles * 5
    assert derive_state(history) is State.FINAL
    tail = [*history, user(), calls("x", "y"), result("y")]
    assert pending_calls(tail) == ("x",)


def test_one_huge_tool_turn_with_results_in_reverse() -> None:
    ids = [f"c{i}" for i in range(50_000)]
    history: list[Message] = [user(), calls(*ids)]
    history += [result(i) for i in reversed(ids)]
    assert derive_state(history) is State.RESULT_RECEIVED


def test_one_huge_turn_of_calls_without_ids() -> None:
    n = 50_000
    history: History = [{"role": "user", "content": "q"}, oa_calls(*([None] * n))]
    history += [{"role": "tool", "content": "r"}] * (n - 1)
    assert pending_calls(history) == ("",)
    assert derive_state([*history, {"role": "tool", "content": "r"}]) is State.RESULT_RECEIVED


# --- the machine as reference: random valid histories ---------------------------------

def _history_view(state: State) -> State:
    """A history cannot show tool-emitted: emitted calls without results are awaited."""
    return State.AWAITING_RESULT if state is State.TOOL_EMITTED else state


def _to_openai(history: Sequence[tuple[Message, bool]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for message, on_wire in history:
        if not on_wire:
            continue
        if isinstance(message, AssistantMessage) and message.tool_calls:
            out.append(oa_calls(*(c.id or None for c in message.tool_calls), name=message.tool_calls[0].name))
        elif isinstance(message, ToolMessage):
            msg: dict[str, Any] = {"role": "tool", "content": message.result.content}
            if message.result.call_id:
                msg["tool_call_id"] = message.result.call_id
            out.append(msg)
        else:
            out.append({"role": message.role, "content": getattr(message, "content", None)})
    return out


def _to_anthropic(history: Sequence[tuple[Message, bool]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for message, on_wire in history:
        if not on_wire or isinstance(message, SystemMessage):
            continue
        if isinstance(message, ToolMessage):
            block: dict[str, Any] = {"type": "tool_result", "content": message.result.content}
            if message.result.call_id:
                block["tool_use_id"] = message.result.call_id
            if out and out[-1]["role"] == "user" and isinstance(out[-1]["content"], list):
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
        elif isinstance(message, AssistantMessage):
            blocks: list[dict[str, Any]] = [{"type": "text", "text": message.content or "..."}]
            for call in message.tool_calls:
                use: dict[str, Any] = {"type": "tool_use", "name": call.name, "input": {}}
                if call.id:
                    use["id"] = call.id
                blocks.append(use)
            out.append({"role": "assistant", "content": blocks})
        else:
            out.append({"role": "user", "content": message.content})
    return out


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_random_valid_histories_agree_with_replaying_the_machine(data: st.DataObject) -> None:
    machine = AgentMachine()
    events: list[tuple[str, dict[str, bool]]] = []
    history: list[tuple[Message, bool]] = []  # (message, seen by a wire client)
    unanswered: list[ToolCall] = []
    corrections = 0
    id_pool = data.draw(st.sampled_from([("a", "b", "c"), ("dup",), ("",), ("x", "")]), label="ids")
    _check(history, events, unanswered, corrections)
    for _ in range(data.draw(st.integers(1, 25), label="steps")):
        event = data.draw(st.sampled_from(machine.allowed_events), label="event")
        facts: dict[str, bool] = {}
        if data.draw(st.booleans(), label="system"):
            history.append((SystemMessage(content="sys"), True))
        if event == "user":
            history.append((user(), True))
            unanswered, corrections = [], 0
        elif event == "emit":
            k = data.draw(st.integers(1, 4), label="calls")
            emitted = [
                ToolCall(id=data.draw(st.sampled_from(id_pool)), name=data.draw(st.sampled_from(["add", "mul"])))
                for _ in range(k)
            ]
            history.append((AssistantMessage(tool_calls=tuple(emitted)), True))
            unanswered = emitted
            facts = {"calls_valid": True}
        elif event == "receive":
            order = data.draw(st.permutations(unanswered), label="result order")
            take = data.draw(st.integers(1, len(order)), label="results")
            history += [(result(c.id, c.name), True) for c in order[:take]]
            unanswered = list(order[take:])
            facts = {"all_results_in": not unanswered}
            if not unanswered:
                corrections = 0
        elif event == "answer":
            history.append((answer(), True))
            facts = {"answer_allowed": True}
        elif event == "correct":
            if data.draw(st.booleans(), label="rejected reply recorded"):
                rejected = data.draw(st.sampled_from([answer("bad"), calls("r1")]))
                history.append((rejected, False))
            history.append((correction(), False))
            unanswered, corrections = [], corrections + 1
            facts = {"budget_left": True}
        elif event == "abort":
            history.append((answer("stopped"), True))
            unanswered = []
            facts = {"must_stop": True}
        machine.fire(event, **facts)
        events.append((event, facts))
        _check(history, events, unanswered, corrections)


def _check(
    history: list[tuple[Message, bool]],
    events: list[tuple[str, dict[str, bool]]],
    unanswered: list[ToolCall],
    corrections: int,
) -> None:
    expected = _history_view(replay_events(events))
    models = [m for m, _ in history]
    facts_now = history_facts(models)
    assert facts_now.state is expected
    if expected is State.AWAITING_RESULT:
        assert sorted(facts_now.pending) == sorted(c.id for c in unanswered)
    assert facts_now.corrections == corrections
    # derive_state and pending_calls read back to the latest user turn only: same answer
    assert derive_state(models) is expected
    assert pending_calls(models) == facts_now.pending
    assert derive_state([m.model_dump(mode="json") for m in models]) is expected
    # Corrections never reach a wire client, whose history shows the same state.
    assert derive_state(_to_openai(history)) is expected
    assert derive_state(_to_anthropic(history)) is expected


# --- reading from the end agrees with the full scan, on any history ---------------------

_ids = st.sampled_from(["a", "b", "dup", "", None])
_names = st.sampled_from(["add", "mul", None])
_any_message = st.one_of(
    st.builds(lambda: user()),
    st.builds(lambda: correction()),
    st.builds(lambda: SystemMessage(content="sys")),
    st.builds(lambda: answer()),
    st.lists(st.tuples(_ids, st.sampled_from(["add", "mul"])), min_size=1, max_size=3).map(
        lambda refs: AssistantMessage(tool_calls=tuple(ToolCall(id=i or "", name=n) for i, n in refs))
    ),
    st.tuples(_ids, _names).map(lambda ref: result(ref[0] or "", ref[1])),
    # an Anthropic user message with tool_result blocks, alone or with text (a user turn)
    st.tuples(st.lists(_ids, min_size=1, max_size=2), st.booleans()).map(
        lambda x: {"role": "user", "content": [
            *({"type": "tool_result", "tool_use_id": i, "content": "r"} for i in x[0]),
            *([{"type": "text", "text": "and now"}] if x[1] else []),
        ]}
    ),
)


#: a whole tool round: the calls, then every result in some order
_round = st.permutations(["a", "b"]).map(lambda ids: [calls("a", "b"), *(result(i) for i in ids)])
#: a reply the runtime corrected
_corrected = st.sampled_from([answer("bad"), calls("x")]).map(lambda reply: [reply, correction()])
_pieces = st.one_of(_any_message.map(lambda m: [m]), _round, _corrected)


@settings(max_examples=400, deadline=None)
@given(st.lists(_pieces, max_size=15).map(lambda pieces: [m for piece in pieces for m in piece]))
def test_reading_from_the_end_agrees_with_the_full_scan(history: list[Any]) -> None:
    """derive_state and pending_calls start from the latest user turn or reply (corrections
    permitting); on any history, repaired ones included, they equal the scan of it all."""
    full = history_facts(history)
    assert derive_state(history) is full.state
    assert pending_calls(history) == full.pending
    dumped = [m if isinstance(m, dict) else m.model_dump(mode="json") for m in history]
    assert derive_state(dumped) is full.state
    assert pending_calls(dumped) == full.pending


def test_a_correction_after_a_long_turn_reads_back_to_its_decision_point() -> None:
    # results that complete a tool round set the decision point the correction returns to
    done = [user(), calls("a"), result("a"), answer("bad"), correction()]
    assert derive_state(done) is State.RESULT_RECEIVED
    # rounds that never complete leave the user turn's decision point in force, however far back
    open_rounds = [user()] + [calls("a", "b"), result("a")] * 10 + [answer("bad"), correction()]
    assert derive_state(open_rounds) is State.FIRST_DECISION
    assert derive_state(open_rounds) is history_facts(open_rounds).state
