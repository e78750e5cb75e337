"""JSONL transcripts: one event per line, appended and flushed as it happens.

Every event carries ``v`` (schema version), ``run`` (run id), ``seq``, ``t`` (UTC
ISO-8601) and ``type``. The types and their fields are listed in :data:`EVENT_TYPES`.
A ``model_request`` / ``model_output`` pair with ``extension: true`` is the extension
step of a parallel turn (:mod:`agentfsm.extension`): it continues the reply before it,
and its text starts with the prefill it continued.
Secrets never reach a transcript: keys that look like credentials are redacted by
:func:`redact` before anything is written.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from agentfsm.errors import TranscriptError

__all__ = [
    "EVENT_TYPES",
    "SCHEMA_VERSION",
    "TranscriptWriter",
    "iter_transcript",
    "read_transcript",
    "redact",
]

SCHEMA_VERSION = 1

#: event type -> the fields it carries (besides v, run, seq, t, type)
EVENT_TYPES: dict[str, tuple[str, ...]] = {
    "run_start": ("config",),
    "request": ("messages", "tools", "tool_choice"),
    "contract": ("hash", "text"),
    "model_request": ("attempt", "messages", "options", "enforcement"),
    "model_output": ("text", "usage", "finish_reason"),
    "parse": ("content", "tool_calls", "problems", "truncated"),
    "guard": ("guard", "verdict", "reason", "detail"),
    "retry": ("reason", "attempt", "message"),
    "transition": ("from", "event", "to"),
    "tool_call": ("call",),
    "tool_result": ("result",),
    "final": ("content",),
    "error": ("error", "message"),
    "run_end": ("status", "steps", "corrections"),
}

_SECRET_KEYS = frozenset(
    {"api_key", "apikey", "authorization", "x-api-key", "api-key", "password", "secret", "token"}
)


def redact(value: Any) -> Any:
    """Return ``value`` with every credential-like mapping key's value replaced."""
    if isinstance(value, Mapping):
        return {
            k: ("[redacted]" if str(k).lower() in _SECRET_KEYS else redact(v))
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(v) for v in value]
    return value


class TranscriptWriter:
    """Appends events to a JSONL file (or nowhere, when ``path`` is None). Thread-safe."""

    def __init__(self, path: str | os.PathLike[str] | None, run_id: str | None = None) -> None:
        self.run_id = run_id or uuid.uuid4().hex[:16]
        self.path = Path(path) if path is not None else None
        self._seq = 0
        self._lock = threading.Lock()
        self._fh: IO[str] | None = None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = self.path.open("a", encoding="utf-8")

    def emit(self, type_: str, **fields: Any) -> dict[str, Any]:
        """Write one event and flush it. Returns the event as written."""
        if type_ not in EVENT_TYPES:
            raise TranscriptError(f"unknown transcript event type {type_!r}")
        with self._lock:
            event: dict[str, Any] = {
                "v": SCHEMA_VERSION,
                "run": self.run_id,
                "seq": self._seq,
                "t": datetime.now(UTC).isoformat(timespec="milliseconds"),
                "type": type_,
            }
            event.update(redact(fields))
            self._seq += 1
            if self._fh is not None:
                self._fh.write(json.dumps(event, ensure_ascii=False, default=str) + "\n")
                self._fh.flush()
            return event

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None

    def __enter__(self) -> TranscriptWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def iter_transcript(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """Yield the events of a transcript. A torn last line (a killed writer) is skipped."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TranscriptError(f"cannot read transcript {p}: {exc}") from exc
    lines = text.split("\n")
    last = len(lines) - 1  # when the file ends with a newline, lines[last] == ""
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError as exc:
            if i == last:
                return  # torn final line: the writer was killed mid-write
            raise TranscriptError(f"{p}:{i + 1}: not a JSON line: {exc.msg}") from exc
        if not isinstance(event, dict) or "type" not in event:
            raise TranscriptError(f"{p}:{i + 1}: not a transcript event")
        yield event


def read_transcript(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read a whole transcript into a list of event dicts."""
    return list(iter_transcript(path))
