"""Parser chaos: fuzzed replies in every dialect and native format, parsed whole and streamed.

:func:`run` generates ``n`` replies from a seed: prose around one to three actions in
any format the parser reads (``json action`` and ``json`` fences, json-protocol objects
and action lists, ``@tool`` lines, smiley blocks, Hermes ``<tool_call>``, Mistral
``[TOOL_CALLS]`` both ways, Llama bare objects and arrays, pythonic lists, XML
``<function=...>`` with and without its wrapper: without it, it is text and holds no call). Argument strings hold the closers of
every format, actions copied from tool results, quotes, backslashes, ``\\u`` text and
raw control characters; some JSON is written with raw newlines inside its strings;
some arguments and ``{"final": ...}`` replies nest deeply. A reply may be cut at a
random point (the reply ends there) or cut inside an action whose closer then follows
(every format with a closer but XML, see ``_CLOSERS``).
Each reply is parsed whole and by a :class:`~agentfsm.dialects.stream.StreamParser`
fed random chunks (str or UTF-8 bytes), and counted:

- ``untyped_exceptions``: anything raised while parsing or serialising the result;
- ``calls_from_cut_input``: in a cut reply, a call that is not one of the actions
  written in full before the cut;
- ``calls_with_unwritten_arguments``: in a reply not cut, a call (name and arguments)
  that the generator did not write;
- ``stream_vs_whole_differences``: the streamed result (or its call events) differs
  from the whole-text parse;
- ``inputs``: replies generated.

Every count but ``inputs`` should be 0. ``python bench/chaos_parser.py N SEED`` prints them.
"""

from __future__ import annotations

import json
import random
import re
import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from agentfsm.core.messages import ToolSpec
from agentfsm.dialects.parse import parse_reply
from agentfsm.dialects.stream import StreamParser, ToolCallDelta

__all__ = ["COUNTS", "run"]

#: the counts :func:`run` returns, in order
COUNTS = (
    "inputs",
    "untyped_exceptions",
    "calls_from_cut_input",
    "calls_with_unwritten_arguments",
    "stream_vs_whole_differences",
)
S = "\U0001f60a"
D = S * 14
F = "```"
_NASTY = [
    F, f"\n{F}\n", f"{F}json action\n", f"\n{F}json\n", "</tool_call>", "<tool_call>", D, D + "\n",
    "[TOOL_CALLS]", "[/TOOL_CALLS]", "[ARGS]", "</function>", "<function=delete_all>", "<parameter=x>",
    "@tool delete_all {}", "\n@tool delete_all {}\n", '{"name": "delete_all", "arguments": {}}',
    '{"tool": "delete_all", "parameters": {}}', '{"final": "x"}', "[delete_all()]", '"', "\\", "\\u00",
    "\\u", "\\n", "\n", "\t", "\r", "\x00", "\x1f", "\x7f", "\u2028", "é", "\u201c", "\u201d", "'",
    "}", "]", "{", "[", ":", ",", "😊", " ", "caf\u00e9",
]  # fmt: skip
_WORDS = ["the", "weather", "is", "fine", "Paris", "ok", "42", "note", "file", "done", "a-b", "x_y"]
_PROSE = [
    "Sure, let me check.", "Done.", "I will call a tool.", "Here is the plan:", "`inline code`",
    "{x}", "[1, 2]", "me@tool x", f"{S * 3}", "<b>bold</b>", "```python\nprint(1)\n```",
    "Values: {a: 1}.", "(see [note])", "- item", "1. step",
    # fence info strings of 63 to 65 characters: the body is text, whatever it holds
    *(f"```{'i' * k}x\n@tool delete_all {{}}\n```" for k in (62, 63, 64)),
]  # fmt: skip
_KEYS = ["city", "path", "text", "n", "flag", "items", "opts", "unit", "q", "value"]


def _string(rnd: random.Random, nasty: bool) -> str:
    parts = []
    for _ in range(rnd.randint(0, 6)):
        parts.append(rnd.choice(_NASTY) if nasty and rnd.random() < 0.5 else rnd.choice(_WORDS))
    return " ".join(parts) if rnd.random() < 0.5 else "".join(parts)


def _value(rnd: random.Random, depth: int, nasty: bool) -> Any:
    r = rnd.random()
    if depth > 2 or r < 0.45:
        return _string(rnd, nasty)
    if r < 0.6:
        return rnd.randint(-(10**12), 10**12)
    if r < 0.68:
        return rnd.choice([True, False])
    if r < 0.73:
        return rnd.choice([0.5, -2.25, 1e-7, 3.0e20])
    if r < 0.76:
        return None
    if r < 0.88:
        return [_value(rnd, depth + 1, nasty) for _ in range(rnd.randint(0, 3))]
    return {rnd.choice(_KEYS): _value(rnd, depth + 1, nasty) for _ in range(rnd.randint(0, 3))}


def _deep(rnd: random.Random) -> Any:
    value: Any = rnd.randint(0, 9)
    for _ in range(rnd.choice([100, 127, 129, 200, 600, 900])):
        value = [value] if rnd.random() < 0.5 else {"k": value}
    return value


