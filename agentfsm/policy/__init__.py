"""Language policies: every rule that reads the conversation's words, behind one interface.

The engine consults the policies a run selects (:attr:`~agentfsm.core.config.RunConfig.policies`,
by name, in order) through :class:`~agentfsm.policy.base.Policies`, and knows nothing of
any of them. Each lives in its own module, imported only when a run selects it, so
``policies=()`` (the pure protocol runtime) imports none:

- ``refusal`` (:mod:`~agentfsm.policy.refusal`): English refusal phrases, read for the
  refusal guard;
- ``answers`` (:mod:`~agentfsm.policy.answers`): an answer that loops is cut where the
  loop starts;
- ``clauses``, ``grounding``, ``relevance``, ``coverage`` (small models: they run where
  the run's ``grounding`` setting is on): a call takes its values from the part of the
  request that asks for its tool, from the conversation at all, and is to a tool the
  request is about; an answer states the results and leaves no part of the request undone.
"""

from __future__ import annotations

import importlib
from functools import cache

from agentfsm.core._types import POLICY_NAMES
from agentfsm.core.errors import UsageError
from agentfsm.policy.base import Policies, Policy

__all__ = ["POLICY_MODULES", "Policies", "Policy", "get_policy", "policies_for"]

#: every policy, by name: the module that holds it (as its ``POLICY``), imported on first use
POLICY_MODULES: dict[str, str] = {
    "refusal": "agentfsm.policy.refusal",
    "answers": "agentfsm.policy.answers",
    "clauses": "agentfsm.policy.clauses",
    "grounding": "agentfsm.policy.grounding",
    "relevance": "agentfsm.policy.relevance",
    "coverage": "agentfsm.policy.coverage",
}
assert tuple(POLICY_MODULES) == POLICY_NAMES


def get_policy(name: str) -> Policy:
    """The policy called ``name``; :class:`~agentfsm.core.errors.UsageError` names the valid ones."""
    module = POLICY_MODULES.get(name)
    if module is None:
        raise UsageError(f"unknown policy {name!r}; policies: {', '.join(POLICY_MODULES)}")
    policy = importlib.import_module(module).POLICY
    assert isinstance(policy, Policy)
    return policy


@cache
def policies_for(names: tuple[str, ...], grounding: bool) -> Policies:
    """The policies called ``names``, in order, less those that need ``grounding`` when it is off."""
    chosen = (get_policy(name) for name in names)
    return Policies(tuple(p for p in chosen if grounding or not p.needs_grounding))
