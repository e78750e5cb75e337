"""The opener tables the scanner searches, built from the format registry.

Openers are grouped in families by the literal they all start with, so that one
``str.find`` per family (a one-character find first) tells whether its regexes need
running at all; a family's openers are searched with one regex (alternatives in
priority order), or by their format's own search.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from agentfsm.dialects._format import Format
from agentfsm.dialects._registry import FORMATS
from agentfsm.dialects._tokens import OpenerDef

__all__ = ["BY_FIRST", "FAMILIES", "FIRST", "GROUP_KIND", "PRIORITY", "WINDOW", "Family"]


@dataclass(frozen=True)
class Family:
    """Openers sharing their first literal, and how they are searched."""

    literal: str
    defs: tuple[OpenerDef, ...]
    #: the format whose own search finds these openers, if it has one
    custom: Format | None
    #: the union of the openers' regexes (``None`` when the literal alone is the opener)
    regex: re.Pattern[str] | None


def _literal(d: OpenerDef) -> str:
    lits = d.toks[0].lits
    if len(lits) != 1:
        raise ValueError(f"opener {d.kind!r} must start with one literal")
    return lits[0]


def _union(defs: tuple[OpenerDef, ...]) -> re.Pattern[str]:
    """One search for openers sharing their first tokens, a named group each."""
    k = 0
    while all(len(d.toks) > k + 1 and d.toks[k] == defs[0].toks[k] for d in defs):
        k += 1
    common = "".join(t.pattern() for t in defs[0].toks[:k])
    alts = "|".join(
        f"(?P<{d.kind.replace('-', '_')}>" + "".join(t.pattern() for t in d.toks[k:]) + ")" for d in defs
    )
    return re.compile(f"{common}(?:{alts})")


def _families() -> tuple[Family, ...]:
    grouped: dict[str, list[tuple[OpenerDef, Format]]] = {}
    for fmt in FORMATS:
        for d in fmt.openers:
            grouped.setdefault(_literal(d), []).append((d, fmt))
    out = []
    for literal, members in grouped.items():
        defs = tuple(d for d, _ in members)
        custom = next((f for _, f in members if f.custom_search), None)
        if custom is not None and any(f is not custom for _, f in members):
            raise ValueError(f"openers starting with {literal!r}: a custom search must own them all")
        alone = len(defs) == 1 and len(defs[0].toks) == 1
        regex = None if custom is not None or alone else _union(defs)
        out.append(Family(literal, defs, custom, regex))
    return tuple(out)


#: the families, in the order their first opener takes in the registry
FAMILIES: Final = _families()
#: opener kind -> rank (lower wins a tie at the same position)
PRIORITY: Final = {d.kind: i for i, d in enumerate(d for f in FORMATS for d in f.openers)}
#: a regex group name in a family's regex -> the opener kind
GROUP_KIND: Final = {d.kind.replace("-", "_"): d.kind for f in FORMATS for d in f.openers}
#: openers (with their format) by their first character
BY_FIRST: Final[dict[str, tuple[tuple[OpenerDef, Format], ...]]] = {}
for _fmt in FORMATS:
    for _d in _fmt.openers:
        for _c in _d.first_chars:
            BY_FIRST[_c] = (*BY_FIRST.get(_c, ()), (_d, _fmt))
#: how far back from the end of the text an unfinished opener can start
WINDOW: Final = max(d.max_len for f in FORMATS for d in f.openers) + 1
#: a character an opener can start with
FIRST: Final = re.compile("[" + re.escape("".join(BY_FIRST)) + "]")
