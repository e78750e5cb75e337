"""The transitions machine: defined once as data, typed errors, guards, and agreement with its data."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentfsm.core.errors import InvalidTransition, UsageError
from agentfsm.core.machine import (
    EVENTS,
    GUARDS,
    TRANSITIONS,
    AgentMachine,
    GuardRejected,
    allowed_events,
    replay_events,
)
from agentfsm.core.states import State

FD, TE, AR, RR, FI = (
    State.FIRST_DECISION,
    State.TOOL_EMITTED,
    State.AWAITING_RESULT,
    State.RESULT_RECEIVED,
    State.FINAL,
)

#: state -> event -> destination when every guard holds; a missing event is not allowed.
TABLE: dict[State, dict[str, State]] = {
    FD: {"emit": TE, "answer": FI, "correct": FD, "abort": FI, "user": FD},
    TE: {"dispatch": AR, "abort": FI},
    AR: {"receive": RR, "abort": FI},
    RR: {"emit": TE, "answer": FI, "correct": RR, "abort": FI, "user": FD},
    FI: {"user": FD},
}


def test_the_data_names_only_known_states_events_and_guards() -> None:
    names = {s.value for s in State}
    for spec in TRANSITIONS:
        assert set(spec["source"]) <= names and spec["dest"] in names
        assert spec["trigger"] in EVENTS
        assert set(spec["conditions"]) | set(spec.get("unless", [])) <= set(GUARDS)
    assert {spec["trigger"] for spec in TRANSITIONS} == set(EVENTS)
    used = {g for spec in TRANSITIONS for g in [*spec["conditions"], *spec.get("unless", [])]}
    assert used == set(GUARDS)


@pytest.mark.parametrize("state", list(State), ids=str)
def test_allowed_events_per_state(state: State) -> None:
    assert allowed_events(state) == tuple(e for e in EVENTS if e in TABLE[state])
    assert AgentMachine(state).allowed_events == allowed_events(state)


@pytest.mark.parametrize(
    ("state", "event"), [(s, e) for s in State for e in EVENTS], ids=lambda v: str(v)
)
def test_every_state_and_event(state: State, event: str) -> None:
    machine = AgentMachine(state)
    if event in TABLE[state]:
        assert machine.fire(event) is TABLE[state][event]
        assert machine.state is TABLE[state][event]
    else:
        with pytest.raises(InvalidTransition) as info:
            machine.fire(event)
        assert (info.value.event, info.value.state) == (event, state.value)
        assert machine.state is state


def test_no_auto_transitions_and_no_foreign_errors() -> None:
    machine = AgentMachine()
    for name in ("to_final", "to_tool-emitted", "trigger", "nonsense"):
        with pytest.raises(InvalidTransition):
            machine.fire(name)
    assert machine.state is FD


def test_receive_stays_until_all_results_are_in() -> None:
    machine = AgentMachine(AR)
    assert machine.fire("receive", all_results_in=False) is AR
    assert machine.fire("receive", all_results_in=False) is AR
    assert machine.fire("receive", all_results_in=True) is RR


@pytest.mark.parametrize(
    ("state", "event", "guard"),
    [
        (FD, "emit", "calls_valid"),
        (RR, "emit", "calls_valid"),
        (FD, "answer", "answer_allowed"),
        (RR, "answer", "answer_allowed"),
        (FD, "correct", "budget_left"),
        (RR, "correct", "budget_left"),
        (TE, "abort", "must_stop"),
    ],
)
def test_a_failed_guard_is_a_typed_error_and_changes_nothing(state: State, event: str, guard: str) -> None:
    machine = AgentMachine(state)
    with pytest.raises(GuardRejected) as info:
        machine.fire(event, **{guard: False})
    assert isinstance(info.value, InvalidTransition)
    assert info.value.failed == (guard,)
    assert guard in str(info.value)
    assert machine.state is state


def test_facts_must_name_guards_and_be_bools() -> None:
    machine = AgentMachine()
    with pytest.raises(UsageError, match="unknown guard fact"):
        machine.fire("emit", calls_ok=True)
    with pytest.raises(UsageError, match="True or False"):
        machine.fire("emit", calls_valid="yes")
    assert machine.state is FD


def test_a_fire_seen_before_is_still_checked() -> None:
    """A looked-up fire (same state, event and facts) keeps the checks of a first one:
    1 equals True as a key, but is no fact; an unhashable value is refused, not a crash."""
    assert AgentMachine().fire("emit", calls_valid=True) is TE
    assert AgentMachine().fire("emit", calls_valid=True) is TE  # looked up
    for bad in (1, [True]):
        machine = AgentMachine()
        with pytest.raises(UsageError, match="True or False"):
            machine.fire("emit", calls_valid=bad)
        assert machine.state is FD
    with pytest.raises(InvalidTransition):
        AgentMachine(TE).fire("emit", calls_valid=True)


def test_replay_events_with_and_without_facts() -> None:
    assert replay_events([]) is FD
    assert replay_events(["emit", "dispatch", ("receive", {"all_results_in": False})]) is AR
    assert replay_events(["emit", "dispatch", "receive", "correct", "answer", "user"]) is FD
    assert replay_events(["user"], initial=FI) is FD
    with pytest.raises(InvalidTransition):
        replay_events(["dispatch"])


def _reference_step(state: State, event: str, facts: dict[str, bool]) -> State | None:
    """Interpret TRANSITIONS directly: the first transition whose guards hold, else None."""
    for spec in TRANSITIONS:
        if spec["trigger"] != event or state.value not in spec["source"]:
            continue
        if all(facts.get(g, True) for g in spec["conditions"]) and not any(
            facts.get(g, True) for g in spec.get("unless", [])
        ):
            return State(spec["dest"])
    return None


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(EVENTS), st.dictionaries(st.sampled_from(sorted(GUARDS)), st.booleans())),
        max_size=30,
    )
)
def test_the_machine_agrees_with_its_data(steps: list[tuple[str, dict[str, bool]]]) -> None:
    machine = AgentMachine()
    for event, facts in steps:
        before = machine.state
        allowed = event in allowed_events(before)
        expected = _reference_step(before, event, facts)
        if expected is not None:
            assert machine.fire(event, **facts) is expected
        else:
            with pytest.raises(InvalidTransition) as info:
                machine.fire(event, **facts)
            assert isinstance(info.value, GuardRejected) is allowed
            assert machine.state is before
