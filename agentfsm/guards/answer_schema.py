"""Answer schema: a final answer must be the JSON the client asked for.

When a client names an output schema beside its tools (OpenAI ``response_format``,
Anthropic ``output_config.format``, Responses ``text.format``; openai-agents'
``output_type``), a reply without calls is the final answer and must be one JSON value
that validates against that schema, with no other text. One that is not JSON, or does
not validate, is corrected like any other bad reply, quoting the schema's error; the
validation is :mod:`~agentfsm.guards.schema`'s (safe on any client schema).
"""

from __future__ import annotations

import json
from typing import Any, Final

from agentfsm.core._types import JSONObject
from agentfsm.guards.base import ACCEPT, Correction, Verdict
from agentfsm.guards.schema import validate_arguments

__all__ = ["GUARD", "REASON", "check", "describe"]

GUARD = "answer_schema"
REASON: Final = "invalid_answer"
#: the most of the schema a correction (or the contract) quotes
SCHEMA_CHARS = 2000


def describe(schema: JSONObject) -> str:
    """The schema as compact JSON, cut at :data:`SCHEMA_CHARS`."""
    text = json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= SCHEMA_CHARS else text[:SCHEMA_CHARS] + "..."


def check(content: str, schema: JSONObject) -> Verdict:
    """Correct an answer that is not one JSON value matching ``schema``."""
    try:
        value: Any = json.loads(content)
    except ValueError as exc:
        return Correction(
            guard=GUARD,
            reason=REASON,
            message=(
                "Your answer must be only one JSON value that matches this JSON Schema, with no "
                f"other text before or after it: {describe(schema)}"
            ),
            detail=f"not JSON: {exc}",
        )
    found = validate_arguments(value, schema).mismatch
    if found is None:
        return ACCEPT
    where = "answer" + found.path.removeprefix("arguments")
    return Correction(
        guard=GUARD,
        reason=REASON,
        message=(
            f"Your answer does not match the requested JSON Schema at {where}: {found.error}. "
            f"Answer again with only one JSON value that matches: {describe(schema)}"
        ),
        detail=f"{found.keyword} at {where}: {found.error}",
    )
