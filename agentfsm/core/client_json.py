"""Client JSON decoded within limits: every bad input is a :class:`RequestError`, never a crash.

Python's :func:`json.loads` accepts things that later break the proxy (a 500 instead of
the client's 400): ``NaN`` and ``Infinity``, numbers that overflow to infinity,
integers too long to convert back to text, lone surrogate escapes (``"\\ud800"``)
that cannot be encoded as UTF-8, and nesting deep enough to exhaust the interpreter's
recursion limit in whatever walks the value next (validation, grammar building, the
transcript). :func:`load_client_json` refuses each of them at parse time:

- nesting deeper than :data:`MAX_JSON_DEPTH` (128 levels, the limit serde_json uses;
  Claude Code's largest request nests about a dozen levels);
- an integer of more than :data:`MAX_INTEGER_DIGITS` digits (Python's own limit for
  converting between ``int`` and text);
- ``NaN``, ``Infinity``, ``-Infinity`` and numbers that overflow a float;
- a lone UTF-16 surrogate in any string or key; or, with ``mended`` (the proxy's request
  bodies), each one read as U+FFFD and ``where`` added to ``mended``: a client that cuts a
  text by UTF-16 units cuts an emoji in half (Claude Code's truncated tool output is a
  known case, and its provider's 400 then fails every later request of the session);
- with ``int64=True`` (the proxy's request bodies), an integer outside the 64-bit range
  (:data:`INT64_MIN` to :data:`UINT64_MAX`), which no upstream reads and the proxy's own
  JSON encoder cannot write: a tool schema's ``maximum: 1e20`` written as an integer would
  otherwise fail the request on its way upstream.

The same limits apply to the JSON strings a client nests inside its body (an assistant
tool call's ``arguments``).

Most bodies are read by orjson, which refuses the same things itself (``NaN``,
overflowing numbers, lone surrogates, invalid UTF-8) and reads the rest to the same
values; what it refuses, and any text with a run of 20 digits or a minus and 19 (orjson
reads an integer past 64 bits as a float), is read again by :func:`json.loads` with the hooks
above, which say what is wrong. Nesting is measured only when the text holds more
than :data:`MAX_JSON_DEPTH` brackets (fewer cannot nest deeper).
"""

from __future__ import annotations

import json
import math
import re
from functools import partial
from typing import Any

import orjson

from agentfsm.core._json_walk import map_strings, nests_deeper, without_lone_surrogates
from agentfsm.core.errors import RequestError

__all__ = [
    "INT64_MIN", "LONE_SURROGATE", "MAX_INTEGER_DIGITS", "MAX_JSON_DEPTH", "UINT64_MAX", "NotJSON", "check_client_value",
    "load_client_json",
]

#: the deepest nesting of arrays and objects accepted (the top-level value is level 1)
MAX_JSON_DEPTH = 128
#: the longest integer accepted, in digits
MAX_INTEGER_DIGITS = 4300
#: the 64-bit range of integers (signed below, unsigned above) that ``int64=True`` accepts
INT64_MIN = -(2**63)
UINT64_MAX = 2**64 - 1
#: the name a request whose lone surrogates were read as U+FFFD is given (``x-agentfsm-ignored``)
LONE_SURROGATE = "lone_surrogate"

# a surrogate escape in the raw text: only then can the decoded value hold a lone one
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")
# an integer orjson would read as a float (past 2**64 - 1, or below -2**63: a minus and 19
# digits), or a long float mantissa, read either way
_LONG_DIGITS = re.compile(rb"-[0-9]{19}|[0-9]{20}")
_LONG_DIGITS_TEXT = re.compile(r"-[0-9]{19}|[0-9]{20}")


class NotJSON(RequestError):
    """Text that is no JSON at all (a syntax error), as opposed to JSON the limits refuse."""


class _Refused(ValueError):
    """A value the decoder's hooks refuse (turned into a RequestError below)."""


def _constant(name: str) -> Any:
    raise _Refused(f"{name} is not a JSON number; send a finite number")


def _integer(text: str) -> int:
    digits = len(text) - text.startswith("-")
    if digits > MAX_INTEGER_DIGITS:
        raise _Refused(f"an integer of {digits} digits is longer than {MAX_INTEGER_DIGITS} digits")
    return int(text)


def _number(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"the number {text[:32]} is out of range")
    return value


