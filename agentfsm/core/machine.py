"""The agent's finite-state machine, defined once as data and run by ``transitions``.

:data:`TRANSITIONS` is the single definition: the diagrams
(:mod:`agentfsm.diagram.build`) and :class:`AgentMachine` are both built from it.

Events: ``emit`` (a reply was parsed into valid calls), ``dispatch`` (the calls were
handed to the tools or to the client), ``receive`` (results arrived), ``answer`` (a
reply without calls was accepted), ``correct`` (a reply was rejected and the model is
asked again: the machine stays in the deciding state), ``abort`` (the run stops:
budget spent or loop detected), ``user`` (a new user turn).

Conditions name guard predicates (:data:`GUARDS`). They are evaluated on the facts
passed to :meth:`AgentMachine.fire`; a fact that is not passed counts as true, and a
fact whose name is not a guard is a :class:`~agentfsm.core.errors.UsageError`. The
engine passes each fact from what it found (``answer_allowed``: tool_choice requires
no call; ``budget_left``: the budget module allows one more correction;
``calls_valid``: every call names an offered tool; ``must_stop``; ``all_results_in``:
from the history), so a decision that breaks the machine's rules fails loudly.

Errors: an event the current state does not allow raises
:class:`~agentfsm.core.errors.InvalidTransition`; an allowed event whose conditions all
fail raises :class:`GuardRejected` (a subclass of it). Neither ever changes the
state, and ``transitions``' own ``MachineError`` never escapes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any, NotRequired, TypedDict

from transitions import Machine, MachineError

from agentfsm.core.errors import InvalidTransition, UsageError
from agentfsm.core.states import State

__all__ = [
    "EVENTS",
    "GUARDS",
    "TRANSITIONS",
    "AgentMachine",
    "GuardRejected",
    "TransitionSpec",
    "allowed_events",
    "replay_events",
]


class TransitionSpec(TypedDict):
    """One transition as data, in the shape ``transitions.Machine`` accepts."""

    trigger: str
    source: list[str]
    dest: str
    conditions: list[str]
    unless: NotRequired[list[str]]


_FD = State.FIRST_DECISION.value
_TE = State.TOOL_EMITTED.value
_AR = State.AWAITING_RESULT.value
_RR = State.RESULT_RECEIVED.value
_FI = State.FINAL.value

#: The machine. Order matters where one event has several transitions from one
#: state: the first whose conditions hold is taken.
TRANSITIONS: tuple[TransitionSpec, ...] = (
    {"trigger": "emit", "source": [_FD, _RR], "dest": _TE, "conditions": ["calls_valid"]},
    {"trigger": "dispatch", "source": [_TE], "dest": _AR, "conditions": []},
    {"trigger": "receive", "source": [_AR], "dest": _RR, "conditions": ["all_results_in"]},
    {
        "trigger": "receive",
        "source": [_AR],
        "dest": _AR,
        "conditions": [],
        "unless": ["all_results_in"],
    },
    {"trigger": "answer", "source": [_FD, _RR], "dest": _FI, "conditions": ["answer_allowed"]},
    {"trigger": "correct", "source": [_FD], "dest": _FD, "conditions": ["budget_left"]},
    {"trigger": "correct", "source": [_RR], "dest": _RR, "conditions": ["budget_left"]},
    {"trigger": "abort", "source": [_FD, _TE, _AR, _RR], "dest": _FI, "conditions": ["must_stop"]},
    {"trigger": "user", "source": [_FD, _RR, _FI], "dest": _FD, "conditions": []},
)

#: Every event, in the order they are documented.
EVENTS: tuple[str, ...] = ("emit", "dispatch", "receive", "answer", "correct", "abort", "user")

#: The guard predicates that conditions may name, with what each one means.
GUARDS: Mapping[str, str] = {
    "calls_valid": "every parsed call names an offered tool and matches its schema",
    "answer_allowed": "tool_choice lets the model answer without calling a tool",
    "budget_left": "the correction budget of the turn is not spent",
    "all_results_in": "every call of the tool turn has its result",
    "must_stop": "the run must stop: budget spent or a loop detected",
}


class GuardRejected(InvalidTransition):
    """An allowed event was fired, but the guard conditions of all its transitions failed."""

    def __init__(self, event: str, state: str, failed: tuple[str, ...]) -> None:
        super().__init__(event, state)
        self.failed = failed
        self.args = (
            f"event {event!r} from state {state!r} rejected by guard(s): {', '.join(failed)}",
        )


def _fact(event: Any, name: str) -> bool:
    return bool(event.kwargs.get(name, True))


class _Facts:
    """The ``transitions`` model: one method per guard, reading the event's facts."""

    def __init__(self) -> None:
        self.state: str = _FD

    def calls_valid(self, event: Any) -> bool:
        return _fact(event, "calls_valid")

    def answer_allowed(self, event: Any) -> bool:
        return _fact(event, "answer_allowed")

    def budget_left(self, event: Any) -> bool:
        return _fact(event, "budget_left")

    def all_results_in(self, event: Any) -> bool:
        return _fact(event, "all_results_in")

    def must_stop(self, event: Any) -> bool:
        return _fact(event, "must_stop")


