"""OpenTelemetry spans of the proxy, following the GenAI semantic conventions (``otel`` extra).

Per request (:class:`RequestTracer` is a :class:`~agentfsm.server.observe.Watch`):

- one ``SERVER`` span, ``chat {model}``: ``gen_ai.operation.name`` ``chat``,
  ``gen_ai.request.model`` (the model the client named, else the proxy's),
  ``gen_ai.usage.input_tokens`` / ``output_tokens`` over every model call,
  ``gen_ai.response.finish_reasons``, ``error.type`` when it failed, and the proxy's
  own ``agentfsm.protocol``, ``agentfsm.stream``, ``agentfsm.attempts``,
  ``agentfsm.corrections``, ``agentfsm.model_calls``, ``agentfsm.outcome``;
- a ``CLIENT`` child span per model call, ``chat {backend}``: ``gen_ai.request.model``
  (the backend's name), ``gen_ai.request.max_tokens`` / ``temperature`` when set,
  ``gen_ai.usage.*`` and ``gen_ai.response.finish_reasons`` of that call, and
  ``agentfsm.attempt``, ``agentfsm.enforcement``, ``agentfsm.candidate`` (a consensus
  candidate), ``agentfsm.extension``;
- the guards' verdicts on a reply as ``agentfsm.guard`` events on the span of the call
  that wrote it (``agentfsm.guard.name``, ``.verdict``, ``.reason``), and the correction
  sent as an ``agentfsm.correction`` event (``.reason``, ``.attempt``). A deciding
  call's span stays open until its reply is judged, so its events fall inside it;
  candidates' and extensions' spans end with their output.

Spans go to the tracer provider given (``create_app(tracer_provider=...)``;
``agentfsm serve --otel`` uses the global one, configured by the operator, e.g. with
``opentelemetry-instrument``, or from ``OTEL_TRACES_EXPORTER``). Parents are set
explicitly, so a streamed request's spans nest correctly whatever task runs it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from agentfsm.core.errors import MissingExtraError, UsageError
from agentfsm.core.events import GuardEvent, ModelOutputEvent, ModelRequestEvent, RetryEvent, TranscriptEvent
from agentfsm.server.observe import outcome_of

try:
    from opentelemetry import trace
    from opentelemetry.trace import SpanKind, Status, StatusCode
except ImportError as exc:  # pragma: no cover - the extra is installed where this is tested
    raise MissingExtraError("otel", "tracing the proxy (agentfsm serve --otel)") from exc

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer, TracerProvider

    from agentfsm.core.errors import AgentFSMError
    from agentfsm.server.exchange import Exchange
    from agentfsm.server.reply import Reply

__all__ = ["INSTRUMENTATION", "RequestTracer", "global_provider"]

#: the instrumentation scope's name
INSTRUMENTATION = "agentfsm.server"
_WANTED = frozenset({"model_request", "model_output", "guard", "retry"})


class _RequestSpans:
    """One request's spans: the request's, and the open model call's."""

    __slots__ = ("_tracer", "_span", "_context", "_backend", "_deciding", "_call")

    def __init__(self, tracer: Tracer, ex: Exchange) -> None:
        self._tracer = tracer
        r = ex.request
        self._span: Span = tracer.start_span(
            f"chat {ex.model}",
            kind=SpanKind.SERVER,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": ex.model,
                "agentfsm.protocol": r.protocol,
                "agentfsm.stream": r.stream,
                "agentfsm.tool_mode": r.tool_mode,
                "agentfsm.tools": len(r.tools),
            },
        )
        self._context = trace.set_span_in_context(self._span)
        self._backend = ex.backend.name
        self._deciding: Span | None = None  # the deciding call whose reply is being judged
        self._call: Span | None = None  # the call waiting for its output

    def wants(self, type_: str) -> bool:
        return type_ in _WANTED

    def __call__(self, event: TranscriptEvent) -> None:
        if isinstance(event, ModelRequestEvent):
            self._start_call(event)
        elif isinstance(event, ModelOutputEvent):
            self._end_call(event)
        elif isinstance(event, GuardEvent):
            (self._deciding or self._span).add_event("agentfsm.guard", {
                "agentfsm.guard.name": event.guard,
                "agentfsm.guard.verdict": event.verdict,
                "agentfsm.guard.reason": event.reason,
            })
        elif isinstance(event, RetryEvent):
            (self._deciding or self._span).add_event("agentfsm.correction", {
                "agentfsm.correction.reason": event.reason,
                "agentfsm.correction.attempt": event.attempt,
            })
            self._close_deciding()

    def _start_call(self, event: ModelRequestEvent) -> None:
        side = event.extension or bool(event.candidate)
        if not side:
            self._close_deciding()
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": self._backend,
            "agentfsm.attempt": event.attempt,
            "agentfsm.enforcement": event.enforcement,
        }
        if event.candidate:
            attributes["agentfsm.candidate"] = event.candidate
        if event.extension:
            attributes["agentfsm.extension"] = True
        # the max_tokens and temperature of the call (GenerationOptions always carries both)
        attributes["gen_ai.request.max_tokens"] = event.options.max_tokens
        attributes["gen_ai.request.temperature"] = event.options.temperature
        span = self._tracer.start_span(
            f"chat {self._backend}", context=self._context, kind=SpanKind.CLIENT, attributes=attributes
        )
        self._call = span
        if not side:
            self._deciding = span

    def _end_call(self, event: ModelOutputEvent) -> None:
        span = self._call
        if span is None:
            return
        span.set_attribute("gen_ai.usage.input_tokens", event.usage.prompt_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", event.usage.completion_tokens)
        span.set_attribute("gen_ai.response.finish_reasons", [event.finish_reason or "stop"])
        self._call = None
        if span is not self._deciding:
            span.end()

    def _close_deciding(self) -> None:
        if self._deciding is not None:
            self._deciding.end()
            self._deciding = None

    def end(self, ex: Exchange, reply: Reply | None, error: BaseException | None) -> None:
        if self._call is not None and self._call is not self._deciding:
            self._call.end()  # a call whose output never came (the upstream failed)
        self._call = None
        self._close_deciding()
        span, tally = self._span, ex.tally
        outcome = outcome_of(ex, reply, error)
        span.set_attributes({
            "gen_ai.usage.input_tokens": tally.usage.prompt_tokens,
            "gen_ai.usage.output_tokens": tally.usage.completion_tokens,
            "agentfsm.attempts": tally.attempts,
            "agentfsm.corrections": tally.corrections,
            "agentfsm.model_calls": tally.model_calls or tally.attempts,
            "agentfsm.outcome": outcome,
        })
        if reply is not None:
            span.set_attribute("gen_ai.response.finish_reasons", [reply.finish_reason])
        if error is not None:
            span.set_attribute("error.type", type(error).__name__)
            span.set_status(Status(StatusCode.ERROR, str(error)[:200] or type(error).__name__))
        span.end()


class RequestTracer:
    """Spans for every request of an app, from ``provider``."""

    def __init__(self, provider: TracerProvider) -> None:
        from agentfsm import __version__

        self.provider = provider
        self.tracer = provider.get_tracer(INSTRUMENTATION, __version__)

    def exchange(self, ex: Exchange) -> _RequestSpans:
        """The spans of one request (its span starts now)."""
        return _RequestSpans(self.tracer, ex)

    def rejected(self, protocol: str, error: AgentFSMError, status: int) -> None:
        """A request refused before it became an exchange gets no span (its access log has it)."""

    def close(self) -> None:
        """Export the spans still batched (a server stopped by a signal exits without atexit)."""
        flush = getattr(self.provider, "force_flush", None)
        if flush is not None:
            flush()


def global_provider() -> TracerProvider:
    """The process's tracer provider, for ``agentfsm serve --otel``.

    One already configured (``opentelemetry-instrument``, or code that embeds the proxy)
    is used as it is. Otherwise an SDK provider is set up from the standard variables:
    ``OTEL_TRACES_EXPORTER`` (``otlp``, the default, needs the
    ``opentelemetry-exporter-otlp-proto-http`` package and reads ``OTEL_EXPORTER_OTLP_*``;
    ``console``; ``none``; several separated by commas), ``OTEL_SERVICE_NAME`` (default
    ``agentfsm``) and ``OTEL_RESOURCE_ATTRIBUTES``.
    """
    current = trace.get_tracer_provider()
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider as SDKTracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
    except ImportError as exc:  # pragma: no cover - the extra installs the SDK
        raise MissingExtraError("otel", "agentfsm serve --otel") from exc
    if isinstance(current, SDKTracerProvider):
        return current
    exporters: list[SpanExporter] = []
    for name in (n.strip() for n in os.environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",")):
        if name == "console":
            exporters.append(ConsoleSpanExporter())
        elif name == "otlp":
            try:
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            except ImportError as exc:
                raise UsageError(
                    "OTEL_TRACES_EXPORTER=otlp (the default) needs pip install opentelemetry-exporter-otlp-proto-http; "
                    "or set OTEL_TRACES_EXPORTER=console"
                ) from exc
            exporters.append(OTLPSpanExporter())
        elif name not in ("none", ""):
            raise UsageError(f"OTEL_TRACES_EXPORTER: unknown exporter {name!r} (otlp, console or none)")
    service = os.environ.get("OTEL_SERVICE_NAME") or "agentfsm"
    provider = SDKTracerProvider(resource=Resource.create({"service.name": service}))
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return provider
