"""Parallel calls by extension: one call first, then the model may list more.

A weak model asked for "one action or a list of actions" in one grammar degrades: once
it opens a list its values turn into placeholders, and it repeats items until the
token limit (on BFCL simple cases, SmolLM2-135M drops from 80 % to 47 %). So where the
backend can continue an open list under a grammar
(:attr:`~agentfsm.core.backend.Capabilities.list_continuation`), a parallel turn is
decoded in two steps:

1. the reply is constrained to a single action (or the final answer), as in a
   serial turn;
2. when it is one call, the model continues ``{"action": [<that call>`` under a
   grammar that allows up to :data:`MAX_EXTRA_CALLS` more calls *of the same tool*
   and then ``]}``.

Only the same tool: one tool fanned out over several inputs ("the weather in Paris
and in Rome") is the parallel pattern; calls to different tools are more often steps
of a chain, whose inputs come from the earlier results (a small model offered every
tool lists the whole chain at once, with guessed inputs).

The list ends at the first item that repeats an earlier call (same tool, same
arguments) or cannot be read: a repeat is how a small model says it has nothing more.
The step is skipped where nothing is left to list (:func:`nothing_to_list`): a tool that
takes only numbers, called with every number of the conversation, can only be called
again with the same numbers or made-up ones.
The accepted reply is the list of calls kept, in the json-protocol format.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentfsm.core.choice import ToolChoice
from agentfsm.core.backend import GenerationOptions, ListContinuation
from agentfsm.core.numbers import digits_in, same
from agentfsm.dialects._json import DECODER, JSON_WS
from agentfsm.dialects._render import dumps
from agentfsm.prompt.enforcement import action_item_schema
from agentfsm.core.messages import ToolCall, ToolSpec

__all__ = ["CLOSE", "MAX_EXTRA_CALLS", "extension_options", "extension_prefill", "nothing_to_list", "read_extension"]

#: the most calls the extension step may add to the first one
MAX_EXTRA_CALLS = 3
#: what closes the list and the reply object
CLOSE = "]}"


def extension_prefill(call: ToolCall) -> str:
    """The open list the model continues: ``{"action": [<call>``."""
    return '{"action": [' + dumps({"tool": call.name, "args": call.arguments})


def nothing_to_list(call: ToolCall, tool: ToolSpec, conversation: str, earlier: Sequence[ToolCall] = ()) -> bool:
    """Whether another call of ``tool`` could only repeat ``call`` or make its values up:
    every parameter of the tool takes a number or a boolean, and every number the
    ``conversation`` writes in digits is one of the call's or of the ``earlier`` calls of
    the turn (a chain's step after ``multiply(12.5, 4)`` is ``convert(50.0)``: 12.5 and 4
    are spent). Digits only, read alike in every language; any other parameter (a string,
    an enum of strings, a list) says nothing, and the list is extended."""
    props = tool.parameters.get("properties")
    if not isinstance(props, dict) or not all(isinstance(p, dict) and _numeric(p) for p in props.values()):
        return False
    used = [n for c in (call, *earlier) for v in c.arguments.values() if (n := _number(v)) is not None]
    return all(any(same(n, u) for u in used) for n in digits_in(conversation))


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _numeric(schema: dict[str, object]) -> bool:
    """A parameter whose values are numbers or booleans (an enum of them included); an
    enum of strings is words the request may name ("pizza and a burger")."""
    enum = schema.get("enum")
    members = enum if isinstance(enum, list) else [schema["const"]] if "const" in schema else None
    if members is not None:
        return all(isinstance(m, int | float) for m in members)  # bool is an int
    return schema.get("type") in ("number", "integer", "boolean")


def extension_options(
    options: GenerationOptions,
    call: ToolCall,
    tools: Sequence[ToolSpec],
    tool_choice: ToolChoice,
    conversation: str | None = None,
    earlier: Sequence[ToolCall] = (),
) -> GenerationOptions | None:
    """The options of the extension step after ``call``: more calls of ``call``'s tool,
    if ``tools`` offers it and, where ``conversation`` (the text a call's values come
    from) is given, something is left to list after the ``earlier`` calls of the turn
    (:func:`nothing_to_list`); else ``None``."""
    offered = [t for t in tools if t.name == call.name]
    if conversation is not None and offered and nothing_to_list(call, offered[0], conversation, earlier):
        return None
    item = action_item_schema(offered, tool_choice)
    if item is None:
        return None
    prefill = extension_prefill(call)
    # the list ends at the first repeat (read_extension): a repeat of the first call, as
    # the prefill wrote it, ends the generation there (greedy, the items before it are
    # the same; a small model often repeats the call to the token limit)
    first = dumps({"tool": call.name, "args": call.arguments})
    stop = (*options.stop, f",{first}", f", {first}")
    # room for each further item to be twice as long as the first (about 3 characters
    # a token): a list the model fills with runaway values is cut early
    bound = max(64, 2 * MAX_EXTRA_CALLS * (len(prefill) - len('{"action": [')) // 3)
    return options.model_copy(
        update={
            "json_schema": None,
            "max_tokens": bound if options.max_tokens is None else min(options.max_tokens, bound),
            "prefill": prefill,
            "stop": stop,
            "list_continuation": ListContinuation(item_schema=item, max_items=MAX_EXTRA_CALLS, close=CLOSE),
        }
    )


def read_extension(first: ToolCall, continuation: str) -> list[ToolCall]:
    """The calls of an extended list: ``first``, then each further item up to the first
    repeat, the first unreadable item, or the end of the list.

    ``continuation`` is the text after the prefill (``, {...}, {...}]}``); a reply cut
    by the token limit keeps the items completed before the cut.
    """
    calls = [first]
    seen = [(first.name, first.arguments)]
    pos = 0
    while len(calls) <= MAX_EXTRA_CALLS:
        pos = _skip_space(continuation, pos)
        if not continuation.startswith(",", pos):
            break
        try:
            item, pos = DECODER.raw_decode(continuation, _skip_space(continuation, pos + 1))
        except ValueError:
            break
        if not isinstance(item, dict) or not isinstance(item.get("tool"), str):
            break
        args = item.get("args")
        key = (item["tool"], args if isinstance(args, dict) else {})
        if key in seen:
            break
        seen.append(key)
        calls.append(ToolCall(id=f"call_{len(calls)}", name=key[0], arguments=key[1]))
    return calls


def _skip_space(text: str, pos: int) -> int:
    return JSON_WS.match(text, pos).end()  # type: ignore[union-attr]
