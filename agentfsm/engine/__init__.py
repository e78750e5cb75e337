"""The engine: every decision of a run, above the guards, the prompt, the dialects and the
language policies: :mod:`~agentfsm.engine.plan` (what a request offers),
:mod:`~agentfsm.engine.decide` (what a reply means), :mod:`~agentfsm.engine.consensus`."""

__all__: list[str] = []
