"""Grounding: under ``auto``, a call must take something from the conversation.

A small model offered tools fills their slots whether or not the request gives it
anything to fill them with: a greeting becomes ``add(a=1, b=2)``, a question about a
city the tools know nothing of becomes ``get_weather(city="London, UK")``; and once
results are back it walks on through the tool list with the values it already used
(``multiply(12.5, 4)``, then ``add(12.5, 4)``). Two checks, on the values a call
carries (numbers and strings, nested ones included; booleans and enum members are the
schema's, not the conversation's), and two on its numbers:

- **ungrounded**: no value of the call occurs in the conversation (user turns, system
  prompts, tool results). A number matches a number written there in digits, in every
  language alike (a number spelled out in words is not read: the call is refused and
  the model asked again, or answers); an empty string matches nothing; a string matches when it, or one of its words, or a word it abbreviates
  (``"mi"`` for "miles") occurs there.
- **stale**: after results have come back in this turn, the call brings no value that
  is both in the conversation and new to the turn's calls (a chain's next step carries
  a result, a second task of the request its own values; ``multiply(42, 1.0)`` after
  ``convert(42)`` carries only a used value and a made-up one), or it feeds its tool's
  result back where the request does not ask for it: once, where the result is that one
  number and a kept argument is written in the request fewer times than the chain uses
  it, or a second time in a row (:mod:`~agentfsm.policy._feedback`). An exact repeat is
  :mod:`~agentfsm.guards.repeated_call`'s business.
- **misread** (under any ``tool_choice``, :mod:`~agentfsm.policy._misread`): a number
  that is only part of a decimal written there (12 or 125 for "12,5"), in a call whose
  other values are grounded.
- **unwritten** (under any ``tool_choice``, before the turn's first result, once a turn,
  :mod:`~agentfsm.policy._misread`): a number nobody wrote while a number of the latest
  request is used by no call of the turn, in a call with another grounded value.
- **misread member** (under any ``tool_choice``, before the turn's first result, once a
  turn, :mod:`~agentfsm.policy._members`): a value the schema lists that the request does
  not write, where it writes exactly one other member of the list ("celsius" for "in
  fahrenheit"); the retry's grammar holds that list to the member named
  (:meth:`GroundingPolicy.retry_offer`).

After a misread or unwritten number, and after a call with no value from the conversation while
other tools may still find one (``missing_value``), the retry's grammar holds every free
number to the numbers the conversation writes (:meth:`GroundingPolicy.retry_numbers`).

The first two only under ``auto``, where answering is a valid outcome: the correction asks for the
answer and the retry's grammar offers the answer only (see
:func:`agentfsm.engine.decide.plan`), except once per turn before any result, when other
tools are offered: a made-up value may be one another tool finds ("the weather in the
capital of France" called as ``get_weather("Paris")``), so the retry offers the tools
not called and the answer (``missing_value``, :func:`fetch_tools`). Under a required call the check does not run: a
correction there must still allow a call, and the model's values are all it has.
A call with no value to judge (no arguments, only booleans or enum members) passes.

The same rule shapes the parallel-call extension (:mod:`agentfsm.prompt.extension`):
:meth:`GroundingPolicy.copied_from` names the text (the latest request and the turn's
results) whose runs of words a list's further calls copy their strings from.

How a value is read and found in the conversation: :mod:`agentfsm.policy._values`.

Known cost: a request that needs two tools on the *same* values, made one after the
other ("weather and local time in Paris", the time asked after the weather's result)
gets the second call refused as stale; made in one reply (parallel calls), both run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from agentfsm.core.choice import ToolChoice
from agentfsm.core.numbers import digits_in
from agentfsm.core.words import fold, wide, words
from agentfsm.policy.answers import latest_results
from agentfsm.core.messages import Message, ToolCall, ToolMessage, ToolSpec, UserMessage, round_start
from agentfsm.guards._history import calls_and_results, conversation_text, latest_request, show_arguments, told
from agentfsm.guards.base import ACCEPT, Correction, Verdict
from agentfsm.guards import answer_schema, runtime_text
from agentfsm.policy._feedback import fed_back_again
from agentfsm.policy._values import STOP_WORDS, Source, enum_params, grounded, number_spans, numbers_in, values_of
from agentfsm.policy._members import MEMBER_REASON, check_member, held_to_named
from agentfsm.policy._misread import MISREAD_REASON, REASONS as NUMBER_REASONS, UNWRITTEN_REASON, check_misread, check_unwritten, digits_of
from agentfsm.policy.base import Policy, correction_of, refused_calls, refused_reply

__all__ = ["ANSWER_REASON", "GUARD", "MISREAD_REASON", "MISSING_REASON", "UNWRITTEN_REASON", "POLICY", "GroundingPolicy", "REASON", "REASONS", "STALE_REASON", "check", "check_answer", "fetch_tools", "grounded", "number_spans", "numbers_in",
           "request_of", "values_of"]

GUARD = "grounding"
REASON: Final = "ungrounded_call"
#: a call after results that carries only values earlier calls of the turn used
STALE_REASON: Final = "stale_call"
#: an answer after results that leaves out one of the latest results
ANSWER_REASON: Final = "unsupported_answer"
#: a call with no value from the conversation, while another tool may find the value
#: (the retry offers the other tools once, see :func:`fetch_tools`)
MISSING_REASON: Final = "missing_value"
#: this guard's correction reasons after which the retry offers the answer only
REASONS = frozenset({REASON, STALE_REASON, ANSWER_REASON})
#: the protocol guards' reasons for refusing an answer for its wording, not for what it does
_WORDING = frozenset({runtime_text.REASON, answer_schema.REASON})
#: what a refused call is told once results are in hand, after them
_ANSWER_NOW = "Answer the user's request now, stating these results."
#: the most numbers a retry's grammar offers after a misread one (more: left free)
_MAX_NUMBERS = 64
#: the longest result an answer is expected to restate
_SHORT_RESULT = 200
def request_of(history: Sequence[Message]) -> str:
    """The user's latest request (not a correction), on one line, at most
    :data:`REQUEST_CHARS` characters: what a correction repeats, because a small model
    answers the request it can see, not one a long prompt ago."""
    text = " ".join(latest_request(history).split())
    return text if len(text) <= REQUEST_CHARS else text[:REQUEST_CHARS] + "..."


#: the longest echo of the user's request a correction repeats
REQUEST_CHARS = 300


def fetch_tools(history: Sequence[Message], tools: Sequence[ToolSpec], refused: set[str]) -> tuple[ToolSpec, ...]:
    """The tools a retry may still call after a call with no value from the conversation
    (``refused``: the tools that reply called): the others, once per user turn and
    before any result, for a value another tool finds ("the weather in the capital of
    France": the capital first). Empty when that chance was used, results came back,
    or no other tool is offered: the model answers."""
    start = round_start(history)
    if start and isinstance(history[start - 1], ToolMessage):
        return ()
    if any(isinstance(m, UserMessage) and m.correction in (REASON, MISSING_REASON) for m in history[start:]):
        return ()
    return tuple(t for t in tools if t.name not in refused)


def check(
    history: Sequence[Message],
    calls: Sequence[ToolCall],
    tool_choice: ToolChoice,
    tools: Sequence[ToolSpec],
    conversation: str,
) -> Verdict:
    """Correct the first of ``calls`` that misreads a written decimal (under any
    ``tool_choice``: :mod:`~agentfsm.policy._misread`), or is ungrounded or stale (under
    ``auto`` only).

    ``conversation`` is the conversation's text (:func:`agentfsm.guards._history.conversation_text`).
    """
    if not calls:
        return ACCEPT
    schemas = {t.name: t.parameters for t in tools}
    earlier, results = calls_and_results(history)
    used = {v for c in earlier for v in values_of(c.arguments, enum_params(schemas.get(c.name)))}
    source = Source(conversation)
    values = [set(values_of(c.arguments, enum_params(schemas.get(c.name)))) for c in calls]
    # a misread number is corrected under any tool_choice (the correction asks for a
    # call), once a turn: the retry's grammar holds the numbers to the written ones
    before = {v for v in used if isinstance(v, float)}
    misread = ACCEPT if told(history, MISREAD_REASON) else check_misread(
        calls, values, before, conversation.lower(), source.has
    )
    # before the turn's first result only: after one, a made-up number is a stale call's
    # (answer now), and a correction asking for a call again was copied into the answer
    if misread is ACCEPT and not results and not told(history, UNWRITTEN_REASON):
        digits = set(digits_of(used))
        misread = check_unwritten(calls, values, digits, latest_request(history), conversation.lower(), source.has)
    # a listed value where the request names another member ("celsius" for "in fahrenheit")
    if misread is ACCEPT and not results and not told(history, MEMBER_REASON):
        misread = check_member(calls, schemas, latest_request(history))
    if misread is not ACCEPT or tool_choice != ToolChoice.AUTO:
        return misread
    # the results so far, right before the answer: a small model states what it can see
    have = ("\n".join(results) + "\n") if results else ""
    for index, (call, found) in enumerate(zip(calls, values, strict=True)):
        if not found:
            continue
        if not any(source.has(v) for v in found):
            detail = f"call {index}: {call.name}({show_arguments(call)}): no value from the conversation"
            if not results and fetch_tools(history, tools, {c.name for c in calls}):
                why = (
                    f"The values of {call.name}({show_arguments(call)}) are not in the user's message. If one of "
                    "your tools finds them from the user's words, call it first; otherwise reply to the "
                    f'user\'s message directly: "{request_of(history)}"'
                )
                return Correction(guard=GUARD, reason=MISSING_REASON, message=why, call_index=index, detail=detail)
            # after results, the same words as a stale call's: the results, then the ask; no
            # reason is given before the ask: "None of these values is in the conversation."
            # and "No tool fits this request." were each copied as the answer
            why = (
                f"{have}{_ANSWER_NOW}"
                if results
                else f'Reply to the user\'s message directly: "{request_of(history)}"'
            )
            return Correction(guard=GUARD, reason=REASON, message=why, call_index=index, detail=detail)
        looped = bool(results) and fed_back_again(history, call)
        if results and (looped or not {v for v in found if source.has(v)} - used):
            why = "its own result fed back, unasked" if looped else "only values already used"
            return Correction(guard=GUARD, reason=STALE_REASON, call_index=index, message=f"{have}{_ANSWER_NOW}",
                              detail=f"call {index}: {call.name}({show_arguments(call)}): stale ({why})")
    return ACCEPT


def _marks(text: str) -> tuple[set[float], set[str]]:
    """The numbers and the significant words of ``text`` (worth 4 letters or more, a wide
    character two: :func:`~agentfsm.core.words.wide`), folded."""
    numbers = digits_in(text)
    significant = {w for w in words(fold(text)) if wide(w) >= 4 and not w.isdigit() and w not in STOP_WORDS}
    return numbers, significant


def _stated(word: str, answer: str) -> bool:
    """Whether the folded ``answer`` holds ``word``: within a longer word too, as a script
    written without spaces runs a sentence's words together ("東京は晴れ"); a word of wide
    characters, by two of them in a row ("東京は晴れです" for "晴れ、東京"); a word of 5
    letters or more, inflected at its end ("в Москве" for "Москва")."""
    if word in answer or (len(word) >= 5 and word[:-1] in answer):
        return True
    pairs = (word[i : i + 2] for i in range(len(word) - 1))
    return any(wide(p) == 4 and p in answer for p in pairs)


def _reflects(answer: str, result: str) -> bool:
    numbers, significant = _marks(result)
    if not numbers and not significant:
        return True  # nothing to state
    said_numbers = digits_in(answer)
    close = any(abs(a - n) <= max(0.01, 0.005 * abs(n)) for n in numbers for a in said_numbers)
    said = fold(answer)
    return close or any(_stated(w, said) for w in significant)


def check_answer(history: Sequence[Message], answer: str) -> Verdict:
    """Correct an answer given right after results that leaves one of them out (an
    answer that is only a copied ``<slot>`` of the contract is the runtime-text guard's).

    The latest round's results are what the answer must use (a chain's earlier results
    may be steps); a result is stated when the answer holds one of its numbers (within
    rounding) or one of its words. With several results in the round (parallel calls:
    "the weather in Oslo and in Paris") each must be stated: a small model restates
    the last one and drops the others. Failed calls and empty results are not judged.
    """
    # short one-line results only: those are values to state (a file's text or a long
    # document is summarised, not restated)
    usable = [
        r for r in latest_results(history)
        if r.status == "ok" and r.content.strip() and "\n" not in r.content.strip() and len(r.content) <= _SHORT_RESULT
    ]
    missed = [r for r in usable if not _reflects(answer, r.content)]
    if not missed:
        return ACCEPT
    _, lines = calls_and_results(history)
    detail = (
        "the answer states none of the latest results"
        if len(missed) == len(usable)
        else f"the answer leaves out {len(missed)} of the {len(usable)} latest results"
    )
    return Correction(
        guard=GUARD,
        reason=ANSWER_REASON,
        message="\n".join(lines) + "\nAnswer the user's request now, stating each of these results.",
        detail=detail,
    )


class GroundingPolicy(Policy):
    """Calls take a value from the conversation (and, after results, something new);
    answers after results state them."""

    name = "grounding"
    needs_grounding = True

    def check_call(
        self,
        history: Sequence[Message],
        calls: Sequence[ToolCall],
        tools: Sequence[ToolSpec],
        tool_choice: ToolChoice,
        conversation: str,
    ) -> Verdict:
        return check(history, calls, tool_choice, tools, conversation)

    def check_answer(
        self, history: Sequence[Message], content: str, tools: Sequence[ToolSpec], tool_choice: ToolChoice
    ) -> Verdict:
        return check_answer(history, content)

    def retry_offer(
        self, history: Sequence[Message], tools: Sequence[ToolSpec], tool_choice: ToolChoice
    ) -> tuple[ToolSpec, ...] | None:
        """The answer only after :data:`REASONS` (no value to call with, or the results in
        hand); after an answer refused for its wording (the runtime's text, a copied
        ``<slot>``, not the client's output schema) when it was a copied ``<slot>`` or the
        answer only was offered earlier in this round (the model was answering: a
        refused wording does not reopen the calls already judged); after
        ``missing_value`` the tools the refused reply did not call, once, to fetch the
        value (:func:`fetch_tools`), and the answer; after a misread member, every tool,
        the refused call's list held to the member the request names (:func:`held_to_named`)."""
        reason = correction_of(history)
        if reason in REASONS:
            return ()
        if reason in _WORDING:
            refused = refused_reply(history, tools)
            answer = refused.content or ""
            if runtime_text.is_template(answer) or (
                answer and not refused.tool_calls and any(told(history, r, this_round=True) for r in REASONS)
            ):
                return ()
        if reason == MISSING_REASON:
            return fetch_tools(history[:-2], tools, {c.name for c in refused_calls(history, tools)})
        if reason == MEMBER_REASON:
            # the model writes the first member again when told: the retry holds that list
            # to the member the user wrote, as a misread number's retry holds the numbers
            return held_to_named(tools, refused_calls(history, tools), latest_request(history))
        return None

    def wants_vote(self, reason: str, first_decision: bool) -> bool | None:
        # a made-up value: the candidates may find the one in the conversation, even after results
        return True if reason == REASON else None

    def retry_numbers(self, history: Sequence[Message]) -> tuple[float, ...] | None:
        """After a misread number, an unwritten one, or a call with no value from the
        conversation (``missing_value``: ``multiply(1, 2)`` for "How many miles is 42
        km?"), the numbers the conversation writes: the retry copies one (a number word,
        "four people", is the model's to read: where no digit is written, numbers stay
        free)."""
        reason = correction_of(history)
        if reason not in NUMBER_REASONS and reason != MISSING_REASON:
            return None
        found = {n for n in digits_in(conversation_text(history)) if n == n}  # nan: not a number
        return tuple(sorted(found)) if 0 < len(found) <= _MAX_NUMBERS else None

    def copied_from(self, history: Sequence[Message]) -> str | None:
        """The user's latest request and the turn's results so far: where a value comes from."""
        texts: list[str] = []
        for msg in reversed(history):
            if isinstance(msg, ToolMessage):
                texts.append(msg.result.content)
            elif isinstance(msg, UserMessage) and msg.correction is None:
                texts.append(msg.content)
                break
        return "\n".join(reversed(texts))


POLICY = GroundingPolicy()