def _schema(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, int):
        return {"type": "integer"}
    if isinstance(value, float):
        return {"type": "number"}
    if isinstance(value, str):
        return {"type": "string"}
    if isinstance(value, list):
        return {"type": "array"}
    if isinstance(value, dict):
        return {"type": "object"}
    return {"type": "null"}


_ESCAPES = re.compile(r"\\(.)")


def _dumps(value: Any, raw: bool) -> str:
    """JSON text; with ``raw``, newlines and tabs inside strings written raw (as models do)."""
    text = json.dumps(value, ensure_ascii=False)
    if not raw:
        return text
    return _ESCAPES.sub(lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(0)), text)


Call = tuple[str, dict[str, Any]]


def _one(fmt: str, calls: list[Call], raw: bool) -> str:
    """The action text of ``calls`` in ``fmt`` (formats that hold one call take the first)."""
    name, args = calls[0]
    if fmt == "fence":
        return f"{F}json action\n{_dumps({'tool': name, 'parameters': args}, raw)}\n{F}"
    if fmt == "fence-json":
        return f"{F}json\n{_dumps({'name': name, 'arguments': args}, raw)}\n{F}"
    if fmt == "protocol":
        return _dumps({"thought": "t", "action": {"tool": name, "args": args}}, raw)
    if fmt == "protocol-list":
        return _dumps({"action": [{"tool": n, "args": a} for n, a in calls]}, raw)
    if fmt == "command":
        return f"@tool {name} {_dumps(args, raw)}"
    if fmt == "smiley":
        return f"{D}\n{_dumps({'name': name, 'arguments': args}, raw)}\n{D}"
    if fmt == "hermes":
        return f"<tool_call>{_dumps({'name': name, 'arguments': args}, raw)}</tool_call>"
    if fmt == "mistral":
        return "[TOOL_CALLS]" + _dumps([{"name": n, "arguments": a} for n, a in calls], raw)
    if fmt == "mistral-named":
        return f"[TOOL_CALLS]{name}[ARGS]{_dumps(args, raw)}"
    if fmt == "llama":
        return _dumps({"name": name, "parameters": args}, raw)
    if fmt == "array":
        return _dumps([{"name": n, "arguments": a} for n, a in calls], raw)
    if fmt == "pythonic":
        inner = ", ".join(f"{n}({', '.join(f'{k}={v!r}' for k, v in a.items())})" for n, a in calls)
        return f"[{inner}]"
    params = "".join(
        f"<parameter={k}>\n{v if isinstance(v, str) else json.dumps(v)}\n</parameter>\n" for k, v in args.items()
    )
    body = f"<function={name}>\n{params}</function>"
    return f"<tool_call>\n{body}\n</tool_call>" if fmt == "xml-wrapped" else body


_FORMATS = [
    "fence", "fence-json", "protocol", "protocol-list", "command", "smiley", "hermes", "mistral",
    "mistral-named", "llama", "array", "pythonic", "xml", "xml-wrapped",
]  # fmt: skip
_MULTI = {"protocol-list", "mistral", "array", "pythonic"}
#: the closers written after a cut inside an action's payload. Not XML: its calls carry no
#: redundancy that tells a call cut then closed from a shorter one (``<function=f>`` then
#: ``</function>`` is a whole call, and a value is raw text up to ``</parameter>``); XML
#: replies are still cut at random points like every other format.
_CLOSERS = {"fence": "\n" + F, "fence-json": "\n" + F, "smiley": "\n" + D, "hermes": "</tool_call>"}


def _args(rnd: random.Random, fmt: str) -> dict[str, Any]:
    nasty = rnd.random() < 0.7
    args = {rnd.choice(_KEYS): _value(rnd, 0, nasty) for _ in range(rnd.randint(0, 4))}
    if fmt.startswith("xml"):
        # XML values are raw text: one newline each side is layout, and </parameter> ends them
        for k, v in args.items():
            if isinstance(v, str):
                args[k] = v.replace("</parameter>", "").strip("\n")
    elif fmt != "pythonic" and rnd.random() < 0.03:
        args["deep"] = _deep(rnd)
    return args


Action = tuple[int, int, list[Call], str]


def _reply(rnd: random.Random) -> tuple[str, list[Action], list[ToolSpec]]:
    """Text, each action's ``(start, end, calls, format)``, and the tools offered."""
    parts: list[str] = []
    actions: list[Action] = []
    tools: list[ToolSpec] = []
    pos = 0

    def add(text: str) -> None:
        nonlocal pos
        parts.append(text)
        pos += len(text)

    for a in range(rnd.randint(1, 3)):
        if rnd.random() < 0.7:
            add(rnd.choice(_PROSE))
        add("\n")
        fmt = rnd.choice(_FORMATS)
        calls: list[Call] = []
        for c in range(rnd.randint(2, 3) if fmt in _MULTI and rnd.random() < 0.5 else 1):
            name = f"tool_{a}_{c}"
            args = _args(rnd, fmt)
            props = {k: _schema(v) for k, v in args.items()}
            tools.append(ToolSpec(name=name, parameters={"type": "object", "properties": props}))
            calls.append((name, args))
        raw = fmt not in ("pythonic",) and not fmt.startswith("xml") and rnd.random() < 0.25
        text = _one(fmt, calls, raw)
        # a bare <function=...> is text (XML is read only in its wrapped, well-formed block)
        actions.append((pos, pos + len(text), [] if fmt == "xml" else calls, fmt))
        add(text)
        add("\n")
    if rnd.random() < 0.5:
        add(rnd.choice(_PROSE))
    return "".join(parts), actions, tools


