"""The model calls a turn makes beside its attempts, and what every model call needs.

- :func:`extend`: the extension step of a parallel turn (:mod:`agentfsm.prompt.extension`),
  after a reply that is exactly one clean call;
- :func:`vote`: consensus after a refused first decision of a user turn
  (:mod:`agentfsm.engine.consensus`), once per turn: the same request drawn ``config.consensus`` more times at a sampling temperature, each
  candidate decided by the engine as the refused reply was, the accepted decision most
  candidates agree on taken. Candidates are part of the attempt they follow (they do not
  count against ``max_steps``); each is written as a ``model_request`` / ``model_output``
  pair numbered ``candidate``, and the outcome as a ``consensus`` guard verdict, so a
  replay serves them back in order and decides the same;
- :func:`decide`: the engine's decision on a reply, in a worker thread when the reply is
  long (attempts and candidates alike: parsing and validating it must not hold the loop);
- :func:`bounded` (a wait bounded by a deadline) and :func:`usage_of` (usage, estimated
  where the backend reports none);
- :func:`record_cut`: a streamed call's text so far, when the call ends before the model
  did (its client left, the run was cancelled or failed).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from typing import TypeVar

from agentfsm.core.backend import Backend, GenerationOptions, Usage, estimate_tokens
from agentfsm.engine.consensus import TEMPERATURE, choose, settled
from agentfsm.engine.decisions import Decision, EngineConfig, Plan
from agentfsm.engine.decide import conversation_text, step
from agentfsm.engine.plan import policies_of
from agentfsm.core.errors import BackendTimeout
from agentfsm.core.events import GuardEvent, ModelOutputEvent, ModelRequestEvent
from agentfsm.core.messages import AssistantMessage, Message, PromptMessage
from agentfsm.guards._history import turn as turn_of
from agentfsm.dialects import get_dialect
from agentfsm.dialects.parse import parse_reply
from agentfsm.prompt.enforcement import CONSTRAINED_DIALECT
from agentfsm.prompt.extension import extension_options, read_extension
from agentfsm.runtime.recorder import Recorder
from agentfsm.runtime.tally import Tally

__all__ = ["CUT", "OFF_LOOP_CHARS", "bounded", "decide", "extend", "record_cut", "usage_of", "vote"]

#: replies at least this long are decided (parsed, guarded, validated) in a worker thread
OFF_LOOP_CHARS = 16_384
#: the fewest tokens a consensus candidate may use (more when the refused reply was longer)
CANDIDATE_TOKENS = 96
_T = TypeVar("_T")


async def bounded(work: Awaitable[_T], deadline: float | None) -> _T:
    """``work``, bounded by the event-loop time ``deadline`` (BackendTimeout past it)."""
    if deadline is None:
        return await work
    try:
        async with asyncio.timeout_at(deadline):
            return await work
    except TimeoutError as exc:
        raise BackendTimeout("the request did not finish within the proxy's request timeout") from exc


async def decide(history: Sequence[Message], text: str, config: EngineConfig, finish_reason: str) -> Decision:
    """The engine's decision on ``text``; off the event loop for a long reply (``history``
    is not changed while the turn awaits it)."""
    if len(text) < OFF_LOOP_CHARS:
        return step(history, text, config, finish_reason)
    return await asyncio.to_thread(step, history, text, config, finish_reason)


def usage_of(reported: Usage | None, prompt: Sequence[PromptMessage], text: str) -> Usage:
    """The backend's usage for one call; estimated where it reported none."""
    if reported is not None and reported.total_tokens:
        return reported
    return Usage(
        prompt_tokens=sum(estimate_tokens(m.content) for m in prompt),
        completion_tokens=estimate_tokens(text),
    )


#: the ``finish_reason`` of a streamed call cut off before the model finished
CUT = "cut"


def record_cut(recorder: Recorder, tally: Tally, prompt: Sequence[PromptMessage], parts: Sequence[str],
               prefill: str = "", max_tokens_sent: int | None = None) -> None:
    """A streamed call that ended before the model did: the text that had arrived
    (``parts``, after the ``prefill`` it starts with) as a ``model_output`` marked ``cut``
    (with the ``max_tokens`` the backend sent, where it lowered the one asked), its tokens
    (estimated: a cut stream reports none) charged on ``tally``; not a call answered.
    Nothing when no text had arrived."""
    text = "".join(parts)
    if len(text) <= len(prefill):
        return
    used = usage_of(None, prompt, text[len(prefill):])
    tally.charge(used)
    recorder.emit(ModelOutputEvent, text=text, usage=used, finish_reason=CUT, cut=True, max_tokens_sent=max_tokens_sent)


