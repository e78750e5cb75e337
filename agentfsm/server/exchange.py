"""One proxied request: its settings, transcript, cost so far, and the headers that report them.

An :class:`Exchange` is made per request: what its turn runs with (:meth:`Exchange.turn`,
:meth:`Exchange.plain_request`), what it has cost so far, the response headers and stream
trailer that say so, and its transcript (:meth:`Exchange.open_transcript` to
:meth:`Exchange.end`). The answer it ends with is made in :mod:`agentfsm.server.reply`.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agentfsm.server.models import settings_text
from agentfsm.server.observe import RequestObserver
from agentfsm.server.settings import Settings
from agentfsm.server.wire import Wire
from agentfsm.core.backend import Backend, Capabilities, GenerationOptions, Usage
from agentfsm.core.choice import ToolChoice
from agentfsm.core.events import ModelRequestEvent, ProxyRunConfig
from agentfsm.engine.decide import EngineConfig
from agentfsm.engine.plan import policies_of
from agentfsm.core.messages import PromptMessage, ToolCall
from agentfsm.prompt.projection import project_history
from agentfsm.protocols import NormalizedRequest, generation_options, remint_ids
from agentfsm.protocols.sampling import answer_schema, header_text
from agentfsm.runtime.recorder import NO_RECORDER, Recorder, run_config_fields
from agentfsm.runtime.turn import Tally, TurnResult, stream_turn

if TYPE_CHECKING:
    from agentfsm.server.reply import Reply

__all__ = [
    "ATTEMPTS_HEADER",
    "CALL_USAGE_HEADER",
    "CORRECTIONS_HEADER",
    "DEFAULTS_HEADER",
    "EXHAUSTED_HEADER",
    "MODEL_HEADER",
    "SETTINGS_HEADER",
    "Exchange",
    "Settings",
]

#: response headers: how many deciding model calls, corrections, every model call's
#: tokens, a spent budget, and the settings the proxy chose or changed for the client
ATTEMPTS_HEADER = "x-agentfsm-attempts"
CORRECTIONS_HEADER = "x-agentfsm-corrections"
CALL_USAGE_HEADER = "x-agentfsm-call-usage"
EXHAUSTED_HEADER = "x-agentfsm-exhausted"
DEFAULTS_HEADER = "x-agentfsm-defaults"
#: response headers: the served model (its client-visible name) and the settings it ran with
MODEL_HEADER = "x-agentfsm-model"
SETTINGS_HEADER = "x-agentfsm-settings"


@dataclass
class Exchange:
    """One client request on its way through the proxy."""

    backend: Backend
    request: NormalizedRequest
    wire: Wire
    settings: Settings
    #: event-loop time by which the whole request must be done, if bounded
    deadline: float | None = None
    #: model calls, corrections and usage so far (kept current by the turn runner)
    tally: Tally = field(default_factory=Tally)
    response_id: str = field(default="")
    created: int = field(default_factory=lambda: int(time.time()))
    #: the request's events (nothing recorded until :meth:`record` or :meth:`open_transcript`)
    recorder: Recorder = field(default=NO_RECORDER, repr=False)
    #: the answer is the model's prose after the correction budget ran out (``Reply.exhausted``)
    exhausted: bool = False
    #: the client's own ``max_tokens`` (fitting may lower the request's)
    asked_max_tokens: int | None = field(default=None, init=False)
    _ended: bool = field(default=False, repr=False)
    #: :attr:`config` and :attr:`options`, with the request (and capabilities) they were
    #: made from: read several times per request, made again only when the request is
    #: replaced (fitting does)
    _config: tuple[NormalizedRequest, Capabilities, EngineConfig] | None = field(default=None, repr=False)
    _options: tuple[NormalizedRequest, GenerationOptions] | None = field(default=None, repr=False)
    #: what watches this request (metrics, tracing), when the app has a watch
    observer: RequestObserver | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.response_id:
            self.response_id = self.wire.response_id(new_token())
        self.asked_max_tokens = self.request.max_tokens

    @property
    def attempts(self) -> int:
        """Model calls made for this request so far."""
        return self.tally.attempts

    @property
    def corrections(self) -> int:
        """Corrections sent upstream so far."""
        return self.tally.corrections

    @property
    def usage(self) -> Usage:
        """Tokens used so far, over every model call."""
        return self.tally.usage

    # -- what the turn runs with ---------------------------------------------
    @property
    def model(self) -> str:
        """The model name the response carries: the client's, else the configured one."""
        return self.request.model or self.settings.model_name or self.backend.name

    @property
    def model_entry(self) -> str:
        """The served model's entry (its models-file name): what a client is told an upstream failure concerns."""
        return self.settings.model_name or self.backend.name

    @property
    def config(self) -> EngineConfig:
        """The engine's view of this request."""
        r, caps, found = self.request, self.backend.capabilities, self._config
        if found is None or found[0] is not r or (found[1] is not caps and found[1] != caps):
            config = EngineConfig.of(
                self.settings.run, r.tools, tool_choice=r.tool_choice, parallel=r.parallel, capabilities=caps,
                answer_schema=answer_schema(r),
            )
            found = self._config = (r, caps, config)
        return found[2]

    @property
    def options(self) -> GenerationOptions:
        """Generation options from the request (our defaults where it names none, which
        :meth:`defaults` reports)."""
        found = self._options
        if found is None or found[0] is not self.request:
            found = self._options = (self.request, generation_options(self.request))
        return found[1]

    def defaults(self) -> list[str]:
        """The settings sent upstream that the client did not ask for, as ``name=value``:
        a default where it named none, a ``max_tokens`` lowered to fit the context (by the
        proxy before the first call, or by the backend when the upstream refused it: the
        lowest sent so far)."""
        r, options = self.request, self.options
        chosen = []
        if r.temperature is None:
            chosen.append(f"temperature={options.temperature:g}")
        if r.seed is None and options.seed is not None:
            chosen.append(f"seed={options.seed}")
        if (sent := self.lowered_max_tokens()) is not None:
            chosen.append(f"max_tokens={sent}")
        return chosen

    def lowered_max_tokens(self) -> int | None:
        """The completion limit sent upstream so far where it is not the one the client
        asked for: the request's fitted to the context, or lower where the backend lowered
        it for a call (the lowest sent); None when none was sent or it was sent as asked."""
        limit, lowered = self.options.max_tokens, self.tally.max_tokens_sent
        sent = limit if limit is None or lowered is None else min(limit, lowered)
        return None if sent is None or sent == self.asked_max_tokens else sent

    def plain_prompt(self) -> list[PromptMessage]:
        """The history for a request without tools: no contract, nothing added."""
        return project_history(
            self.request.messages, (), dialect=self.settings.run.dialect, tool_choice=ToolChoice.AUTO,
            sentences=policies_of(self.config).result_sentences,
        )

    def plain_request(self) -> tuple[list[PromptMessage], GenerationOptions]:
        """The one model call of a request without tools: its prompt and options, counted
        and recorded as ``model_request``."""
        prompt = self.plain_prompt()
        options = self.options
        self.tally.attempts = 1
        self.recorder.emit(ModelRequestEvent, attempt=1, messages=tuple(prompt), options=options, enforcement="prompt")
        return prompt, options

    def add_usage(self, prompt: int, completion: int) -> None:
        """Count one model call's tokens."""
        self.tally.charge(Usage(prompt_tokens=prompt, completion_tokens=completion))

    def turn(self, stream: bool = False) -> AsyncGenerator[str | TurnResult, None]:
        """This request's deciding turn (:func:`~agentfsm.runtime.turn.stream_turn`), with
        its settings; streamed, it also keeps to :attr:`deadline` itself (a whole reply is
        bounded by :func:`~agentfsm.server.reply.until_disconnect`), and its prose is live when the proxy's
        ``stream_prose`` says so."""
        return stream_turn(
            self.backend,
            list(self.request.messages),
            config=self.config,
            enforcement=self.settings.run.enforcement,
            options=self.options,
            recorder=self.recorder,
            stream=stream,
            live=stream and self.settings.stream_prose == "live",
            deadline=self.deadline if stream else None,
            tally=self.tally,
        )

    def remint(self, calls: tuple[ToolCall, ...]) -> tuple[ToolCall, ...]:
        """Parser-numbered calls with fresh, unguessable protocol-style ids."""
        return remint_ids(calls, self.request.protocol, new_token)

    def headers(self) -> dict[str, str]:
        """Response headers: how many model calls the answer took and what each cost, a
        spent budget, and the settings the proxy chose (what is known so far)."""
        headers = {
            ATTEMPTS_HEADER: str(self.attempts),
            CORRECTIONS_HEADER: str(self.corrections),
            MODEL_HEADER: header_text(self.model_entry),
            SETTINGS_HEADER: settings_text(self.settings.run),
        }
        if self.tally.call_usage:
            headers[CALL_USAGE_HEADER] = self.call_usage()
        if self.exhausted:
            headers[EXHAUSTED_HEADER] = "true"
        chosen = self.defaults()
        if chosen:
            headers[DEFAULTS_HEADER] = ",".join(chosen)
        return headers

    def call_usage(self) -> str:
        """Each model call's tokens, ``prompt/completion``, comma-separated, in call order
        (the response's usage is their sum)."""
        return ",".join(f"{u.prompt_tokens}/{u.completion_tokens}" for u in self.tally.call_usage)

    def trailer(self) -> str:
        """What a stream's end-of-turn comment says: the counts, each call's tokens and a spent
        budget, known only once the turn has ended."""
        text = f"agentfsm attempts={self.attempts} corrections={self.corrections}"
        if self.tally.call_usage:
            text += f" call-usage={self.call_usage()}"
        if self.exhausted:
            text += " exhausted=true"
        if (sent := self.lowered_max_tokens()) is not None:
            text += f" max_tokens={sent}"  # a limit lowered after the headers had left, too
        return text

    # -- transcript ----------------------------------------------------------
    def open_transcript(self) -> None:
        """Start this request's transcript (when a directory is configured), and its
        observer (when the app has a watch): the request is under way."""
        observer = self.observer = self.settings.watch.exchange(self) if self.settings.watch is not None else None
        directory = self.settings.transcripts_dir
        if directory is None and observer is None:
            return
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        run_id = f"{stamp}-{secrets.token_hex(6)}"
        path = directory / f"{run_id}.jsonl" if directory is not None else None
        # the observer sees the events it wants; the turn builds no other (unless a file holds them)
        hook, wants = (observer, observer.wants) if observer is not None else (None, None)
        self.record(Recorder(path, run_id=run_id, on_event=hook, wants=wants))

    def record(self, recorder: Recorder) -> None:
        """Record this request on ``recorder``: its ``run_start``, ``request`` and (in tool
        mode) ``contract`` now, the turn's events as it runs, its end at :meth:`end`."""
        self.recorder = recorder
        r = self.request
        recorder.start(
            lambda: ProxyRunConfig(
                **run_config_fields(self.config, self.settings.run.enforcement, self.backend),
                protocol=r.protocol,
                stream=r.stream,
                model_entry=self.model_entry,
                settings_from=self.settings.settings_from,
            ),
            self.config,
            r.messages,
            normalized=lambda: r.model_dump(mode="json", exclude={"messages", "tools"}),
        )
        if r.tool_mode:  # as the agent records it: replay then sees a changed contract
            recorder.contract(self.backend, self.config, self.settings.run.enforcement)

    def end(self, reply: Reply | None = None, error: BaseException | None = None) -> None:
        """Record how the request ended and close the transcript (once)."""
        if self._ended:
            return
        self._ended = True
        if self.observer is not None:
            self.observer.end(self, reply, error)
        if reply is not None:
            if reply.calls:
                self.recorder.calls(reply.calls)
            else:
                self.recorder.answer(reply.content or "", reply.exhausted)
        self.recorder.end(self.tally, error)


def new_token() -> str:
    """24 random alphanumerics for an id (ids are minted here, at the edge)."""
    return secrets.token_hex(12)