def load_client_json(
    data: bytes | str, where: str = "the request body", *, max_depth: int = MAX_JSON_DEPTH, int64: bool = False,
    mended: list[str] | None = None,
) -> Any:
    """``data`` decoded as JSON within the limits above (nesting at most ``max_depth``
    levels; with ``int64``, integers in the 64-bit range); :class:`RequestError` otherwise.
    With ``mended``, a lone surrogate is read as U+FFFD (and ``where`` added to it) rather
    than refused."""
    fast = _fast(data, where, max_depth)
    if fast is not _NO_VALUE:
        return fast  # orjson reads only integers in the 64-bit range (others are read below)
    try:
        # bytes in any encoding JSON allows (UTF-8, -16, -32), decoded strictly first
        text = data if isinstance(data, str) else data.decode(json.detect_encoding(data))
        value = json.loads(text, parse_constant=_constant, parse_int=_integer, parse_float=_number)
    except _Refused as exc:
        raise RequestError(f"{where} is not acceptable JSON: {exc}") from None
    except RecursionError:
        raise RequestError(f"{where} nests deeper than {max_depth} levels") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise NotJSON(f"{where} is not valid JSON: {exc}") from None
    surrogates = _SURROGATE_ESCAPE.search(text) is not None
    check_client_value(value, where, strings=surrogates and mended is None, max_depth=max_depth)
    if surrogates and mended is not None:
        found: list[str] = []

        def mend(text: str) -> str:  # a lone surrogate read as U+FFFD, each string and key
            if _SURROGATE.search(text) is None:
                return text
            found.append(text)
            return without_lone_surrogates(text)

        value = map_strings(value, mend)
        if found:
            mended.append(where)
    if int64:
        _check_int64(value, where)
    return value


def _check_int64(value: Any, where: str) -> None:
    """Refuse the first integer of ``value`` outside the 64-bit range, naming its JSON path
    (the ``param`` of the error). Iterative, as :func:`check_client_value`; only a text
    with a long run of digits is walked (orjson reads no integer outside the range)."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, dict):
            stack.extend((child, f"{path}.{key}" if path else str(key)) for key, child in reversed(item.items()))
        elif isinstance(item, list):
            stack.extend((child, f"{path}[{i}]") for i, child in reversed(list(enumerate(item))))
        elif isinstance(item, int) and not isinstance(item, bool) and not INT64_MIN <= item <= UINT64_MAX:
            text = str(item)
            digits = len(text) - text.startswith("-")
            shown = text if digits <= 24 else f"{text[:13]}... ({digits} digits)"
            raise RequestError(
                f"{f'{path} in {where}' if path else where}: the integer {shown} is outside the 64-bit range "
                f"that an upstream reads (at least {INT64_MIN} and at most {UINT64_MAX}); send a smaller one, "
                "or a number with a fraction or an exponent",
                param=path or None,
            )


_NO_VALUE: Any = object()


def _fast(data: bytes | str, where: str, max_depth: int) -> Any:
    """``data`` read by orjson, or ``_NO_VALUE`` for the strict reader to decide."""
    if isinstance(data, bytes):
        if _LONG_DIGITS.search(data) is not None:
            return _NO_VALUE
        brackets = data.count(b"[") + data.count(b"{")
    else:
        if _LONG_DIGITS_TEXT.search(data) is not None:
            return _NO_VALUE
        brackets = data.count("[") + data.count("{")
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return _NO_VALUE
    if brackets > max_depth:
        check_client_value(value, where, strings=False, max_depth=max_depth)  # orjson refused any lone surrogate
    return value


def check_client_value(value: Any, where: str, *, strings: bool = True, max_depth: int = MAX_JSON_DEPTH) -> None:
    """Refuse ``value`` if it nests deeper than ``max_depth`` (:data:`MAX_JSON_DEPTH`) or
    (when ``strings``) holds a lone surrogate. Iterative, so any depth is measured without
    recursion."""
    check = partial(_check_text, where=where) if strings else None
    if nests_deeper(value, max_depth, check):
        raise RequestError(f"{where} nests deeper than {max_depth} levels")


def _check_text(text: str, where: str) -> None:
    found = _SURROGATE.search(text)
    if found is not None:
        raise RequestError(
            f"{where} holds a lone surrogate (\\u{ord(found.group()):04x}) "
            "that is not a Unicode character; send valid UTF-16 pairs or the character itself"
        )

