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

Where a policy says the values are copied from a text (``copy_from``: grounding's rule, a
call takes its values from the conversation), a further call's strings are held to that
text's stretches of whole words (:func:`copy_spans`) or the first call's own value: a
small model that writes "Paris" right writes "Tokio" as "Tko" or "Otosio", and the list
is refused for it. Its numbers are held to the numbers that text writes in digits, or
the first call's own: a list of ``convert(50)`` went on with ``convert(1.5)``.
Characters, digits and white space only: no language is read.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import Any

from agentfsm.core.choice import ToolChoice
from agentfsm.core.backend import GenerationOptions, ListContinuation
from agentfsm.core.numbers import digits_in, same
from agentfsm.core.words import spaceless
from agentfsm.dialects._json import DECODER, JSON_WS
from agentfsm.dialects._render import dumps
from agentfsm.prompt.enforcement import action_item_schema
from agentfsm.core.messages import ToolCall, ToolSpec

__all__ = [
    "CLOSE",
    "MAX_EXTRA_CALLS",
    "MAX_SPANS",
    "SPAN_WORDS",
    "copy_spans",
    "extension_options",
    "extension_prefill",
    "nothing_to_list",
    "read_extension",
]

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


#: the most words a copied stretch holds ("Rio de Janeiro", "New York City")
SPAN_WORDS = 4
#: a text with more stretches than this is not held to them (its grammar would be large)
MAX_SPANS = 400
_WORD = re.compile(r"\S+")


def _edge(c: str) -> bool:
    return unicodedata.category(c).startswith("P")


def copy_spans(text: str) -> tuple[str, ...]:
    """The stretches of ``text`` a copied value can be: runs of 1 to :data:`SPAN_WORDS`
    whole words (split at white space, punctuation at a run's two ends left out), first
    seen first, each once. Empty where no stretch can be told apart (no word, a script
    written without spaces) or there are more than :data:`MAX_SPANS`."""
    if spaceless(text):
        return ()
    words: list[tuple[int, int]] = []
    for m in _WORD.finditer(text):
        start, end = m.start(), m.end()
        while start < end and _edge(text[start]):
            start += 1
        while end > start and _edge(text[end - 1]):
            end -= 1
        if start < end:
            words.append((start, end))
    runs = (text[words[i][0] : words[j][1]] for i in range(len(words)) for j in range(i, min(i + SPAN_WORDS, len(words))))
    spans = dict.fromkeys(r for r in runs if _copyable(r))
    return tuple(spans) if len(spans) <= MAX_SPANS else ()


def _copyable(value: str) -> bool:
    """No quote, backslash or control character: llama.cpp's converter writes an enum's
    JSON text into the grammar without escaping a backslash again (a grammar that would
    reject the JSON)."""
    return '"' not in value and "\\" not in value and value.isprintable()


def _held_to_copies(args: Any, spans: Sequence[str], numbers: Sequence[float], call: ToolCall) -> Any:
    """``args`` (the arguments' grammar schema) with each free string parameter (and each
    list of free strings) held to ``spans`` or ``call``'s own value for it, and each free
    number to ``numbers`` or its own value (an integer to the whole ones)."""
    props = args.get("properties") if isinstance(args, dict) else None
    if not isinstance(props, dict):
        return args

    def held(schema: Any, own: Any) -> Any:
        if not isinstance(schema, dict) or "enum" in schema or "const" in schema:
            return schema
        if schema.get("type") == "string" and spans:
            values = dict.fromkeys([*spans, *([own] if isinstance(own, str) and _copyable(own) else [])])
            return {"enum": list(values)}
        kind = schema.get("type")
        if kind in ("number", "integer") and numbers:
            mine = [float(own)] if isinstance(own, int | float) and not isinstance(own, bool) else []
            fits = [n for n in dict.fromkeys([*numbers, *mine]) if kind == "number" or n.is_integer()]
            return {"enum": [int(n) if n.is_integer() else n for n in fits]} if fits else schema
        if schema.get("type") == "array":
            return {**schema, "items": held(schema.get("items"), None)}
        return schema

    return {**args, "properties": {name: held(schema, call.arguments.get(name)) for name, schema in props.items()}}


def extension_options(
    options: GenerationOptions,
    call: ToolCall,
    tools: Sequence[ToolSpec],
    tool_choice: ToolChoice,
    conversation: str | None = None,
    earlier: Sequence[ToolCall] = (),
    copy_from: str | None = None,
) -> GenerationOptions | None:
    """The options of the extension step after ``call``: more calls of ``call``'s tool,
    if ``tools`` offers it and, where ``conversation`` (the text a call's values come
    from) is given, something is left to list after the ``earlier`` calls of the turn
    (:func:`nothing_to_list`); else ``None``. With ``copy_from``, a further call's
    strings are that text's stretches (:func:`copy_spans`) or ``call``'s own."""
    offered = [t for t in tools if t.name == call.name]
    if conversation is not None and offered and nothing_to_list(call, offered[0], conversation, earlier):
        return None
    item = action_item_schema(offered, tool_choice)
    if item is None:
        return None
    spans = copy_spans(copy_from) if copy_from is not None else ()
    numbers = sorted(n for n in digits_in(copy_from) if n == n)[:MAX_SPANS] if copy_from is not None else []
    if spans or numbers:
        props = item["properties"]
        item = {**item, "properties": {**props, "args": _held_to_copies(props["args"], spans, numbers, call)}}
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
