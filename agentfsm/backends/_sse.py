"""Decoding OpenAI chat-completion bodies and SSE streams (pure: bytes in, values out).

Every error message quoting the upstream's bytes is built from text passed through the
caller's ``redact`` first (the key in any escaped form), and only then cut to an excerpt.

The SSE framing (bytes to each event's data) is ours, not a library's, by choice
(measured and compared in bench/results/sse.md). httpx-sse's public API, ``EventSource``,
reads an ``httpx.Response`` through ``iter_text()``: our async pool is aiohttp's, and
the body is read raw, decompressed and bounded (:class:`~agentfsm.backends._body.BoundedBody`)
with a deadline between chunks, so only its private decoders (``httpx_sse._decoders``,
rewritten in each of its last two releases) could be used. Through ``EventSource`` it
changes what an upstream's stream means: a leading BOM loses the first event; ``event:``,
``retry:`` or (after an ``id:``) a comment keep-alive alone is an event with empty data
(not JSON: the stream fails; its issue #35); the event a body ends in without a blank
line is dropped. Behind our own text step and with those mended, its decoders give the
same events at 1.4x to 2.1x our CPU time on a stream of 2,000 deltas (httpx2's copy
of them: 2x to 3.2x). tests/test_backend_sse.py pins each of these behaviours, and two
of ours: an event whose data is empty (``data:`` alone, which relays send as a keep-alive)
is an event to the framing, as the standard says, and carries nothing to the chat stream,
which skips it; a body that ends inside a UTF-8 character was cut, a BackendProtocolError.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Callable
from typing import Any

import orjson

from agentfsm.core._json_walk import map_strings, without_lone_surrogates
from agentfsm.core.backend import Completion, Usage
from agentfsm.core.errors import BackendProtocolError
from agentfsm.core.redaction import hide_addresses

__all__ = ["ChatStreamState", "SSEDecoder", "parse_chat_completion"]


Redact = Callable[[str], str]


def _same(text: str) -> str:
    return text


def _excerpt(text: str, redact: Redact, limit: int = 200) -> str:
    """The start of ``text``, redacted before it is cut (a cut secret would not match)."""
    text = redact(text)
    return text if len(text) <= limit else text[:limit] + "..."


#: the largest token count read from an upstream's usage (what every JSON reader holds exactly)
MAX_COUNT = 2**53


def _count(value: Any) -> int:
    """A token count as reported, or 0 (not reported) for anything but a whole number in
    0..MAX_COUNT: a usage of ``NaN``, ``"12"``, ``[1]`` or ``1e999`` is no count at all."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT:
        return value
    return 0


def _usage(data: Any) -> Usage:
    if not isinstance(data, dict):
        return Usage()
    return Usage(prompt_tokens=_count(data.get("prompt_tokens")), completion_tokens=_count(data.get("completion_tokens")))


def _loads(text: str) -> Any:
    """JSON ``text`` as a value: orjson's reading, else Python's (``NaN``; a lone surrogate's
    escape, ``"\\ud800"``, which leaves as U+FFFD: no client could be sent it, as no
    UTF-8 holds it); ValueError or RecursionError when it is not JSON."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        value = json.loads(text)
    if "\\u" not in text:
        return value
    return map_strings(value, without_lone_surrogates)


def _upstream_error(data: dict[str, Any], redact: Redact) -> BackendProtocolError:
    error = data["error"]
    raw = error.get("message") if isinstance(error, dict) else error
    if not isinstance(raw, str) or not raw.strip():  # {"error": {"code": 500}}: nothing to quote
        whole = redact(json.dumps(error, ensure_ascii=False, default=str))
        return BackendProtocolError("upstream reported an error", detail=_excerpt(whole, _same))
    message = redact(raw)
    said = hide_addresses(message)  # the client reads no address; the log and the transcript do
    detail = None if said == message else _excerpt(message, _same)
    return BackendProtocolError(f"upstream reported an error: {_excerpt(said, _same)}", detail=detail)


def parse_chat_completion(body: bytes, redact: Redact = _same) -> Completion:
    """A ``chat.completion`` JSON body to a :class:`Completion`, or BackendProtocolError
    (whose message quotes the body through ``redact``)."""
    text = body.decode("utf-8-sig", errors="replace")  # a leading BOM is no part of the JSON
    try:
        data = _loads(text)
    except (ValueError, RecursionError) as exc:
        # an error page may name hosts and ports: the client reads that the body was not JSON
        raise BackendProtocolError("upstream body is not JSON", detail=repr(_excerpt(text, redact))) from exc
    if not isinstance(data, dict):
        raise BackendProtocolError("upstream body is not a JSON object", detail=repr(_excerpt(text, redact)))
    if "error" in data and not data.get("choices"):
        raise _upstream_error(data, redact)
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        # the body may name hosts (a gateway's own JSON): the log and the transcript quote it
        raise BackendProtocolError("upstream answer has no choices", detail=repr(_excerpt(text, redact)))
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise BackendProtocolError("upstream choice has no message")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise BackendProtocolError("upstream message content is not a string")
    model = data.get("model")
    return Completion(
        text=content or "",
        usage=_usage(data.get("usage")),
        finish_reason=str(choices[0].get("finish_reason") or "stop"),
        model=model if isinstance(model, str) else None,
        stop_sequence=matched_stop(choices[0]),
    )


def matched_stop(choice: dict[str, Any]) -> str | None:
    """The stop sequence that ended a choice, where the upstream names it: vLLM's
    ``stop_reason`` (a string; a token id or null otherwise), SGLang's ``matched_stop``."""
    for key in ("stop_reason", "matched_stop"):
        value = choice.get(key)
        if isinstance(value, str) and value:
            return value
    return None


