"""Secrets found in text however the text escapes them, and replaced (pure).

An upstream that echoes its key rarely writes it as it was sent: a JSON body may write
``/`` as ``\\/`` or any character as ``\\u0073``; a URL or a form writes ``%73``; an HTML
page writes ``&#115;``. A plain ``str.replace`` of the key misses all of these, and the
client that reads the error decodes them back. :class:`Redactor` matches each
character of a secret in any of those spellings (mixed freely), so every form is
replaced, whichever characters were escaped.

Text must be redacted *before* it is cut to an excerpt: a cut through a secret leaves
its first part, which no longer matches.

An upstream's error message may name where the proxy's upstream lives (Ollama's
``Post "http://127.0.0.1:39261/completion": EOF``, a gateway's "Cannot connect to host
ollama:11434"): :func:`upstream_message` is the one part of an upstream's JSON error
body a client may read, its message, with every address in it (a URL, a ``host:port``,
an IP address) replaced by :data:`REDACTED` (:func:`hide_addresses`). Both read the
text's shape, never its words.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable

__all__ = ["REDACTED", "Redactor", "hide_addresses", "secret_pattern", "upstream_message"]

#: what a secret is replaced with
REDACTED = "***"
#: secrets shorter than this are not redacted (they would hit ordinary words)
MIN_SECRET_CHARS = 4


def _spellings(char: str) -> list[str]:
    """Regex alternatives for one character: itself, JSON, URL and HTML escapes."""
    code = ord(char)
    options = [re.escape(char)]
    if code < 0x10000:
        options.append(rf"\\u(?i:{code:04x})")  # JSON \\uXXXX, any case
    else:  # a JSON surrogate pair
        high, low = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
        options.append(rf"\\u(?i:{high:04x})\\u(?i:{low:04x})")
    options.append("".join(f"%(?i:{byte:02x})" for byte in char.encode("utf-8")))  # URL
    options.append(rf"&#(?:0*{code}|[xX]0*(?i:{code:x}));?")  # HTML numeric
    if not char.isalnum():
        options.append(r"\\" + re.escape(char))  # JSON's \/ (and any backslash escape)
    if char == " ":
        options.append(r"\+")  # form encoding
    return options


def secret_pattern(secret: str) -> str:
    """A regex matching ``secret`` with any of its characters escaped in any of the forms."""
    return "".join("(?:" + "|".join(_spellings(c)) + ")" for c in secret)


class Redactor:
    """Replaces every form of every registered secret (thread-safe; secrets only added)."""

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        self._secrets: set[str] = set()
        self._lock = threading.Lock()
        self._regex: re.Pattern[str] | None = None
        for secret in secrets:
            self.add(secret)

    def add(self, secret: str | None) -> None:
        """Redact ``secret`` from now on (None, blank and very short values are ignored)."""
        value = (secret or "").strip()
        if len(value) < MIN_SECRET_CHARS:
            return
        with self._lock:
            if value not in self._secrets:
                self._secrets.add(value)
                ordered = sorted(self._secrets, key=len, reverse=True)  # a longer secret first
                self._regex = re.compile("|".join(secret_pattern(s) for s in ordered))

    def __bool__(self) -> bool:
        return self._regex is not None

    def __call__(self, text: str) -> str:
        """``text`` with every form of every secret replaced by :data:`REDACTED`."""
        regex = self._regex
        if regex is None or not text:
            return text
        return regex.sub(REDACTED, text)


#: what names a place on a network: a URL (to the character before a quote or a space,
#: less a closing punctuation mark), a bracketed IPv6 address, an IPv4 address, and a
#: host name followed by a port (a name's first character is a letter, so a time such as
#: ``12:30`` is no address, and a port is digits alone, so a model tag such as
#: ``qwen2.5:7b`` is none either)
_ADDRESS = re.compile(
    r"[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>`]*[^\s\"'<>`.,;:!?)\]}]"
    r"|\[[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*\](?::\d{1,5})?"
    r"|\b\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?\b"
    r"|\b[A-Za-z][A-Za-z0-9-]*(?:\.[A-Za-z0-9-]+)*:\d{1,5}\b(?![.:]\d)"
)


def hide_addresses(text: str) -> str:
    """``text`` with every URL, ``host:port`` and IP address replaced by :data:`REDACTED`."""
    return _ADDRESS.sub(REDACTED, text)


def upstream_message(body: str) -> str | None:
    """The message of an upstream's JSON error body, addresses hidden: ``error.message``
    (OpenAI's shape, vLLM's, llama.cpp's), ``error`` where it is a string (Ollama's, TGI's),
    else a top-level ``message`` or ``detail`` string; None when the body is not JSON or
    holds none of these (the rest of the body, its other fields, is never quoted)."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    error = data.get("error")
    found = error.get("message") if isinstance(error, dict) else error
    for said in (found, data.get("message"), data.get("detail")):
        if isinstance(said, str) and said.strip():
            return hide_addresses(said)
    return None
