"""The Responses API's ``tool_choice``: a keyword, a function or custom tool, an
``allowed_tools`` list, or one of the request's hosted tools.

The hosted tools (``web_search_preview``, ``mcp`` ...) are not offered here (the request
reads them as ignored), so a choice that requires a call of them only, forcing one or
allowing only them in ``required`` mode, is read as ``none`` and reported
(:func:`requires_only_hosted`). A choice naming a tool the request does not offer is a
400, as OpenAI answers it.

Pure code: no IO.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentfsm.core.choice import ToolChoice
from agentfsm.core.errors import RequestError
from agentfsm.core.messages import ToolSpec
from agentfsm.protocols._fields import choice_keyword, chosen_tool, req_list, req_mapping, req_str
from agentfsm.protocols.responses_items import CLIENT_TOOL_TYPES

__all__ = ["hosted_types", "read_tool_choice", "requires_only_hosted"]


def read_tool_choice(
    raw: Any, tools: tuple[ToolSpec, ...], hosted: frozenset[str]
) -> tuple[ToolChoice, tuple[ToolSpec, ...]]:
    """The normalized choice, and the tools (narrowed by an ``allowed_tools`` choice);
    ``hosted``: the types of the request's hosted tools (:func:`hosted_types`)."""
    if raw is None:
        return (ToolChoice.AUTO if tools else ToolChoice.NONE), tools
    if isinstance(raw, str):
        keyword = choice_keyword(raw, tools, needs="function tools")
        return (keyword if tools else ToolChoice.NONE), tools
    choice = req_mapping(raw, "tool_choice")
    kind = choice.get("type")
    if kind in CLIENT_TOOL_TYPES:
        name = req_str(choice.get("name"), "tool_choice.name")
        return chosen_tool(name, tools, among="function and custom tools"), tools
    if kind == "allowed_tools":
        mode = choice.get("mode", "auto")
        if mode not in ("auto", "required"):
            raise RequestError(
                f"tool_choice.mode must be 'auto' or 'required'; got {mode!r}", param="tool_choice"
            )
        names = [t.name for t in tools]
        wanted: list[str] = []
        for i, item in enumerate(req_list(choice.get("tools"), "tool_choice.tools")):
            where = f"tool_choice.tools[{i}]"
            entry = req_mapping(item, where)
            if entry.get("type", "function") not in CLIENT_TOOL_TYPES:
                continue  # a hosted tool: ignored like the tool itself
            name = req_str(entry.get("name"), f"{where}.name")
            if name not in names:  # as chat completions answers it
                raise RequestError(f"{where} names {name!r}, which is not among the tools", param="tool_choice")
            wanted.append(name)
        kept = tuple(t for t in tools if t.name in wanted)
        # nothing allowed but hosted tools: nothing may be called now (the tools stay for the history)
        return (ToolChoice.parse(mode), kept) if kept else (ToolChoice.NONE, tools)
    if kind in hosted:  # forces one of the request's hosted tools, which are not offered
        return ToolChoice.NONE, tools
    raise RequestError(
        f"tool_choice type {kind!r} is not supported (only function tools)", param="tool_choice"
    )


def hosted_types(raw: Any) -> frozenset[str]:
    """The types of the request's hosted tools (``web_search_preview``, ``mcp`` ...)."""
    kinds = (t.get("type") for t in raw if isinstance(t, Mapping)) if isinstance(raw, list) else ()
    return frozenset(k for k in kinds if isinstance(k, str) and k not in (*CLIENT_TOOL_TYPES, "namespace"))


def requires_only_hosted(raw: Any, choice: ToolChoice) -> bool:
    """A choice that requires a call of hosted tools only (one forced, or only they allowed
    in ``required`` mode), read as ``none``: the requirement is not honoured."""
    if not isinstance(raw, Mapping) or choice != ToolChoice.NONE:
        return False
    return raw.get("type") != "allowed_tools" or raw.get("mode") == "required"
