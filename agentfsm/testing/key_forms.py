"""The forms in which an upstream may write a secret back: for tests that search
responses, logs and transcripts for a leaked key (ours and the chaos run's).

A key should never appear in any of these forms; :class:`~agentfsm.core.redaction.Redactor`
matches each of them.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Callable

__all__ = ["KEY_FORMS"]

#: the key as upstreams write it: raw, JSON-escaped, URL-encoded, HTML-escaped, and mixed
KEY_FORMS: dict[str, Callable[[str], str]] = {
    "raw": lambda k: k,
    "slash-escaped": lambda k: k.replace("/", "\\/"),
    "u-escaped": lambda k: "".join(f"\\u{ord(c):04x}" for c in k),
    "u-escaped upper, in part": lambda k: k[:3] + "".join(f"\\u{ord(c):04X}" for c in k[3:9]) + k[9:],
    "url-encoded": lambda k: urllib.parse.quote(k, safe=""),
    "url-encoded, in part, lower-case hex": lambda k: (
        k[:4] + re.sub("%..", lambda m: m.group().lower(), urllib.parse.quote(k[4:12], safe="")) + k[12:]
    ),
    "html numeric": lambda k: "".join(f"&#{ord(c)};" for c in k),
    "json ensure_ascii in a string": lambda k: json.dumps(k)[1:-1].replace("/", "\\/"),
}