@cache
def allowed_events(state: State) -> tuple[str, ...]:
    """The events that :data:`TRANSITIONS` allows from ``state``, in :data:`EVENTS` order."""
    found = {spec["trigger"] for spec in TRANSITIONS if state.value in spec["source"]}
    return tuple(event for event in EVENTS if event in found)


#: (state, event, facts in the order given) -> the state a successful fire led to. The machine is data and
#: its conditions read nothing but the facts, so a fire is a pure function of these;
#: each distinct one runs on ``transitions`` once (~15 µs), later ones are looked up.
_TAKEN: dict[tuple[str, str, tuple[tuple[str, object], ...]], State] = {}


_LOCAL = threading.local()


def _shared() -> tuple[Machine, _Facts]:
    """This thread's one ``transitions`` machine and model (building one costs ~0.3 ms;
    :class:`AgentMachine` only lends it its state for the length of a synchronous fire)."""
    found: tuple[Machine, _Facts] | None = getattr(_LOCAL, "machine", None)
    if found is None:
        facts = _Facts()
        machine = Machine(
            model=facts,
            states=[state.value for state in State],
            transitions=[dict(spec) for spec in TRANSITIONS],
            initial=_FD,
            auto_transitions=False,
            send_event=True,
            ignore_invalid_triggers=False,
        )
        found = _LOCAL.machine = (machine, facts)
    return found


class AgentMachine:
    """The machine of one conversation: :data:`TRANSITIONS` run by ``transitions``.

    It holds only its state; a :meth:`fire` runs on the thread's shared
    ``transitions.Machine`` (built once per thread), so creating one costs nothing, and
    a fire already seen (same state, event and facts) is looked up (:data:`_TAKEN`).
    """

    def __init__(self, initial: State = State.FIRST_DECISION) -> None:
        self._state = State(initial)

    @property
    def state(self) -> State:
        """The current state."""
        return self._state

    @property
    def allowed_events(self) -> tuple[str, ...]:
        """The events the current state allows."""
        return allowed_events(self._state)

    def fire(self, event: str, **facts: object) -> State:
        """Fire ``event`` with the guard facts it depends on; return the new state.

        Raises :class:`~agentfsm.core.errors.InvalidTransition` for an event the current
        state does not allow, :class:`GuardRejected` when every transition of the
        event fails its conditions, and :class:`~agentfsm.core.errors.UsageError` for a
        fact that names no guard or is not a bool.
        """
        # a fire seen before was checked then; its facts' types are checked again first
        # (1 == True as a key, but 1 is not a fact; a list cannot be a key)
        key = None
        dest = None
        if all(value is True or value is False for value in facts.values()):
            key = (self._state.value, event, tuple(facts.items()))
            dest = _TAKEN.get(key)
        if dest is None:
            dest = self._first_fire(key, event, facts)
        self._state = dest
        return dest

    def _first_fire(
        self, key: tuple[str, str, tuple[tuple[str, object], ...]] | None, event: str, facts: dict[str, object]
    ) -> State:
        """Check a fire not seen before, run it on ``transitions``, and remember where it led."""
        unknown = sorted(name for name in facts if name not in GUARDS)
        if unknown:
            raise UsageError(f"unknown guard fact(s) {unknown}; known: {sorted(GUARDS)}")
        not_bool = sorted(name for name, value in facts.items() if not isinstance(value, bool))
        if not_bool:
            raise UsageError(f"guard fact(s) {not_bool} must be True or False")
        before = self._state
        if event not in self.allowed_events:
            raise InvalidTransition(event, before.value)
        machine, model = _shared()
        model.state = before.value
        try:
            taken = machine.events[event].trigger(model, **facts)
        except MachineError as exc:  # unreachable after the check above; mapped all the same
            raise InvalidTransition(event, before.value) from exc
        if not taken:
            raise GuardRejected(event, before.value, _failed_guards(event, before, facts))
        dest = State(model.state)
        if key is not None:
            _TAKEN[key] = dest
        return dest


def _failed_guards(event: str, state: State, facts: Mapping[str, object]) -> tuple[str, ...]:
    failed: list[str] = []
    for spec in TRANSITIONS:
        if spec["trigger"] != event or state.value not in spec["source"]:
            continue
        failed += [name for name in spec["conditions"] if not facts.get(name, True)]
        failed += [f"not {name}" for name in spec.get("unless", []) if facts.get(name, True)]
    return tuple(dict.fromkeys(failed))


def replay_events(
    events: Iterable[str | tuple[str, Mapping[str, bool]]],
    initial: State = State.FIRST_DECISION,
) -> State:
    """Fire events (a name, or a name and its facts) on a fresh machine; return the end state."""
    machine = AgentMachine(initial)
    for item in events:
        if isinstance(item, str):
            machine.fire(item)
        else:
            name, facts = item
            machine.fire(name, **facts)
    return machine.state
