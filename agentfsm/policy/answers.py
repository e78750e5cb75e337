"""Final answers: a reply that loops is cut where the loop starts; short tool results
are framed as sentences ("The result of NAME is VALUE."), which a small model
restates in its answer where it would copy another number from a bare value.

Greedy decoding on a small model often ends an answer by repeating a sentence until the
token limit ("The capital of Japan is Tokyo. The capital of Japan is Tokyo. The capi").
When everything from some sentence on only repeats sentences already written (the last
one possibly cut off), the answer ends before that point. An answer that says a thing
twice and then goes on is left as it is. Pure: the same text always gives the same cut,
so replay decides the same way.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from agentfsm.core.messages import Message, ToolMessage, ToolResult, UserMessage
from agentfsm.policy.base import Policy

__all__ = ["POLICY", "AnswersPolicy", "latest_results", "trim_repetition"]

#: a sentence ends at . ! ? followed by white space (not inside "50.0"), or at a newline
_BREAK = re.compile(r"((?<=[.!?])\s+|\n+)")


def _key(sentence: str) -> str:
    return " ".join(sentence.split()).lower()


def trim_repetition(text: str) -> str:
    """``text`` without a trailing loop of repeated sentences (see the module)."""
    pieces = _BREAK.split(text)  # sentence, break, sentence, break, ...
    sentences = pieces[::2]
    seen: list[str] = []
    for i, sentence in enumerate(sentences):
        key = _key(sentence)
        if key and key in seen:
            rest = [_key(s) for s in sentences[i:]]
            if all(not k or k in seen or any(s.startswith(k) for s in seen) for k in rest):
                return "".join(pieces[: 2 * i]).rstrip()
        if key:
            seen.append(key)
    return text


def latest_results(history: Sequence[Message]) -> list[ToolResult]:
    """The latest round's tool results, oldest first (corrections after them skipped);
    empty when the latest user turn has none after it."""
    results: list[ToolResult] = []
    for msg in reversed(history):
        if isinstance(msg, ToolMessage):
            results.append(msg.result)
        elif results or (isinstance(msg, UserMessage) and msg.correction is None):
            break
    results.reverse()
    return results


class AnswersPolicy(Policy):
    """An answer that loops is cut where the loop starts; short results reach the model
    as sentences it can restate in its answer."""

    name = "answers"
    result_sentences = True

    def finish_answer(self, content: str) -> str:
        return trim_repetition(content)


POLICY = AnswersPolicy()
