"""Logging for the command line: one stderr sink, no local variables, secrets redacted.

Tracebacks never show local variables (``diagnose=False``) nor frames above the
point where an error was caught (``backtrace=False``): the frames of ``serve`` hold
the keys it was started with. On top of that every record is redacted, on every
sink: a patcher replaces each registered secret and any ``Bearer …`` /
``x-api-key: …`` value in the message, and our own sink redacts the whole formatted
text, traceback included. The standard-library loggers that print on their own
(uvicorn's, httpx's) get a filter that redacts their records the same way. The ``mcp``
library's records (it logs through the standard library, to nothing of its own) are
handed to loguru, so they come out on the one sink, at its level, redacted and named
(``WARNING: mcp.shared.session: ...``).
"""

from __future__ import annotations

import logging
import re
import sys
from typing import TYPE_CHECKING, TextIO

from loguru import logger

from agentfsm.core.errors import UsageError
from agentfsm.core.redaction import REDACTED, Redactor

if TYPE_CHECKING:
    from loguru import Message, Record

__all__ = ["LEVELS", "REDACTED", "RedactingFilter", "configure_logging", "log_level", "redact", "register_secret"]

#: standard-library loggers that write to stderr themselves (uvicorn's tracebacks ...)
_STDLIB_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access", "httpx", "httpcore")
#: standard-library loggers of libraries that leave output to the program: into loguru
_INTERCEPTED = ("mcp",)

#: every registered secret, matched in any escaped form (JSON ``\u``/``\/``, URL, HTML)
_secrets = Redactor()
# a bearer token or an x-api-key header value, however it was written down
_CREDENTIAL = re.compile(
    r"(?i)(\bbearer\s+|\bx-api-key['\"]?\s*[:=,]\s*['\"]?|\bapi[_-]key['\"]?\s*[:=]\s*['\"]?)"
    r"[^\s'\",;)}\]]+"
)


def register_secret(value: str | None) -> None:
    """Redact ``value`` from every log record from now on (None and empty are ignored)."""
    _secrets.add(value)


def redact(text: str) -> str:
    """``text`` with every registered secret (in any form) and credential value replaced by ``***``."""
    return _CREDENTIAL.sub(lambda m: m.group(1) + REDACTED, _secrets(text))


def _patch(record: Record) -> None:
    record["message"] = redact(record["message"])


class RedactingFilter(logging.Filter):
    """A standard-library logging filter: the record's message and traceback, redacted."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact(record.getMessage())
        record.args = None
        if record.exc_info:
            # formatted now, redacted, and cached where every formatter looks first
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        return True


class _ToLoguru(logging.Handler):
    """Hands a standard-library record to loguru (loguru's own recipe), its logger named."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            level: str | int = logger.level(record.levelname).name
        except ValueError:
            level = record.levelno
        logger.opt(exception=record.exc_info).log(level, "{}: {}", record.name, record.getMessage())


class _RedactingSink:
    """Writes formatted records (tracebacks included) to a stream, redacted. With no
    stream given it writes to whatever ``sys.stderr`` is at the time: while a rich
    progress bar shows (batch, eval, calibrate), that is rich's proxy, which prints the
    record above the bar instead of into the middle of its line."""

    def __init__(self, stream: TextIO | None) -> None:
        self._stream = stream

    def write(self, message: Message) -> None:
        stream = self._stream if self._stream is not None else sys.stderr
        stream.write(redact(str(message)))
        stream.flush()


#: the level names a user may give (any case), least to most severe
LEVELS = ("TRACE", "DEBUG", "INFO", "SUCCESS", "WARNING", "ERROR", "CRITICAL")


def log_level(name: str) -> str:
    """``name`` as one of :data:`LEVELS` (any case, spaces around ignored); a
    :class:`UsageError` naming the allowed ones otherwise."""
    level = name.strip().upper()
    if level not in LEVELS:
        raise UsageError(f"unknown log level {name!r}: use one of {', '.join(n.lower() for n in LEVELS)}")
    return level


def configure_logging(level: str = "WARNING", stream: TextIO | None = None) -> int:
    """Replace loguru's sinks by one redacting sink on ``stream`` (``sys.stderr`` as it
    is at each write when None); its id.
    ``level``: a name of :data:`LEVELS`, in any case (a UsageError for another)."""
    level = log_level(level)
    logger.remove()
    logger.configure(patcher=_patch)
    for name in _STDLIB_LOGGERS:
        std = logging.getLogger(name)
        if not any(isinstance(f, RedactingFilter) for f in std.filters):
            std.addFilter(RedactingFilter())
    for name in _INTERCEPTED:
        std = logging.getLogger(name)
        std.setLevel(logger.level(level).no)  # what the sink shows, no less (debug with debug)
        if not any(isinstance(h, _ToLoguru) for h in std.handlers):
            std.addHandler(_ToLoguru())
    sink = _RedactingSink(stream)
    return logger.add(
        sink.write, level=level, format="{level}: {message}", diagnose=False, backtrace=False
    )
