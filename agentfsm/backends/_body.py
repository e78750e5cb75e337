"""Reading an upstream's body within a bound: its size, decompressed, set by ``max_tokens``.

An upstream's reply is bounded by what was asked of it: ``max_tokens`` tokens, a few
bytes each once written as JSON, plus the envelope (per event, for a stream). Nothing
else bounded it: a 1 MB gzip body decompressed to 4.2 GB, and an endless stream grew
until the timeout. Here the body is read raw and decompressed by us, ``max_length`` at a
time (a small compressed chunk cannot expand past the bound in one step), and a body
larger than its limit is a :class:`~agentfsm.core.errors.BackendProtocolError`.
Only ``gzip`` and ``deflate`` are asked for (and decoded); any other encoding is refused.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Mapping
import httpx

from agentfsm.backends._transport import CallState, bounded
from agentfsm.backends._upstream import UpstreamResponse
from agentfsm.core.errors import BackendProtocolError

__all__ = [
    "ACCEPT_ENCODING",
    "MAX_REPLY_BYTES",
    "MODELS_LIMIT",
    "BoundedBody",
    "aread_body",
    "raw_of",
    "read_body",
    "reply_limit",
]

#: the encodings asked for (and the only ones decoded)
ACCEPT_ENCODING = "gzip, deflate"
#: the largest reply read, whatever ``max_tokens`` says
MAX_REPLY_BYTES = 64 << 20
#: the largest model list read
MODELS_LIMIT = 8 << 20
#: room for the envelope of a reply (ids, usage, a model name, an error object)
_BASE = 1 << 20
#: bytes per token asked for: a token is a few characters, each up to 12 bytes as a JSON
#: escape (a surrogate pair); a stream sends each token in an event of its own (~200 bytes)
_PER_TOKEN_WHOLE = 32
_PER_TOKEN_STREAM = 256


def reply_limit(max_tokens: int | None, stream: bool) -> int:
    """The most bytes (decompressed) an answer to ``max_tokens`` may take; with none sent
    the upstream's own bound applies, and ours is :data:`MAX_REPLY_BYTES`."""
    if max_tokens is None:
        return MAX_REPLY_BYTES
    per = _PER_TOKEN_STREAM if stream else _PER_TOKEN_WHOLE
    return min(MAX_REPLY_BYTES, _BASE + per * max(0, max_tokens))


class BoundedBody:
    """Decodes a body's raw bytes (by its ``Content-Encoding``) and counts them.

    ``cut``: past ``limit`` the rest is dropped quietly (an error body, kept as an
    excerpt) instead of raising.
    """

    def __init__(self, headers: Mapping[str, str], limit: int, *, cut: bool = False) -> None:
        self.limit = limit
        self.size = 0
        self.full = False
        self._cut = cut
        encoding = (headers.get("content-encoding") or "").strip().lower()
        if encoding in ("", "identity"):
            self._z: zlib._Decompress | None = None
        elif encoding in ("gzip", "x-gzip"):
            self._z = zlib.decompressobj(zlib.MAX_WBITS | 16)
        elif encoding == "deflate":
            self._z = zlib.decompressobj(zlib.MAX_WBITS | 32)  # zlib-wrapped; raw deflate below
        else:
            raise BackendProtocolError(f"upstream answered in an encoding not asked for: {encoding[:40]!r}")
        self._raw_deflate = encoding == "deflate"

    def feed(self, raw: bytes) -> bytes:
        """The decoded bytes of one raw chunk (empty once a cut body is full)."""
        if self.full or not raw:
            return b""
        if self._z is None:
            return self._take(raw)
        parts: list[bytes] = []
        data = raw
        while data and not self.full:
            try:
                out = self._z.decompress(data, self.limit - self.size + 1)
            except zlib.error as exc:
                if self._raw_deflate and self.size == 0 and not parts:
                    self._z, self._raw_deflate = zlib.decompressobj(-zlib.MAX_WBITS), False
                    continue  # 'deflate' sent as raw deflate, as some servers do
                raise BackendProtocolError(f"upstream body is not valid {'deflate' if self._raw_deflate else 'gzip'} data") from exc
            parts.append(self._take(out))
            data = self._z.unconsumed_tail
        return b"".join(parts)

    def close(self) -> bytes:
        """What the decoder still holds at the end of the body."""
        if self._z is None or self.full:
            return b""
        return self._take(self._z.flush())

    def _take(self, data: bytes) -> bytes:
        room = self.limit - self.size
        if len(data) > room:
            if not self._cut:
                bound = "the most any reply may be" if self.limit >= MAX_REPLY_BYTES else "more than max_tokens allows"
                raise BackendProtocolError(
                    f"upstream reply is larger than {self.limit} bytes, {bound}; it was not read further"
                )
            self.full = True
            data = data[:room]
        self.size += len(data)
        return data


def raw_of(response: httpx.Response) -> tuple[Mapping[str, str], Iterator[bytes]]:
    """The headers that say how to decode a blocking response, and its raw chunks (a body
    read before it was handed over, as a ``MockTransport`` answers: decoded already)."""
    if response.is_stream_consumed:
        headers = {k: v for k, v in response.headers.items() if k.lower() != "content-encoding"}
        return headers, iter([response.content])
    return response.headers, response.iter_raw()


def read_body(response: httpx.Response, call: CallState, limit: int, *, cut: bool = False) -> bytes:
    """A blocking response's body, decoded within ``limit`` bytes, checking the deadline
    after every chunk (a drip ends)."""
    headers, chunks = raw_of(response)
    body = BoundedBody(headers, limit, cut=cut)
    parts: list[bytes] = []
    for chunk in chunks:
        parts.append(body.feed(chunk))
        if body.full:
            break
        call.check()
    parts.append(body.close())
    return b"".join(parts)


async def aread_body(response: UpstreamResponse, call: CallState, limit: int, *, cut: bool = False) -> bytes:
    """Async :func:`read_body`: every wait for a chunk is bounded by the deadline."""
    body = BoundedBody(response.headers, limit, cut=cut)
    parts: list[bytes] = []
    chunks = response.aiter_raw()
    while not body.full:
        try:
            chunk = await bounded(lambda: anext(chunks), call)
        except StopAsyncIteration:
            break
        parts.append(body.feed(chunk))
    parts.append(body.close())
    return b"".join(parts)
