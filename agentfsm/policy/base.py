"""The seam between the engine and the rules that read natural language.

The engine (:mod:`agentfsm.engine.decide`) decides by the protocol: what the reply
says in the action format, what the schemas allow, what the history holds. Some
decisions also need to read the conversation's *words* (is this prose a refusal? does
this call take its values from the request? does this answer state the results?).
Those rules are language policies: each a :class:`Policy`, in its own module of this
package, selected by name in :attr:`~agentfsm.core.config.RunConfig.policies` and
reached by the engine only through :class:`Policies`, the selected ones in order.
Without any (``policies=()``) the runtime is the pure protocol runtime: no rule reads
the conversation's words, and no module that does is imported.

Every hook has a default that says nothing ("not mine"), so a policy overrides only
what it decides, and a new hook can be added without touching the others. The hooks
are pure (history in, verdict out), so replay decides the same way. A policy that
needs a model call of its own (a scored choice between candidates) gets a hook that
the turn runner calls with its backend, as it draws consensus candidates
(:func:`agentfsm.runtime.model_calls.vote`); none does yet.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar

from agentfsm.core._types import PolicyName
from agentfsm.core.choice import ToolChoice
from agentfsm.core.messages import AssistantMessage, Message, ToolCall, ToolSpec, UserMessage
from agentfsm.core.parsed import ParsedReply
from agentfsm.dialects.parse import parse_reply
from agentfsm.guards.base import ACCEPT, Accept, Verdict
from agentfsm.guards.refusal import RefusalMatch, RefusalMatcher
from agentfsm.prompt.enforcement import CONSTRAINED_DIALECT

__all__ = ["Policies", "Policy", "correction_of", "refused_answer", "refused_calls", "refused_reply"]


class Policy:
    """One language policy; every hook defaults to having nothing to say."""

    #: the name :attr:`~agentfsm.core.config.RunConfig.policies` selects it by
    name: ClassVar[PolicyName]
    #: runs only where the run's ``grounding`` setting is on (``auto``: a small model)
    needs_grounding: ClassVar[bool] = False
    #: short tool results reach the model as English sentences ("The result of NAME is
    #: VALUE."), which a small model restates (:func:`agentfsm.prompt.results.frame_result`)
    result_sentences: ClassVar[bool] = False

    def refusal(self, text: str) -> RefusalMatch | None:
        """The refusal that a reply without calls makes (for :mod:`agentfsm.guards.refusal`)."""
        return None

    def check_call(
        self,
        history: Sequence[Message],
        calls: Sequence[ToolCall],
        tools: Sequence[ToolSpec],
        tool_choice: ToolChoice,
        conversation: str,
    ) -> Verdict:
        """A verdict on calls the protocol guards accepted (``conversation``: the
        conversation's text, :func:`agentfsm.guards._history.conversation_text`)."""
        return ACCEPT

    def check_answer(
        self, history: Sequence[Message], content: str, tools: Sequence[ToolSpec], tool_choice: ToolChoice
    ) -> Verdict:
        """A verdict on an answer (a reply without calls) the protocol guards accepted."""
        return ACCEPT

    def retry_offer(
        self, history: Sequence[Message], tools: Sequence[ToolSpec], tool_choice: ToolChoice
    ) -> tuple[ToolSpec, ...] | None:
        """The tools a retry's grammar offers after this policy's own correction (the
        last message of ``history``); None when that correction is not this policy's."""
        return None

    def wants_vote(self, reason: str, first_decision: bool) -> bool | None:
        """Whether consensus is worth drawing after a correction for ``reason`` (made on
        the first decision of a user turn, or later); None when ``reason`` is not this
        policy's."""
        return None

    def finish_answer(self, content: str, cut: bool = False) -> str:
        """The final answer's text, as this policy leaves it (``cut``: the reply was cut
        off before its end, by the token limit or the loop stop)."""
        return content

    def copied_from(self, history: Sequence[Message]) -> str | None:
        """The text that the strings of a list's further calls are copied from (the
        extension step, :mod:`agentfsm.prompt.extension`); None when this policy does
        not hold them to one."""
        return None

    def retry_numbers(self, history: Sequence[Message]) -> tuple[float, ...] | None:
        """The numbers the retry's arguments are held to (the constrained grammar's enum for
        every free number) after this policy's correction ends ``history``; None when it
        does not hold them."""
        return None


@dataclass(frozen=True)
class Policies:
    """The policies a run consults, in order: for each hook, the first that has something
    to say decides (a correction, an offer, a vote)."""

    policies: tuple[Policy, ...] = ()

    @property
    def names(self) -> tuple[PolicyName, ...]:
        """The policies' names, in order (as the transcript's ``run_start`` records them)."""
        return tuple(p.name for p in self.policies)

    @property
    def result_sentences(self) -> bool:
        """Whether a policy frames short results as sentences."""
        return any(p.result_sentences for p in self.policies)

    @cached_property
    def refusal(self) -> RefusalMatcher | None:
        """The matcher the refusal guard reads a refusal with; None without a policy for it."""
        readers = [p for p in self.policies if type(p).refusal is not Policy.refusal]
        if not readers:
            return None
        return lambda text: next((m for p in readers if (m := p.refusal(text)) is not None), None)

    def check_call(
        self,
        history: Sequence[Message],
        calls: Sequence[ToolCall],
        tools: Sequence[ToolSpec],
        tool_choice: ToolChoice,
        conversation: str,
    ) -> Verdict:
        """The first verdict that is not an accept, else :data:`~agentfsm.guards.base.ACCEPT`."""
        for policy in self.policies:
            verdict = policy.check_call(history, calls, tools, tool_choice, conversation)
            if not isinstance(verdict, Accept):
                return verdict
        return ACCEPT

    def check_answer(
        self, history: Sequence[Message], content: str, tools: Sequence[ToolSpec], tool_choice: ToolChoice
    ) -> Verdict:
        """The first verdict that is not an accept, else :data:`~agentfsm.guards.base.ACCEPT`."""
        for policy in self.policies:
            verdict = policy.check_answer(history, content, tools, tool_choice)
            if not isinstance(verdict, Accept):
                return verdict
        return ACCEPT

    def retry_offer(
        self, history: Sequence[Message], tools: Sequence[ToolSpec], tool_choice: ToolChoice
    ) -> tuple[ToolSpec, ...] | None:
        """The offer of the policy whose correction ends ``history``; None when none made it."""
        for policy in self.policies:
            offer = policy.retry_offer(history, tools, tool_choice)
            if offer is not None:
                return offer
        return None

    def wants_vote(self, reason: str, first_decision: bool) -> bool:
        """Whether consensus is worth drawing after a correction for ``reason``: the
        policy's word for its own reasons; otherwise on the first decision of a user
        turn only (after results, a refusal is mostly a model repeating itself, and its
        correction, answer now, is the way on)."""
        for policy in self.policies:
            wanted = policy.wants_vote(reason, first_decision)
            if wanted is not None:
                return wanted
        return first_decision

    def finish_answer(self, content: str, cut: bool = False) -> str:
        """``content`` as every policy leaves it, in order (``cut``: see
        :meth:`Policy.finish_answer`)."""
        for policy in self.policies:
            content = policy.finish_answer(content, cut)
        return content

    def copied_from(self, history: Sequence[Message]) -> str | None:
        """The first policy's text that a list's further strings are copied from."""
        return next((text for p in self.policies if (text := p.copied_from(history)) is not None), None)

    def retry_numbers(self, history: Sequence[Message]) -> tuple[float, ...] | None:
        """The first policy's numbers that the retry's arguments are held to."""
        return next((found for p in self.policies if (found := p.retry_numbers(history)) is not None), None)


def correction_of(history: Sequence[Message]) -> str | None:
    """The reason of the correction that ends ``history`` (None when it ends otherwise)."""
    last = history[-1] if history else None
    return last.correction if isinstance(last, UserMessage) else None


def refused_reply(history: Sequence[Message], tools: Sequence[ToolSpec]) -> ParsedReply:
    """The reply that the correction ending ``history`` refused, read as the constrained
    grammar writes it."""
    rejected = history[-2] if len(history) > 1 else None
    text = rejected.content or "" if isinstance(rejected, AssistantMessage) else ""
    return parse_reply(text, tools, CONSTRAINED_DIALECT)


def refused_answer(history: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
    """The prose of that refused reply (``""`` when it has none)."""
    return refused_reply(history, tools).content or ""


def refused_calls(history: Sequence[Message], tools: Sequence[ToolSpec]) -> tuple[ToolCall, ...]:
    """The calls of that refused reply."""
    return refused_reply(history, tools).tool_calls
