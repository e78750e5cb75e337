"""JSON-schema grammars for the embedded model: GBNF made once per schema and kept.

A schema (a tool set's call schema, a list continuation's item schema, a client's
``response_format``) becomes llama.cpp GBNF text here; the text is cached per loaded
model, keyed by the schema's JSON (its property order kept: "tool" before "args"; sorted
keys would make the model write the arguments first).
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from typing import Any

from loguru import logger

from agentfsm.core.backend import ListContinuation

__all__ = ["GrammarCache", "continuation_gbnf", "strict_strings"]


def continuation_gbnf(item_gbnf: str, continuation: ListContinuation) -> str:
    """The GBNF of a list continuation, from the GBNF of one item (whose rule is ``root``).

    The item's ``root`` rule is renamed (a schema without references never names
    ``root`` elsewhere), and the new ``root`` is up to ``max_items`` times ``, item``
    followed by the closing text.
    """
    item = "continued-item"
    while re.search(rf"^{item} ::=", item_gbnf, re.M):
        item += "-x"  # a property of that name already made a rule of it
    renamed = re.sub(r"^root ::=", f"{item} ::=", item_gbnf, count=1, flags=re.M)
    close = json.dumps(continuation.close)  # a GBNF literal uses JSON-style escapes
    more = f'("," space {item}){{0,{continuation.max_items}}} ' if continuation.max_items else ""
    space = "" if re.search(r"^space ::=", renamed, re.M) else 'space ::= " "?\n'
    return f"{renamed.rstrip()}\n{space}root ::= {more}space {close} space\n"


#: llama-cpp-python's converter lets a string hold any character but ``"`` and ``\``,
#: raw line breaks and other control characters included (JSON does not allow them; the
#: C++ converter of llama.cpp leaves them out). A model then "closed" a call inside an
#: unclosed string and wrote prose over many lines to the token limit
#: (``"7:00 PM } } }}\n\nHere's how you can use it: ...``), the reply cut off each time.
_LOOSE_CHAR = r'char ::= [^"\\] |'
_JSON_CHAR = r'char ::= [^"\\\x7F\x00-\x1F] |'


def strict_strings(gbnf: str) -> str:
    """``gbnf`` (the converter's output) with JSON's string characters: no raw control
    character (a line break is written ``\n``), as in llama.cpp's own converter."""
    return re.sub(rf"^{re.escape(_LOOSE_CHAR)}", lambda _m: _JSON_CHAR, gbnf, count=1, flags=re.M)


#: the most grammars :class:`GrammarCache` keeps (the least recently used goes first): a
#: list continuation whose strings are copies of the request is one grammar per request
MAX_CACHED = 512


class GrammarCache:
    """GBNF per schema (and list continuation), made once; ``None`` for a schema llama.cpp's
    converter refuses (the call then runs unconstrained: the guards still check it). At
    most ``limit`` are kept, the least recently used dropped first."""

    def __init__(self, limit: int = MAX_CACHED) -> None:
        self._limit = limit
        self._texts: OrderedDict[str, str | None] = OrderedDict()
        #: lookups answered from the cache, and schemas converted (for the benchmarks)
        self.hits = 0
        self.misses = 0

    def gbnf(self, schema: dict[str, Any], continuation: ListContinuation | None = None) -> str | None:
        """The grammar text for ``schema`` (or for continuing a list of its items)."""
        text = json.dumps(schema)
        key = text if continuation is None else f"{continuation.max_items}|{continuation.close}|{text}"
        if key in self._texts:
            self.hits += 1
            self._texts.move_to_end(key)
            return self._texts[key]
        self.misses += 1
        from llama_cpp.llama_grammar import json_schema_to_gbnf

        try:
            gbnf = strict_strings(json_schema_to_gbnf(text))
            self._texts[key] = gbnf if continuation is None else continuation_gbnf(gbnf, continuation)
        except Exception as exc:  # noqa: BLE001 - the converter raises anything, AssertionError included
            # grammar_schema's output always converts; a schema from elsewhere may not
            logger.warning("no grammar for this JSON schema ({}): {}", type(exc).__name__, exc)
            self._texts[key] = None
        found = self._texts[key]
        while len(self._texts) > self._limit:
            self._texts.popitem(last=False)
        return found
