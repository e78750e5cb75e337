"""The request that carries out one step of a turn's plan: prompt, options and prefill.

:func:`build_request` turns the engine's :class:`~agentfsm.engine.decisions.Plan` into
what the backend is sent: the contract for the plan's dialect and tool choice, the
history projected into prompt messages (a correction's answer-only retry leaves the
turn's refused replies out), the grammar under constrained decoding or the dialect's
opener as prefill, and a sampled redraw where greedy decoding would repeat a refused
reply. :func:`prepare_request` plans and builds in one call, for callers that only need
the next request (the proxy's context fitting, tests). The turn runner
(:mod:`agentfsm.runtime.turn`) is the one that sends it.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentfsm.core._types import EnforcementLevel
from agentfsm.core.backend import Backend, GenerationOptions
from agentfsm.core.choice import ToolChoice
from agentfsm.core.messages import Message, PromptMessage
from agentfsm.dialects import get_dialect
from agentfsm.engine.consensus import TEMPERATURE
from agentfsm.engine.decide import EngineConfig
from agentfsm.engine.decisions import Plan
from agentfsm.engine.plan import plan, policies_of, unasked
from agentfsm.prompt.contract import render_contract
from agentfsm.prompt.enforcement import build_action_schema
from agentfsm.prompt.projection import project_history

__all__ = ["build_request", "prepare_request"]


def build_request(
    history: Sequence[Message], config: EngineConfig, p: Plan, options: GenerationOptions
) -> tuple[list[PromptMessage], GenerationOptions, str]:
    """The prompt, options and prefill that carry out plan ``p``."""
    prefill = ""
    if p.resample and options.temperature == 0:
        # the model wrote a refused reply again: greedy decoding would write it a third time
        options = options.model_copy(update={"temperature": TEMPERATURE, "seed": (options.seed or 0) + len(history)})
    if p.level == "constrained":
        # once the model chose a call (engine.choice.narrow), the grammar drops the answer
        choice = p.tool_choice if p.answers else ToolChoice.REQUIRED
        schema = build_action_schema(p.tools, choice, p.listed, p.compact, config.answer_schema, p.no_slot,
                                     p.max_length, p.numbers)
        options = options.model_copy(update={"json_schema": schema})
    elif p.prefill:
        prefill = get_dialect(config.dialect).opener
        options = options.model_copy(update={"prefill": prefill})
    constrained = p.level == "constrained"
    contract = (
        render_contract(
            config.tools, p.dialect, p.tool_choice, config.parallel, constrained=constrained,
            answer_schema=config.answer_schema,
        )
        if config.tools else None
    )
    # the answer alone after a correction: the grammar asks, the results close with the
    # answer's request, the turn's refused replies and corrections left out
    shown = history if p.corrections == "all" else unasked(history, keep_last=p.corrections == "last")
    prompt = project_history(
        shown, config.tools, dialect=p.dialect, tool_choice=p.tool_choice, parallel=config.parallel,
        contract=contract, sentences=policies_of(config).result_sentences, answer_only=p.corrections != "all",
    )
    return prompt, options, prefill


def prepare_request(
    backend: Backend,
    history: Sequence[Message],
    config: EngineConfig,
    enforcement: EnforcementLevel,
    options: GenerationOptions,
) -> tuple[list[PromptMessage], GenerationOptions, str, str]:
    """The prompt, options, enforcement level and prefill for the next model call."""
    p = plan(history, config, backend.capabilities, enforcement)
    prompt, opts, prefill = build_request(history, config, p, options)
    return prompt, opts, p.level, prefill


