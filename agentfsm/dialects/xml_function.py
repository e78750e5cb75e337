"""The XML-style call that open coding models emit (Qwen3-Coder and its kin):

    <tool_call>
    <function=get_weather>
    <parameter=city>
    Paris
    </parameter>
    <parameter=days>
    3
    </parameter>
    </function>
    </tool_call>

Only a **well-formed** block is read: ``<tool_call>``, one ``<function=NAME>`` holding
nothing but ``<parameter=KEY>`` elements (or one JSON object), ``</function>``, then
``</tool_call>``. A bare ``<function=NAME>`` (no wrapper) is text up to its ``</function>`` outside a
parameter (nothing in it is read, as in a code fence), and so is the format
when the contract taught another (it never teaches this one: it is read only in the
well-formed block the models that use it were trained to write). A parameter's value is raw text (one newline
after its opening tag and one before its closing tag are layout, not value); where the
tool's schema gives the parameter a type (integer, number, boolean, null, object,
array), the text is read as that type, and is kept as written when it does not read as
one (the schema guard then says what is wrong). A body that is a JSON object
(``<function=f>{"a": 1}</function>``) is read as the arguments.

A **native format**, like Hermes: recognised in every reply whatever dialect the
contract asked for, but never asked for by the contract (models that use it were
trained on it; the ones the contract teaches are better served by JSON). The block
ends at ``</function>`` outside a parameter, so ``</function>`` or ``</tool_call>``
inside a value does not end it; a value cannot hold ``</parameter>``. A value that holds
``</parameter></function>`` ends the block early and leaves the rest of the value as text
with closers of its own: the scanner refuses every call from the first XML block on when
such a stray closer follows (:data:`STRAY_CLOSER`); a value with closers is written as a
JSON object body instead (``<function=f>{"a": "...</parameter>..."}</function>``).
"""

from __future__ import annotations

import math
import re
from typing import Any, Final

from agentfsm.dialects._decode import Block, Context, Outcome, decode_json, problem, settled, too_deep
from agentfsm.dialects._format import Format, Opened, Prose, Scan
from agentfsm.dialects._json import RepairBudget, read_json
from agentfsm.dialects._readers import CloserReader, Verdict, fixed_verdict
from agentfsm.dialects._tokens import OpenerDef, cls, lit

__all__ = ["FORMATS", "STRAY_CLOSER", "XML_FUNCTION", "XML_WRAPPED", "XmlFunctionFormat", "coerce_value"]

_NAME = (cls("[A-Za-z_]"), cls(r"[\w.\-]", 0, 127))
#: ``<tool_call>`` then ``<function=NAME>``
XML_WRAPPED: Final = OpenerDef(
    "xml-wrapped", (lit("<tool_call>"), cls(r"\s", 0, 32), lit("<function="), *_NAME, lit(">"))
)
#: ``<function=NAME>`` alone: text, up to its ``</function>`` (nothing in it is read, as
#: in a code fence; an unclosed one is text to the end)
XML_FUNCTION: Final = OpenerDef("xml-bare", (lit("<function="), *_NAME, lit(">")))
#: an XML closer in the prose of a reply: a sign that a value held one (see module doc)
STRAY_CLOSER: Final = re.compile(r"</(?:parameter|function|tool_call)>")
_HEAD: Final = re.compile(r"(?:<tool_call>\s{0,32})?<function=([A-Za-z_][\w.\-]{0,127})>")
_CLOSER: Final = "</function>"
_TAIL: Final = re.compile(r"\s{0,32}</tool_call>")
_TOKEN: Final = re.compile(r"<(?:parameter=|/parameter>|/function>)")
_TOKENS: Final = ("<parameter=", "</parameter>", "</function>")
_PARAM: Final = re.compile(r"<parameter=([^>\n]{1,128})>(.*?)</parameter>", re.DOTALL)
_BLANK: Final = re.compile(r"\s*")
_INTEGER: Final = re.compile(r"-?\d{1,4300}")
_NUMBER: Final = re.compile(r"-?\d{1,4300}(?:\.\d{1,4300})?(?:[eE][+-]?\d{1,4})?")
# a parameter's JSON value is read as written, never repaired (a budget of nothing)
_NO_REPAIR: Final = RepairBudget(remaining=0, calls=0)


def _wrapped_closes(s: str, q: int, final: bool) -> Verdict:
    """``</function>``, then (when it is there) the ``</tool_call>`` of the wrapper."""
    f = q + len(_CLOSER)
    m = _TAIL.match(s, f)
    if m is not None:
        return m.end(), m.end()
    rest = s[f:]
    head = rest.lstrip()
    if len(rest) - len(head) <= 32 and "</tool_call>".startswith(head):
        # the wrapper's closer may still come; a reply that ends here was cut (as Hermes)
        return None, q
    return f, f


