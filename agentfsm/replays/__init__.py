"""Replay: a recorded transcript run again through today's code, and compared.

Above the producers it runs again: :mod:`~agentfsm.replays.backend` serves the recorded
model outputs, :mod:`~agentfsm.replays.rerun` runs each run the way its producer ran it
(agent, proxy, eval), :mod:`~agentfsm.replays.compare` compares the decisions
(``agentfsm.replay``, ``agentfsm.areplay``)."""

__all__: list[str] = []