class SSEDecoder:
    """Incremental server-sent-events decoder: feed bytes, get the ``data`` of each event.

    Linear in the bytes fed, however they are cut: a line still open is kept as the list
    of its pieces and joined once it ends, and each chunk is split in one pass (a line
    end is searched for in the new text only). Its size is bounded by the reply's
    (:class:`~agentfsm.backends._body.BoundedBody`, before this decoder).
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8-sig")(errors="replace")  # a leading BOM is dropped, as the SSE standard says
        self._open: list[str] = []  # the pieces of the line not ended yet
        self._cr = False  # the last text ended in \r: a line end, or the first half of \r\n
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> list[str]:
        """Decode ``chunk``; return the data of every event it completed."""
        text = self._decoder.decode(chunk)
        if not text:
            return []
        if self._cr:
            text, self._cr = "\r" + text, False
        if "\r" in text:
            if text[-1] == "\r":  # wait for the next text: \r\n is one line end
                text, self._cr = text[:-1], True
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        if "\n" not in text:
            if text:
                self._open.append(text)
            return []
        if self._open:
            self._open.append(text)
            text = "".join(self._open)
            self._open = []
        *lines, rest = text.split("\n")
        if rest:
            self._open.append(rest)
        events: list[str] = []
        for line in lines:
            self._line(line, events)
        return events

    def close(self) -> list[str]:
        """End of body: an event still open (no blank line after it) is returned too.

        BackendProtocolError when the body ends inside a UTF-8 character: it was cut (a
        byte of a character cannot end a stream whole), and its last text is not read as
        if it were whole, with the character dropped or replaced."""
        if self._decoder.getstate()[0]:
            raise BackendProtocolError("upstream stream ended inside a UTF-8 character (truncated)")
        events: list[str] = []
        if self._open or self._cr:
            self._line("".join(self._open), events)
            self._open, self._cr = [], False
        self._line("", events)
        return events

    def _line(self, line: str, events: list[str]) -> None:
        if not line:
            if self._data:
                events.append("\n".join(self._data))
                self._data = []
            return
        if line.startswith(":"):
            return  # a comment (keep-alive)
        name, _, value = line.partition(":")
        if name == "data":
            self._data.append(value[1:] if value.startswith(" ") else value)


class ChatStreamState:
    """Follows a ``chat.completion.chunk`` stream: text deltas out, end checked."""

    def __init__(self, redact: Redact = _same) -> None:
        self._redact = redact
        self.done = False
        self.finish_reason: str | None = None
        self.stop_sequence: str | None = None
        self.usage = Usage()
        self.model: str | None = None

    def accept(self, data: str) -> str:
        """The text delta carried by one event's data ('' when it carries none). An event
        whose data is empty (``data:`` then a blank line, which the SSE standard makes an
        event, and relays send to keep a stream alive) carries nothing, as a comment does."""
        stripped = data.strip()
        if not stripped:
            return ""
        if stripped == "[DONE]":
            self.done = True
            return ""
        try:
            chunk = _loads(data)
        except (ValueError, RecursionError) as exc:
            raise BackendProtocolError(
                "upstream stream event is not JSON", detail=repr(_excerpt(data, self._redact))
            ) from exc
        if not isinstance(chunk, dict):
            raise BackendProtocolError("upstream stream event is not an object", detail=repr(_excerpt(data, self._redact)))
        if "error" in chunk:
            raise _upstream_error(chunk, self._redact)
        if isinstance(chunk.get("model"), str):
            self.model = chunk["model"]
        if chunk.get("usage"):
            self.usage = _usage(chunk["usage"])
        choices = chunk.get("choices") or []
        if not isinstance(choices, list):
            raise BackendProtocolError("upstream stream event has malformed choices")
        text = ""
        for choice in choices:
            if not isinstance(choice, dict):
                continue
            if choice.get("finish_reason"):
                self.finish_reason = str(choice["finish_reason"])
                self.stop_sequence = matched_stop(choice)
            delta = choice.get("delta") or {}
            content = delta.get("content") if isinstance(delta, dict) else None
            if isinstance(content, str):
                text += content
        return text

    def finish(self) -> None:
        """At end of body: a stream with neither ``[DONE]`` nor a finish_reason was cut."""
        if not self.done and self.finish_reason is None:
            raise BackendProtocolError(
                "upstream stream ended without a finish_reason or [DONE] (truncated)"
            )
