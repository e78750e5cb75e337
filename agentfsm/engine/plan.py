"""What the next model request offers: :func:`plan`, from the history and the run's settings.

The tool_choice that binds the reply (:func:`tool_choice_now`), the enforcement level
and the dialect it teaches, the tools of the retry's grammar (after a language policy's
correction, what that policy offers), compact argument lists after a cut-off action
(and short strings after one cut off in a loop: greedy decoding writes the same loop
again, at a temperature too, until the budget is spent), an answer that cannot be a
``<slot>`` after one was refused, and the extension step of a parallel turn. Pure, like
:func:`~agentfsm.engine.decide.step`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from agentfsm.core._types import EnforcementLevel, Level
from agentfsm.core.backend import Capabilities
from agentfsm.core.choice import ToolChoice
from agentfsm.core.config import DEFAULTS
from agentfsm.core.loops import tail_loops
from agentfsm.core.messages import AssistantMessage, Message, ToolMessage, ToolSpec, UserMessage, round_start
from agentfsm.engine.decisions import EngineConfig, Plan
from agentfsm.dialects.parse import parse_reply
from agentfsm.dialects._shape import unclosed
from agentfsm.guards import json_valid, repeated_call, runtime_text
from agentfsm.guards.runtime_text import is_template
from agentfsm.guards._history import called, turn
from agentfsm.policy import Policies, policies_for
from agentfsm.prompt.enforcement import CONSTRAINED_DIALECT, choose_level
from agentfsm.prompt.grammar import MAX_REPEAT

__all__ = ["plan", "policies_of", "tool_choice_now", "unasked", "wants_vote"]


def _round_corrections(history: Sequence[Message]) -> list[tuple[str, AssistantMessage]]:
    """This round's corrections, latest first: each reason with the reply it rejected
    (a round starts at the user's message or the last tool result: :func:`round_start`)."""
    found: list[tuple[str, AssistantMessage]] = []
    for i in range(len(history) - 1, max(round_start(history), 1) - 1, -1):
        msg, rejected = history[i], history[i - 1]
        if isinstance(msg, UserMessage) and msg.correction and isinstance(rejected, AssistantMessage):
            found.append((msg.correction, rejected))
    return found


def _retry_tools(
    history: Sequence[Message], specs: Sequence[ToolSpec], choice: ToolChoice, policies: Policies
) -> tuple[ToolSpec, ...]:
    """The tools the retry's grammar offers, after some corrections:

    - after a language policy's correction, what that policy offers
      (:meth:`~agentfsm.policy.base.Policy.retry_offer`);
    - after a ``repeated_call`` correction, the tools already called in this user turn
      are left out: the model must use the results (answer) or take the next step with
      another tool. (Offering the answer only cut chains short: the embedded model
      repeats the first step of "multiply, then convert" before it takes the second.)

    When a call is mandatory the grammar keeps every offered tool: a correction never
    strands the model without a valid call.
    """
    if not history or not isinstance(history[-1], UserMessage) or choice.requires_call:
        return tuple(specs)
    offer = policies.retry_offer(history, specs, choice)
    if offer is not None:
        return offer
    dropped = called(history) if history[-1].correction == repeated_call.REASON else set()
    return tuple(s for s in specs if s.name not in dropped)


def _stuck(rounds: Sequence[tuple[str, AssistantMessage]]) -> bool:
    """Whether the reply refused last repeats, word for word, one refused earlier in this
    round (``rounds``: :func:`_round_corrections`; the model wrote the same reply after a
    correction: greedy decoding would write it a third time)."""
    if len(rounds) < 2:
        return False
    last = (rounds[0][1].content or "").strip()
    return any((rejected.content or "").strip() == last for _, rejected in rounds[1:])


#: the shortest bound a looping string gets (a value of a few words still fits)
MIN_LOOP_BOUND = 16


def _loop_bound(rounds: Sequence[tuple[str, AssistantMessage]]) -> int | None:
    """The length every free string of the retry's arguments is bounded to after an
    action cut off in a loop inside a string (``rounds``: :func:`_round_corrections`):
    the looping string up to its loop's first copy, at least :data:`MIN_LOOP_BOUND`
    and at most the grammar's :data:`~agentfsm.prompt.grammar.MAX_REPEAT`; None where no
    cut-off action of this round ends in one (a value cut at the token limit by its
    length alone is left as long as the model writes it)."""
    for reason, rejected in rounds:
        text = rejected.content or ""
        loops = list(tail_loops(text)) if reason == json_valid.TRUNCATED else []
        if not loops:
            continue
        start, period = min(loops)
        opened = unclosed(text[:start]).string
        if opened is None or '"' in text[start:]:
            continue  # not inside one string: the compact lists bound it
        return max(MIN_LOOP_BOUND, min(MAX_REPEAT, start - opened - 1 + period))
    return None


def _slot_refused(rounds: Sequence[tuple[str, AssistantMessage]], config: EngineConfig) -> bool:
    """Whether an answer refused in this round (``rounds``: :func:`_round_corrections`) was
    only a ``<slot>`` of the contract (``{"final": {"content": "<your answer>"}}``, the
    format line copied: greedy decoding writes it again after its correction, at a
    temperature too)."""
    return any(
        reason == runtime_text.REASON
        and is_template(parse_reply(rejected.content or "", config.tools, config.dialect).content or "")
        for reason, rejected in rounds
    )


def policies_of(config: EngineConfig) -> Policies:
    """The language policies ``config`` consults, in order (:mod:`agentfsm.policy`)."""
    return policies_for(config.policies, config.grounding)


def wants_vote(config: EngineConfig, reason: str, first_decision: bool) -> bool:
    """Whether consensus is worth drawing after a correction for ``reason``
    (:meth:`~agentfsm.policy.base.Policies.wants_vote`)."""
    return policies_of(config).wants_vote(reason, first_decision)


def plan(
    history: Sequence[Message],
    config: EngineConfig,
    capabilities: Capabilities,
    enforcement: EnforcementLevel = DEFAULTS.enforcement,
) -> Plan:
    """What the next request for ``history`` offers, on a backend with ``capabilities``.

    Raises :class:`~agentfsm.core.errors.UsageError` for an ``enforcement`` the backend
    cannot honour.
    """
    choice = tool_choice_now(history, config)
    level: Level = choose_level(enforcement, capabilities, choice) if config.tools else "prompt"
    rounds = _round_corrections(history)
    if level != "constrained":
        prefill = level == "prefill" and choice.requires_call
        return Plan(choice, level, config.dialect, config.tools, prefill=prefill, resample=_stuck(rounds))
    # the grammar forces the json-protocol shape: teach and show that one format
    continues = config.parallel and capabilities.list_continuation
    offered = _retry_tools(history, config.tools, choice, policies_of(config))
    shown = _shown(rounds, offered, choice, config)
    return Plan(
        choice,
        level,
        CONSTRAINED_DIALECT,
        offered,
        compact=any(reason == json_valid.TRUNCATED for reason, _ in rounds),
        max_length=_loop_bound(rounds),
        numbers=policies_of(config).retry_numbers(history),
        # where the grammar asks for the answer alone, it asks for one that says something
        no_slot=shown != "all" or _slot_refused(rounds, config),
        # where the backend extends a single call into a list, the reply itself is one call
        listed=config.parallel and not capabilities.list_continuation,
        extend=continues,
        resample=_stuck(rounds),
        corrections=shown,
    )


def _shown(
    rounds: Sequence[tuple[str, AssistantMessage]], offered: Sequence[ToolSpec], choice: ToolChoice,
    config: EngineConfig,
) -> Literal["all", "none", "last"]:
    """Which of the turn's corrections the retry's prompt shows (:attr:`Plan.corrections`)."""
    if not rounds or offered or not choice.allows_answer:
        return "all"
    refused = parse_reply(rounds[0][1].content or "", config.tools, config.dialect)
    return "none" if refused.tool_calls else "last"


def unasked(history: Sequence[Message], keep_last: bool = False) -> list[Message]:
    """``history`` without the current user turn's corrections and the replies they
    refused (but for the last of them with ``keep_last``): the conversation as the user,
    the tools and the accepted calls made it.

    Where the retry's grammar offers the answer alone, the grammar asks for it: no
    correction is shown for a small model to copy into its answer (the request one
    quoted, "Reply to the user's message directly: ...", came back as the answer, word
    for word). After a refused answer the last correction stays: it says what the
    answer lacked, and without it the prompt, and a greedy reply, would be the same."""
    tail = turn(history)
    dropped: set[int] = set()
    for i, m in enumerate(tail):
        if isinstance(m, UserMessage) and m.correction:
            dropped.add(i)
            if i and isinstance(tail[i - 1], AssistantMessage):
                dropped.add(i - 1)
    if keep_last and dropped:
        dropped -= {max(dropped), max(dropped) - 1}
    return [*history[: len(history) - len(tail)], *(m for i, m in enumerate(tail) if i not in dropped)]


def tool_choice_now(history: Sequence[Message], config: EngineConfig) -> ToolChoice:
    """The ``tool_choice`` that binds the next reply.

    With ``relax_after_results`` (the agent), the configured choice binds the first
    decision after each user message; once tool results have come back the model may
    call again or answer (``none`` stays off): tool history never makes another call
    mandatory. Without it (the proxy), the client's choice binds every request, as the
    wire protocols mean it.
    """
    choice = config.tool_choice
    if not config.relax_after_results or choice == ToolChoice.NONE:
        return choice
    start = round_start(history)
    return ToolChoice.AUTO if start and isinstance(history[start - 1], ToolMessage) else choice