def _canon(name: str, args: Any) -> str:
    return json.dumps([name, args], sort_keys=True, ensure_ascii=False)


_FENCES = re.compile(F)


def _chunks(rnd: random.Random, text: str) -> list[str | bytes]:
    if len(text) < 200 and rnd.random() < 0.1:
        return list(text)
    cuts = [rnd.randint(0, len(text)) for _ in range(rnd.randint(1, 20))]
    if rnd.random() < 0.3:  # chunks that end right after a long fence info string
        cuts += [m.end() + k for m in _FENCES.finditer(text) for k in (63, 64, 65) if m.end() + k <= len(text)]
    cuts.sort()
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    if rnd.random() < 0.3:
        data = text.encode("utf-8")
        bcuts = sorted(rnd.randint(0, len(data)) for _ in range(rnd.randint(1, 20)))
        return [data[a:b] for a, b in zip([0, *bcuts], [*bcuts, len(data)], strict=True)]
    return list(pieces)


def _case(rnd: random.Random) -> tuple[str, list[ToolSpec] | None, list[str], bool]:
    """One input: its text, tools, the calls written in full (canonical), whether it was cut."""
    if rnd.random() < 0.01:
        depth = rnd.choice([120, 129, 500, 990, 1000, 1500, 5000])
        return '{"final": ' * depth + '"x"' + "}" * depth, None, [], False
    text, actions, tools = _reply(rnd)
    written = [_canon(n, a) for _, _, calls, _ in actions for n, a in calls]
    r = rnd.random()
    if r < 0.35:  # the reply ends at a random point
        cut = rnd.randint(0, len(text))
        kept = [_canon(n, a) for _, e, calls, _ in actions if e <= cut for n, a in calls]
        return text[:cut], tools, kept, True
    k = rnd.randrange(len(actions))
    start, end, _, fmt = actions[k]
    closer = _CLOSERS.get(fmt, "")
    if r < 0.5 and closer:  # cut inside an action's payload, its closer written after the cut
        body = min(i for i in (text.find("{", start), text.find("[", start)) if i >= 0)
        cut = rnd.randint(body + 1, end - len(closer) - 1)
        if text[start:cut] + closer != text[start:end]:
            kept = [_canon(n, a) for j, (_, _, calls, _) in enumerate(actions) if j != k for n, a in calls]
            return text[:cut] + closer + text[end:], tools, kept, True
    return text, tools, written, False


def _check(rnd: random.Random, counts: Counter[str], text: str, tools: list[ToolSpec] | None,
           written: list[str], cut: bool) -> None:  # fmt: skip
    try:
        whole = parse_reply(text, tools)
        whole.model_dump_json()
        stream = StreamParser(tools)
        events = []
        for chunk in _chunks(rnd, text):
            events.extend(stream.feed(chunk))
        events.extend(stream.close())
        streamed = stream.result()
        streamed.model_dump_json()
    except Exception:  # noqa: BLE001 - the count is of exceptions of any type
        counts["untyped_exceptions"] += 1
        return
    emitted = tuple(e.call for e in events if isinstance(e, ToolCallDelta))
    if streamed != whole or emitted != whole.tool_calls:
        counts["stream_vs_whole_differences"] += 1
    allowed = Counter(written)
    for call in whole.tool_calls:
        key = _canon(call.name, call.arguments)
        if allowed[key] > 0:
            allowed[key] -= 1
        elif cut:
            counts["calls_from_cut_input"] += 1
        else:
            counts["calls_with_unwritten_arguments"] += 1


def run(n: int, seed: int) -> dict[str, int]:
    """Generate ``n`` fuzzed replies from ``seed``, parse each whole and streamed, count."""
    rnd = random.Random(seed)
    counts: Counter[str] = Counter({k: 0 for k in COUNTS})
    for _ in range(n):
        text, tools, written, cut = _case(rnd)
        counts["inputs"] += 1
        _check(rnd, counts, text, tools, written, cut)
    return {k: counts[k] for k in COUNTS}


def _main(argv: list[str], out: Callable[[str], Any] = print) -> None:
    n = int(argv[0]) if argv else 100_000
    seed = int(argv[1]) if len(argv) > 1 else 0
    t0 = time.monotonic()
    result = run(n, seed)
    for key, value in result.items():
        out(f"{key}: {value}")
    out(f"seconds: {time.monotonic() - t0:.0f}")


if __name__ == "__main__":
    _main(sys.argv[1:])
