"""The table of action openers the scanner searches for, and how it searches them.

Openers are grouped in families by the literal they all start with, so that one
``str.find`` per family (a one-character find first) tells whether its regexes need
running at all; openers sharing their first tokens are searched with one regex.
"""

from __future__ import annotations

import re
from typing import Final

from agentfsm.dialects._tokens import OpenerDef
from agentfsm.dialects.command import COMMAND
from agentfsm.dialects.json_action import FENCE
from agentfsm.dialects.native import BARE_ARRAY, BARE_OBJECT, HERMES, MISTRAL, PYTHONIC
from agentfsm.dialects.smiley import SMILEY, SMILEY_DELIMITER, SMILEY_RUN

__all__ = [
    "BY_FIRST",
    "COMMAND_TAIL",
    "DEFS",
    "FAMILIES",
    "FIRST",
    "GROUP_KIND",
    "REGEX",
    "WINDOW",
]

DEFS: Final = (FENCE, HERMES, *MISTRAL, COMMAND, BARE_OBJECT, BARE_ARRAY, PYTHONIC)
#: kinds grouped by the literal every opener of theirs starts with: one ``str.find`` per
#: group tells whether (and from where) its regexes need running at all
FAMILIES: Final[tuple[tuple[str, tuple[str, ...] | None], ...]] = (
    ("```", None),
    ("<tool_call>", None),
    ("[TOOL_CALLS]", ("mistral",)),
    ("@tool", ("command", "command-eof")),
    ("{", ("object",)),
    ("[", ("bracket",)),
    (SMILEY_DELIMITER, ("smiley",)),
)
#: a command without arguments ending the reply starts within this many characters of the end
COMMAND_TAIL: Final = 170
#: openers by their first character
BY_FIRST: Final[dict[str, tuple[OpenerDef, ...]]] = {
    c: tuple(d for d in DEFS if c in d.first_chars) for d in DEFS for c in d.first_chars
}
#: how far back from the end of the text an unfinished opener can start
WINDOW: Final = max(max(d.max_len for d in DEFS), SMILEY_RUN) + 1
#: a character an opener can start with
FIRST: Final = re.compile("[" + re.escape("".join(BY_FIRST)) + SMILEY + "]")


def _union(defs: tuple[OpenerDef, ...]) -> re.Pattern[str]:
    """One search for openers sharing their first tokens (``\\[`` ...), a named group each."""
    k = 0
    while all(len(d.toks) > k + 1 and d.toks[k] == defs[0].toks[k] for d in defs):
        k += 1
    common = "".join(t.pattern() for t in defs[0].toks[:k])
    alts = "|".join(
        f"(?P<{d.kind.replace('-', '_')}>" + "".join(t.pattern() for t in d.toks[k:]) + ")" for d in defs
    )
    return re.compile(f"{common}(?:{alts})")


#: the regex each search unit of FAMILIES runs
REGEX: Final = {
    "mistral": _union(MISTRAL),
    "command": COMMAND.regex,
    "object": BARE_OBJECT.regex,
    "bracket": _union((BARE_ARRAY, PYTHONIC)),
}
#: a regex group name in REGEX -> the opener kind
GROUP_KIND: Final = {d.kind.replace("-", "_"): d.kind for d in DEFS}
