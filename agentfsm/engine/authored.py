"""Who wrote what in a conversation: the runtime's texts, and everyone else's.

:mod:`agentfsm.guards.runtime_text` refuses an answer that copies what the runtime wrote;
this gathers the two sides for it from the history and the turn's settings. The
runtime's: the contract in every form a request of the turn may have carried it (the
configured dialect, and the json-protocol form under constrained decoding), the
corrections sent, and the prompt's framing of tool results. Everyone else's: the user's
messages, the client's system prompts, the tools' names, descriptions and parameters, and
the results themselves, stated plainly (an answer may state them in the words a
correction asks for them in), and the strings of the model's own calls, a refused call's
included, that no correction had written before them (a correction that refuses
``translate_text(text="The sea is wide.")`` quotes the call; an answer that then says
"The sea is wide." is the model's own sentence, not a copy of the correction).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from itertools import zip_longest

from agentfsm.core.choice import ToolChoice
from agentfsm.core.messages import AssistantMessage, Message, SystemMessage, ToolMessage, ToolSpec, UserMessage
from agentfsm.engine.decisions import EngineConfig
from agentfsm.dialects.parse import parse_reply
from agentfsm.guards import runtime_text
from agentfsm.guards._history import argument_strings, calls_and_results
from agentfsm.prompt.contract import render_contract
from agentfsm.prompt.enforcement import CONSTRAINED_DIALECT
from agentfsm.prompt.projection import project_history

__all__ = ["others_texts", "own_values", "runtime_texts"]


def runtime_texts(history: Sequence[Message], config: EngineConfig, choice: ToolChoice) -> list[str]:
    """The texts the runtime wrote into this conversation (see the module)."""
    texts = [m.content for m in history if isinstance(m, UserMessage) and m.correction]
    if config.tools:
        texts.append(render_contract(config.tools, config.dialect, choice, config.parallel))
        texts.append(render_contract(config.tools, CONSTRAINED_DIALECT, choice, config.parallel, constrained=True))
    if any(isinstance(m, ToolMessage) for m in history):
        written = {m.content for m in history if isinstance(m, UserMessage | SystemMessage | AssistantMessage)}
        # the results as framed for a call or an answer, and for the answer alone (a retry
        # whose grammar asks for it: engine.plan.unasked)
        for answer_only in (False, True):
            prompt = project_history(history, config.tools, dialect=config.dialect, tool_choice=choice,
                                     parallel=config.parallel, contract="", answer_only=answer_only)
            texts += [m.content for m in prompt if m.role != "assistant" and m.content not in written]
    return texts


def others_texts(history: Sequence[Message], config: EngineConfig) -> list[str]:
    """What the user, the client and the tools wrote (see the module)."""
    texts: list[str] = []
    for m in history:
        if isinstance(m, UserMessage) and m.correction is None or isinstance(m, SystemMessage):
            texts.append(m.content)
        elif isinstance(m, ToolMessage):
            texts.append(m.result.content)
    for tool in config.tools:
        texts += [tool.name, tool.description or "", json.dumps(tool.parameters, ensure_ascii=False)]
    # the results stated plainly ("The result of multiply is 50.0."), as a correction shows
    # them to be stated: an answer that states them so is the model's answer
    texts += calls_and_results(history)[1]
    return texts + own_values(history, config.tools)


def own_values(history: Sequence[Message], tools: Sequence[ToolSpec]) -> list[str]:
    """The strings of the model's own calls (read from each reply in any action format, a
    refused reply's included) that no correction before them had written, but for a
    reply refused for copying the runtime's text: its words, not the runtime's."""
    corrections: list[str] = []
    own: list[str] = []
    for m, after in zip_longest(history, history[1:]):  # the last message has none after it
        if isinstance(m, UserMessage) and m.correction:
            corrections.append(m.content)
        if not isinstance(m, AssistantMessage) or (
            isinstance(after, UserMessage) and after.correction == runtime_text.REASON
        ):
            continue
        calls = [*m.tool_calls, *parse_reply(m.content or "", tools).tool_calls]
        own += [v for c in calls for v in argument_strings(c.arguments) if not any(v in t for t in corrections)]
    return own
