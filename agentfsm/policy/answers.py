"""Final answers: a reply that loops is cut where the loop starts; results stated plainly
when the model could not answer with them.

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
from agentfsm.prompt.results import result_sentence

__all__ = ["POLICY", "AnswersPolicy", "latest_results", "results_stated", "trim_repetition"]

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


def results_stated(history: Sequence[Message]) -> str:
    """The latest round's results, one sentence each (a tool that failed or found nothing
    is said so); empty when the round has none."""
    sentences = []
    for result in latest_results(history):
        name = result.name or "the tool"
        text = " ".join(result.content.split())
        if result.status == "error":
            sentences.append(f"{name} failed: {text}")
        elif result.status == "empty" or not text:
            sentences.append(f"{name} returned nothing.")
        else:
            sentences.append(result_sentence(name, text))
    return " ".join(sentences)


class AnswersPolicy(Policy):
    """An answer that loops is cut where the loop starts; a spent budget without prose
    answers with the latest results stated."""

    name = "answers"

    def finish_answer(self, content: str) -> str:
        return trim_repetition(content)

    def spent_answer(self, history: Sequence[Message]) -> str | None:
        return results_stated(history)


POLICY = AnswersPolicy()