class _XmlReader(CloserReader):
    """Reads to ``</function>`` outside ``<parameter=...>...</parameter>``."""

    def __init__(self, text: str, start: int, wrapped: bool) -> None:
        closes = _wrapped_closes if wrapped else fixed_verdict(_CLOSER)
        super().__init__(text, start, _CLOSER, closes)
        self._in_param = False

    def _find_plain(self, s: str, i: int, final: bool) -> tuple[int, bool]:
        n = len(s)
        while (m := _TOKEN.search(s, i)) is not None:
            token = m.group()
            if token == _CLOSER:
                if not self._in_param:
                    return m.start(), True
            else:
                self._in_param = token == "<parameter="
            i = m.end()
        k = s.rfind("<", max(i, n - len("</parameter>")))
        if not final and k >= 0 and any(t.startswith(s[k:]) for t in _TOKENS):
            return k, False  # a tag may be cut by the chunk: look again with more text
        return n, False


def _layout(value: str) -> str:
    """The value without the one newline after its opening tag and before its closing one."""
    if value.startswith("\n"):
        value = value[1:]
    if value.endswith("\n"):
        value = value[:-1]
    return value


def _types(schema: Any) -> list[str]:
    typ = schema.get("type") if isinstance(schema, dict) else None
    if isinstance(typ, str):
        return [typ]
    return [t for t in typ if isinstance(t, str)] if isinstance(typ, list) else []


def coerce_value(text: str, schema: Any) -> Any:
    """``text`` read as the type ``schema`` gives (the first that reads), else ``text`` itself."""
    word = text.strip()
    for typ in _types(schema):
        if typ == "string":
            return text
        if typ == "integer" and _INTEGER.fullmatch(word):
            return int(word)
        if typ == "number" and _NUMBER.fullmatch(word):
            number = float(word) if any(c in word for c in ".eE") else int(word)
            if not isinstance(number, float) or math.isfinite(number):
                return number
        if typ == "boolean" and word.lower() in ("true", "false"):
            return word.lower() == "true"
        if typ == "null" and word.lower() in ("null", "none"):
            return None
        if typ in ("object", "array") and word[:1] in "{[" and word:
            read = read_json(word, _NO_REPAIR)
            if isinstance(read.value, dict if typ == "object" else list) and read.repaired is None:
                return read.value
    return text


class XmlFunctionFormat(Format):
    """``<function=NAME><parameter=KEY>value</parameter>...</function>``, optionally in
    ``<tool_call>``; always an action (like Hermes), whatever the tools."""

    sources = {"xml": "xml-function", "xml-bare": "xml-function"}
    openers = (XML_WRAPPED, XML_FUNCTION)
    cut = {"xml": "<function=...> without </function>"}
    closer = _CLOSER

    def open(self, scan: Scan, buf: str, p: int, kind: str, end: int, final: bool) -> Opened | Prose | None:
        """The body runs to ``</function>`` outside a parameter (or a JSON string); a bare
        ``<function=NAME>`` is text up to its ``</function>``."""
        m = _HEAD.match(buf, p)
        assert m is not None  # the opener matched the same text
        bare = kind == XML_FUNCTION.kind
        reader = _XmlReader(buf, p, wrapped=not bare)
        return Opened("xml-bare" if bare else "xml", end, reader, name=m.group(1))

    def body_end(self, block: Block) -> int | None:
        """Before the last ``</function>``."""
        return block.raw.rfind(_CLOSER)

    def decode(self, block: Block, ctx: Context) -> Outcome:
        """Parameters (typed by the tool's schema), or a JSON object body."""
        if block.kind == "xml-bare":
            return Outcome(prose=True)  # text, whatever it holds (see the module doc)
        out = settled(block, ctx, self)
        if out is not None:
            return out
        name = block.name or ""
        if not block.raw.rstrip().endswith("</tool_call>"):
            message = f"<function={name}> must be followed by </tool_call> (the block is not well-formed); it was not run"
            return Outcome(problems=[problem("malformed_action", message, block.start, "xml-function")])
        body = block.raw[block.body : block.body_end]
        if body.lstrip().startswith("{"):
            return decode_json(block, ctx, self)
        schema = (ctx.schemas or {}).get(name)
        props = schema.get("properties") if isinstance(schema, dict) else None
        args: dict[str, Any] = {}
        i = 0
        while (i := _BLANK.match(body, i).end()) < len(body):  # type: ignore[union-attr]
            m = _PARAM.match(body, i)
            if m is None:
                message = f"<function={name}> holds text that is not a <parameter=...>...</parameter>"
                return Outcome(problems=[problem("malformed_action", message, block.start + block.body + i, "xml-function")])
            key = m.group(1).strip()
            prop = props.get(key) if isinstance(props, dict) else None
            args[key] = coerce_value(_layout(m.group(2)), prop)
            i = m.end()
        return too_deep([(name, args)], block, "xml-function") or Outcome(calls=[(name, args)])


FORMATS: Final = (XmlFunctionFormat(),)