async def extend(
    backend: Backend,
    history: Sequence[Message],
    prompt: list[PromptMessage],
    options: GenerationOptions,
    config: EngineConfig,
    p: Plan,
    text: str,
    attempt: int,
    recorder: Recorder,
    deadline: float | None,
) -> tuple[str, Usage | None]:
    """The extension step of a parallel turn (:mod:`agentfsm.prompt.extension`): after a
    reply that is exactly one clean call, let the model list more (unless nothing is left
    to list in ``history``: :func:`~agentfsm.prompt.extension.nothing_to_list`). Returns the reply
    the engine sees (the list of calls kept, or ``text`` unchanged) and the step's usage
    (None when no model call was made)."""
    parsed = parse_reply(text, config.tools, CONSTRAINED_DIALECT)
    if len(parsed.tool_calls) != 1 or parsed.rejected or parsed.truncated:
        return text, None
    first = parsed.tool_calls[0]
    earlier = [c for m in turn_of(history) if isinstance(m, AssistantMessage) for c in m.tool_calls]
    opts = extension_options(options, first, p.tools, p.tool_choice, conversation_text(history), earlier,
                             copy_from=policies_of(config).copied_from(history))
    if opts is None:
        return text, None
    recorder.emit(
        ModelRequestEvent, attempt=attempt, messages=tuple(prompt), options=opts, enforcement="constrained",
        extension=True,
    )
    completion = await bounded(backend.acomplete(prompt, opts), deadline)
    usage = usage_of(completion.usage, prompt, completion.text)
    recorder.emit(
        ModelOutputEvent, text=(opts.prefill or "") + completion.text, usage=usage,
        finish_reason=completion.finish_reason, extension=True, max_tokens_sent=completion.max_tokens_sent,
    )
    calls = read_extension(first, completion.text)
    if len(calls) == 1:
        return text, usage
    return get_dialect(CONSTRAINED_DIALECT).render_calls(calls), usage


async def vote(
    backend: Backend,
    prompt: list[PromptMessage],
    options: GenerationOptions,
    prefill: str,
    history: Sequence[Message],
    refused: Decision,
    refused_tokens: int,
    config: EngineConfig,
    level: str,
    attempt: int,
    recorder: Recorder,
    deadline: float | None,
    tally: Tally,
) -> tuple[Decision | None, Usage]:
    """Consensus after a refused reply: the accepted candidate decision most candidates
    agree on (None when the engine accepts none), and the candidates' usage (each
    candidate is counted and charged on ``tally`` as it answers)."""
    decisions: list[Decision] = [refused]
    usage = Usage()
    first_seed = options.seed or 0
    # a candidate as long as the refused reply, with room: one that rambles on is cut, not waited for
    limit = max(CANDIDATE_TOKENS, 2 * refused_tokens)
    if options.max_tokens is not None:
        limit = min(options.max_tokens, limit)
    conversation = conversation_text(history)
    for number in range(1, config.consensus + 1):
        opts = options.model_copy(
            update={"temperature": TEMPERATURE, "seed": first_seed + number, "max_tokens": limit}
        )
        recorder.emit(
            ModelRequestEvent, attempt=attempt, messages=tuple(prompt), options=opts, enforcement=level,
            candidate=number,
        )
        completion = await bounded(backend.acomplete(prompt, opts), deadline)
        tally.model_calls += 1
        used = usage_of(completion.usage, prompt, completion.text)
        tally.charge(used)
        usage += used
        text = prefill + completion.text
        recorder.emit(
            ModelOutputEvent, text=text, usage=used, finish_reason=completion.finish_reason, candidate=number,
            max_tokens_sent=completion.max_tokens_sent,
        )
        decisions.append(await decide(history, text, config, completion.finish_reason))
        if settled(decisions, config.consensus - number, conversation):
            break  # the candidates left could not change the pick
    chosen = choose(decisions, conversation)
    drawn = len(decisions) - 1
    if chosen is None:
        recorder.emit(
            GuardEvent, guard="consensus", verdict="correct", reason="no_consensus",
            detail=f"the engine accepted none of {drawn} candidates",
        )
        tally.guarded("consensus")
        return None, usage
    recorder.emit(
        GuardEvent, guard="consensus", verdict="accept", reason="consensus",
        detail=(
            f"candidate {chosen.index}: {chosen.votes} of {chosen.voters} accepted candidates "
            f"({drawn} drawn) agree: {chosen.signature}"
        ),
    )
    return decisions[chosen.index], usage
