"""Every action format the parser recognises, in priority order: the one list to extend.

Each module named here exports ``FORMATS`` (its :class:`~agentfsm.dialects._format.Format`
objects). The order settles ties: of two openers starting at the same character, the
earlier format's wins (an XML call wrapped in ``<tool_call>`` before Hermes JSON, the
``[TOOL_CALLS]`` head before a bare ``[``). The scanner, its opener tables and the
decoder read :data:`FORMATS`; a new format is a module plus one line here.
"""

from __future__ import annotations

import importlib
from typing import Final

from agentfsm.dialects._format import Format

__all__ = ["FORMATS", "FORMAT_OF_BLOCK", "FORMAT_OF_OPENER"]

_MODULES: Final = (
    "agentfsm.dialects.json_action",
    "agentfsm.dialects.xml_function",
    "agentfsm.dialects.native",
    "agentfsm.dialects.command",
    "agentfsm.dialects.smiley",
)

#: every format, in priority order
FORMATS: Final[tuple[Format, ...]] = tuple(
    fmt for name in _MODULES for fmt in importlib.import_module(name).FORMATS
)
#: opener kind -> its format
FORMAT_OF_OPENER: Final[dict[str, Format]] = {d.kind: f for f in FORMATS for d in f.openers}
#: block kind -> its format
FORMAT_OF_BLOCK: Final[dict[str, Format]] = {kind: f for f in FORMATS for kind in f.sources}
