"""Action dialects: one module per format, plus formats models emit natively.

The contract asks for one dialect; the parser (:func:`agentfsm.dialects.parse.parse_reply`)
recognises every format whatever was asked for, and the dialect only selects the
strictness rules (json-protocol's ``strict`` and its thought cap).

A dialect class holds what the contract and the corrections say about its format (its
instructions, ``action_name``, ``action_format``, ``answer_format``); a format module
also declares its :class:`~agentfsm.dialects._format.Format` (openers, reader, decoder),
listed once in :mod:`agentfsm.dialects._registry`. Native formats (Hermes, XML
``<function=...>``, Mistral, bare JSON, pythonic) have a Format and no dialect.
"""

from __future__ import annotations

from agentfsm.core._types import DIALECT_NAMES
from agentfsm.dialects.base import Dialect
from agentfsm.dialects.command import CommandDialect
from agentfsm.dialects.json_action import JsonActionDialect
from agentfsm.dialects.json_protocol import JsonProtocolDialect
from agentfsm.dialects.smiley import SmileyDialect
from agentfsm.core.errors import UsageError

__all__ = [
    "DIALECTS",
    "CommandDialect",
    "JsonActionDialect",
    "JsonProtocolDialect",
    "SmileyDialect",
    "get_dialect",
]

#: every dialect the contract can ask for, by name
DIALECTS: dict[str, Dialect] = {
    "json-action": JsonActionDialect(),
    "json-protocol": JsonProtocolDialect(),
    "command": CommandDialect(),
    "smiley": SmileyDialect(),
}
assert tuple(DIALECTS) == DIALECT_NAMES


def get_dialect(name: str) -> Dialect:
    """The dialect called ``name``; :class:`~agentfsm.core.errors.UsageError` names the valid ones."""
    try:
        return DIALECTS[name]
    except (KeyError, TypeError):
        valid = ", ".join(DIALECTS)
        raise UsageError(f"unknown dialect {name!r}; valid dialects: {valid}") from None
