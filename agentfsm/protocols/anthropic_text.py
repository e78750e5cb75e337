"""Anthropic content blocks that carry text in a wrapper: read as the text they hold.

A ``document`` whose source is plain text (``{"type": "text", "data": ...}``) or content
(``{"type": "content", "content": "..." | [text blocks]}``), and a ``search_result``
(its ``content``: text blocks), are text a text-only model reads like any other. Each
becomes one ``text`` block: its ``title`` (and a search result's ``source``) on a first
line, then its text. A document of any other source (a PDF, a file id, a URL) is media:
it stays as it is, for the caller's placeholder or its 400. ``cache_control`` and
``citations`` are hints for Anthropic's own serving and are passed over.

Pure code: no IO.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentfsm.core.errors import UnsupportedContent
from agentfsm.protocols._fields import join_texts, req_list, req_mapping, req_str

__all__ = ["TEXT_WRAPPERS", "unwrap_text_blocks"]

#: the block types that may wrap text
TEXT_WRAPPERS = frozenset({"document", "search_result"})


def unwrap_text_blocks(content: Any, where: str) -> Any:
    """``content`` (a string or a block array, read at ``where``) with each text-bearing
    ``document`` and every ``search_result`` made a ``text`` block; anything else as it was."""
    if not isinstance(content, list):
        return content
    out: list[Any] = []
    for j, block in enumerate(content):
        text = _wrapped_text(block, f"{where}[{j}]") if isinstance(block, Mapping) else None
        out.append(block if text is None else {"type": "text", "text": text})
    return out


def _wrapped_text(block: Mapping[str, Any], where: str) -> str | None:
    kind = block.get("type")
    if kind == "search_result":
        head = [_opt(block, "title", where), _opt(block, "source", where)]
        return _titled(" ".join(h for h in head if h), _texts(block.get("content"), f"{where}.content") or "")
    if kind != "document":
        return None
    source = block.get("source")
    if not isinstance(source, Mapping):
        return None
    body: str | None = None
    if source.get("type") == "text":
        body = req_str(source.get("data"), f"{where}.source.data")
    elif source.get("type") == "content":
        raw = source.get("content")
        body = raw if isinstance(raw, str) else _texts(raw, f"{where}.source.content", media=True)
    # None: another source (a PDF, a file), or an image among its blocks: media, for the caller
    return None if body is None else _titled(_opt(block, "title", where), body)


def _texts(raw: Any, where: str, *, media: bool = False) -> str | None:
    """The text blocks of ``raw`` joined. Another block is an :class:`UnsupportedContent`
    naming it, or, with ``media`` (a document's content, which may hold images), None."""
    texts: list[str] = []
    for j, item in enumerate(req_list(raw, where)):
        block = req_mapping(item, f"{where}[{j}]")
        kind = block.get("type")
        if kind != "text":
            if media:
                return None
            raise UnsupportedContent(str(kind), f"{where}[{j}]")
        texts.append(req_str(block.get("text"), f"{where}[{j}].text"))
    return join_texts(texts)


def _opt(block: Mapping[str, Any], key: str, where: str) -> str:
    value = block.get(key)
    return "" if value is None else req_str(value, f"{where}.{key}")


def _titled(title: str, body: str) -> str:
    return f"{title}\n{body}" if title else body
