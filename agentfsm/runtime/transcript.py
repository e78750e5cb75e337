"""JSONL transcripts: one typed event per line, appended and flushed as it happens.

The events are the models of :mod:`agentfsm.core.events` (a union discriminated on
``type``, with a schema version). :meth:`TranscriptWriter.write` stamps an event built
by its writer (its run, place and time), redacts it and writes it; runs write through
a :class:`~agentfsm.runtime.recorder.Recorder`, which builds the events.
:func:`read_events` is the canonical reader: it returns the typed events, and reads
every version this release knows (:data:`~agentfsm.core.events.READABLE_VERSIONS`).
:func:`read_transcript` returns the same events as plain JSON dicts, for callers
that want the raw shape.

A ``model_request`` line writes only the messages its prompt adds to the run's previous
one, with a reference to that one (:mod:`agentfsm.runtime.transcript_delta`); the
readers expand it, so the events read (and those ``on_event`` sees) are whole.

Secrets never reach a transcript: keys that look like credentials are redacted by
:func:`redact` before an event is written (and handed to ``on_event``), and so is their
value wherever else the same file would carry it (:class:`_SecretText`): in raw text that
writes the key beside its value (a model's reply ``{"password": "..."}``,
``<parameter=password>``, ``password=...``), and, once a value was seen under such a key,
in every later string of the file.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, BinaryIO, cast

from pydantic import BaseModel

from agentfsm.core.errors import RequestError, TranscriptError, UsageError
from agentfsm.core.redaction import Redactor
from agentfsm.core.events import (
    EVENT_MODELS,
    SCHEMA_VERSION,
    Event,
    TranscriptEvent,
    event_fields,
    parse_event,
)
from agentfsm.core.client_json import MAX_JSON_DEPTH, load_client_json
from agentfsm.runtime.transcript_append import cut_torn_tail, locked
from agentfsm.runtime.transcript_delta import PromptDelta, PromptExpander

__all__ = [
    "EVENT_TYPES",
    "SCHEMA_VERSION",
    "TranscriptWriter",
    "iter_events",
    "os_error_reason",
    "prepare_transcripts_dir",
    "read_events",
    "read_transcript",
    "redact",
]

#: event type -> the fields it carries (besides v, run, seq, t, type), from the models
EVENT_TYPES: dict[str, tuple[str, ...]] = {
    name: tuple(
        (field.alias or key)
        for key, field in model.model_fields.items()
        if key not in ("v", "run", "seq", "t", "type")
    )
    for name, model in EVENT_MODELS.items()
}

#: the deepest line read: a client's (or a model's) value as deep as the proxy accepts,
#: inside the event that records it (a tool schema inside the action schema of a
#: ``model_request``, arguments inside a message inside a ``request``)
MAX_LINE_DEPTH = MAX_JSON_DEPTH + 64

_SECRET_KEYS = frozenset(
    {"api_key", "apikey", "authorization", "x-api-key", "api-key", "password", "secret", "token"}
)


#: the plain JSON leaves, which redaction returns as they are
_LEAVES = frozenset({str, int, float, bool, type(None)})


def redact(value: Any, found: list[str] | None = None) -> Any:
    """Return ``value`` as plain data with every credential-like mapping key's value
    replaced (the replaced scalars appended to ``found`` when given)."""
    # plain JSON by exact type first, leaves without a call: every event passes through
    # here, and the ABC checks below (Mapping) cost ~10x more per value
    kind = type(value)
    if kind in _LEAVES:
        return value
    if kind is dict:
        return _redact_dict(value, found)
    if kind is list:
        return [v if type(v) in _LEAVES else redact(v, found) for v in value]
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json", by_alias=True)
    if isinstance(value, Mapping):
        return _redact_dict(dict(value), found)
    if isinstance(value, list | tuple):
        return [redact(v, found) for v in value]
    return value


def _redact_dict(value: dict[Any, Any], found: list[str] | None) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    for k, v in value.items():
        if (k if type(k) is str else str(k)).lower() in _SECRET_KEYS:
            out[k] = "[redacted]"
            if found is not None and type(v) in (str, int, float):
                found.append(str(v))
        else:
            out[k] = v if type(v) in _LEAVES else redact(v, found)
    return out


_KEY_NAMES = "|".join(sorted((re.escape(k) for k in _SECRET_KEYS), key=len, reverse=True))
#: a secret key written beside its value in text: JSON (also escaped inside a JSON string),
#: an XML parameter, or ``key=value``; group ``v`` is the value
_KEYED_VALUE = re.compile(
    rf"""(?ix)
    (?:(?P<q>\\?["'])(?:{_KEY_NAMES})(?P=q)\s*:\s*          # "password": or \"password\":
       (?P<v>(?P=q)(?:(?!(?P=q)).){{0,4096}}?(?P=q)|[^\s,}}\]]{{1,4096}})
     | <parameter=\s*(?:{_KEY_NAMES})\s*>(?P<x>.{{0,4096}}?)</parameter>
     | (?<![\w.-])(?:{_KEY_NAMES})\s*=\s*(?P<k>"[^"]{{0,4096}}"|'[^']{{0,4096}}'|[^\s,)&;]{{1,4096}})
    )""",
    re.DOTALL,
)
#: a secret key's name as a whole word (not ``max_tokens``): what a string must hold to be searched
_KEY_HINT = re.compile(rf"(?i)(?<![\w.-])(?:{_KEY_NAMES})(?![\w-])")


def _hide_value(m: re.Match[str]) -> str:
    group = next(g for g in ("v", "x", "k") if m.group(g) is not None)
    start, end = m.span(group)
    value = m.group(group)
    quote = value[0] if value[:1] in ('"', "'") and len(value) > 1 else ""
    if m.group("q") and value.startswith(m.group("q")):
        quote = m.group("q")
    kept = m.group()[: start - m.start()]
    return kept + quote + "[redacted]" + quote + m.group()[end - m.start():]


class _SecretText:
    """Redaction by key name carried into the raw text of the same file."""

    def __init__(self) -> None:
        self._seen = Redactor()

    def learn(self, values: list[str]) -> None:
        """Remember values written under a secret key (:func:`redact`'s ``found``)."""
        for value in values:
            self._seen.add(value)

    def scrub(self, value: Any) -> Any:
        """``value`` (plain data from :func:`redact`) with its strings scrubbed."""
        kind = type(value)
        if kind is str:
            return self.text(value) if len(value) > 6 else value  # "token=x" is 7
        if kind is dict:
            return {k: v if type(v) in _NOT_TEXT else self.scrub(v) for k, v in value.items()}
        if kind is list:
            return [v if type(v) in _NOT_TEXT else self.scrub(v) for v in value]
        return value

    def text(self, text: str) -> str:
        """``text`` without the values written beside a secret key, nor any value seen under one."""
        if _KEY_HINT.search(text) is not None:
            text = _KEYED_VALUE.sub(_hide_value, text)
        return self._seen(text) if self._seen else text


_NOT_TEXT = frozenset({int, float, bool, type(None)})


class TranscriptWriter:
    """Builds, validates and appends events to a JSONL file (or nowhere, when ``path``
    is None). Thread-safe. ``on_event`` sees every event written, in order."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None,
        run_id: str | None = None,
        *,
        on_event: Callable[[TranscriptEvent], None] | None = None,
    ) -> None:
        self.run_id = run_id or uuid.uuid4().hex[:16]
        self.path = Path(path) if path is not None else None
        self.on_event = on_event
        self._seq = 0
        self._secrets = _SecretText()
        self._prompts = PromptDelta()
        self._lock = threading.Lock()
        self._fh: IO[str] | None = None
        if self.path is not None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fh = self.path.open("a", encoding="utf-8")
                with locked(self._fh, exclusive=True):
                    cut_torn_tail(self.path, self._fh.fileno())
            except OSError as exc:
                raise TranscriptError(f"cannot write transcript {self.path}: {os_error_reason(exc, self.path)}") from exc

    def write(self, event: Event) -> TranscriptEvent:
        """Stamp ``event`` with this run's id, its place and the time, redact it, write it
        and flush. Returns the event as written (what ``on_event`` sees too)."""
        with self._lock:
            # every event model is one of TranscriptEvent's: the copy is the same model
            stamped = cast(TranscriptEvent, event.model_copy(update={
                "v": SCHEMA_VERSION,
                "run": self.run_id,
                "seq": self._seq,
                "t": datetime.now(UTC).isoformat(timespec="milliseconds"),
            }))
            fields = event_fields(stamped, envelope=True)
            found: list[str] = []
            plain = redact(fields, found)
            self._secrets.learn(found)
            clean = self._secrets.scrub(plain)
            if clean != fields:  # a secret: the event is what was written
                stamped = parse_event(clean)
            self._seq += 1
            if self._fh is not None:
                line = self._prompts.line(clean) if clean["type"] == "model_request" else clean
                try:
                    with locked(self._fh, exclusive=False):  # not while a writer opening it cuts a torn tail
                        self._fh.write(json.dumps(line, ensure_ascii=False) + "\n")
                        self._fh.flush()
                except OSError as exc:  # a full disk, a vanished mount
                    self._prompts = PromptDelta()  # the next request refers to no line that may be missing
                    raise TranscriptError(f"cannot write transcript {self.path}: {os_error_reason(exc, self.path)}") from exc
        if self.on_event is not None:
            self.on_event(stamped)
        return stamped

    def close(self) -> None:
        """Close the file (further events are an error)."""
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None

    def __enter__(self) -> TranscriptWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def os_error_reason(exc: OSError, path: str | os.PathLike[str] | None = None) -> str:
    """What went wrong with a file, in words: the system's reason, and the file it is about
    when that is not ``path`` itself (a parent directory that is missing, or is a file)."""
    where = os.fsdecode(exc.filename) if exc.filename is not None else None
    if isinstance(exc, FileExistsError):  # made as a directory where something else is
        return f"{where or path} exists and is not a directory"
    if isinstance(exc, NotADirectoryError):
        return "a part of the path is not a directory"
    if where is not None and path is not None and Path(where) == Path(path):
        where = None
    reason = exc.strerror or str(exc) or type(exc).__name__
    reason = reason[:1].lower() + reason[1:]
    return f"{reason} ({where})" if where is not None else reason


def prepare_transcripts_dir(path: str | os.PathLike[str]) -> Path:
    """``path`` as a directory that transcripts can be written into, created when missing.

    Checked before anything runs (``serve --transcripts``, ``batch --transcripts``): a
    :class:`~agentfsm.core.errors.UsageError` saying why when it cannot be (a file is
    there, no permission, a read-only file system), rather than a failure per request.
    """
    directory = Path(path)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory):  # the permission bits do not say it all
            pass
    except OSError as exc:
        raise UsageError(
            f"cannot write transcripts into directory {directory}: {os_error_reason(exc, directory)}"
        ) from exc
    return directory


def iter_events(path: str | os.PathLike[str]) -> Iterator[TranscriptEvent]:
    """Yield the typed events of a transcript. A torn last line (a killed writer) is skipped.

    A line that is not JSON, not an event, or an event that does not fit its type
    is a :class:`TranscriptError` naming the file and line; so is a ``model_request``
    whose prompt refers to a request not read before it in this file (a file that
    starts mid-run, or filtered without it). Lines are decoded within a
    client body's limits (:func:`~agentfsm.core.client_json.load_client_json`:
    nesting, integer length, finite numbers, no lone surrogates): a tampered file is
    an error that says what is wrong, never a crash. The file is read a line at a
    time: a reader of a transcript of hundreds of megabytes holds one line of it.
    """
    p = Path(path)
    prompts = PromptExpander()
    try:
        fh = p.open("rb")
    except OSError as exc:
        raise TranscriptError(f"cannot read transcript {p}: {os_error_reason(exc, p)}") from exc
    with fh:
        for number, raw in enumerate(_lines(fh, p), start=1):
            # only the last line can lack its newline: the writer was killed mid-write
            torn = not raw.endswith(b"\n")
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                if torn:
                    return  # cut inside a character
                raise TranscriptError(f"cannot read transcript {p}: line {number}: {exc}") from exc
            if not line.strip():
                continue
            try:
                data = load_client_json(line, "the line", max_depth=MAX_LINE_DEPTH)
            except RequestError as exc:
                if torn:
                    return
                raise TranscriptError(f"{p}:{number}: {exc}") from None
            if not isinstance(data, dict) or "type" not in data:
                raise TranscriptError(f"{p}:{number}: not a transcript event")
            try:
                event = parse_event(prompts.expand(data))
            except TranscriptError as exc:
                raise TranscriptError(f"{p}:{number}: {exc}") from exc
            prompts.seen(event)
            yield event


def _lines(fh: BinaryIO, path: Path) -> Iterator[bytes]:
    """The lines of ``fh``, each with its newline (the last may lack it); a read error
    is a :class:`TranscriptError` naming ``path``."""
    while True:
        try:
            raw = fh.readline()
        except OSError as exc:
            raise TranscriptError(f"cannot read transcript {path}: {os_error_reason(exc, path)}") from exc
        if not raw:
            return
        yield raw


def read_events(path: str | os.PathLike[str]) -> list[TranscriptEvent]:
    """Read a whole transcript into typed events (the canonical reader)."""
    return list(iter_events(path))


def read_transcript(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read a whole transcript into plain JSON dicts (the typed events, dumped as written)."""
    return [event_fields(event, envelope=True) for event in iter_events(path)]
