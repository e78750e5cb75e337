"""A backend that serves the raw model outputs recorded in a transcript, in order.

Replay needs neither the model nor the tools: today's parser and guards see exactly
the text the model wrote then. When today's code asks for more replies than were
recorded (it decided differently), :class:`~agentfsm.backends.scripted.ScriptExhausted`
is raised, which the replay report treats as a divergence.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from agentfsm.backends.base import Capabilities, Completion, GenerationOptions, Usage
from agentfsm.backends.scripted import ScriptedBackend, ScriptExhausted
from agentfsm.errors import TranscriptError
from agentfsm.messages import PromptMessage

__all__ = ["ReplayBackend", "read_model_outputs"]


def _read_events(path: Path) -> list[dict[str, Any]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise TranscriptError(f"cannot read transcript {path}: {exc}") from exc
    events: list[dict[str, Any]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except ValueError as exc:
            if number == len(lines):
                break  # a torn last line: the writer died mid-event
            raise TranscriptError(f"{path}:{number}: not a JSON event") from exc
        if not isinstance(event, dict):
            raise TranscriptError(f"{path}:{number}: an event must be a JSON object")
        events.append(event)
    return events


def read_model_outputs(
    source: str | os.PathLike[str] | Iterable[Mapping[str, Any]], run: str | None = None
) -> list[Completion]:
    """The ``model_output`` events of a transcript (file or events), as Completions.

    ``run`` keeps only the events of that run id; the text keeps its prefill.
    """
    events: Iterable[Mapping[str, Any]]
    events = _read_events(Path(source)) if isinstance(source, (str, os.PathLike)) else source
    outputs: list[Completion] = []
    for event in events:
        if event.get("type") != "model_output" or (run is not None and event.get("run") != run):
            continue
        text = event.get("text")
        if not isinstance(text, str):
            raise TranscriptError(f"model_output event {event.get('seq')} has no text")
        usage = event.get("usage") or {}
        outputs.append(
            Completion(
                text=text,
                usage=Usage(
                    prompt_tokens=int(usage.get("prompt_tokens", 0)),
                    completion_tokens=int(usage.get("completion_tokens", 0)),
                ),
                finish_reason=str(event.get("finish_reason") or "stop"),
                model="replay",
            )
        )
    return outputs


class ReplayBackend:
    """Serves a transcript's recorded model outputs in order.

    Capabilities claim prefill and JSON-schema support so that the engine asks at
    the enforcement level it used when recording; the recorded text already is what
    the model produced under it. A recorded text that starts with the requested
    prefill is served without it, as a live backend would.
    """

    def __init__(
        self,
        path_or_events: str | os.PathLike[str] | Iterable[Mapping[str, Any]],
        run: str | None = None,
        capabilities: Capabilities | None = None,
    ) -> None:
        self.outputs = read_model_outputs(path_or_events, run=run)
        self._script = ScriptedBackend(
            list(self.outputs),
            capabilities or Capabilities(prefill=True, json_schema=True),
            name="replay",
        )

    @property
    def name(self) -> str:
        """Always ``replay``."""
        return "replay"

    @property
    def capabilities(self) -> Capabilities:
        """Prefill and JSON schema unless given otherwise."""
        return self._script.capabilities

    @property
    def served(self) -> int:
        """How many recorded outputs have been served."""
        return len(self.outputs) - self._script.remaining

    @property
    def remaining(self) -> int:
        """How many recorded outputs are left."""
        return self._script.remaining

    def complete(self, messages: Sequence[PromptMessage], options: GenerationOptions) -> Completion:
        """The next recorded output (without the requested prefill)."""
        try:
            return self._script.complete(messages, options)
        except ScriptExhausted as exc:
            raise ScriptExhausted(exc.served, source="replay transcript") from None

    async def acomplete(
        self, messages: Sequence[PromptMessage], options: GenerationOptions
    ) -> Completion:
        """Async twin of :meth:`complete`."""
        return self.complete(messages, options)

    def stream(self, messages: Sequence[PromptMessage], options: GenerationOptions) -> Iterator[str]:
        """The next recorded output as one delta."""
        yield self.complete(messages, options).text

    async def astream(
        self, messages: Sequence[PromptMessage], options: GenerationOptions
    ) -> AsyncIterator[str]:
        """Async twin of :meth:`stream`."""
        yield self.complete(messages, options).text

    def __repr__(self) -> str:
        return f"ReplayBackend(outputs={len(self.outputs)}, served={self.served})"
