"""Prometheus metrics of the proxy (``agentfsm serve --metrics``, ``GET /metrics``).

Each app has its own registry (two apps in one process count apart). What is counted,
per request, when it ends (:class:`ProxyMetrics` is a :class:`~agentfsm.server.observe.Watch`):

=====================================================  =======================================
``agentfsm_requests_total{protocol,model,outcome}``    requests by how they ended (below)
``agentfsm_request_duration_seconds{protocol,model}``  from the request's exchange to its end
``agentfsm_model_calls_per_request{protocol}``         model calls (consensus candidates too)
``agentfsm_corrections_total{guard,reason}``           replies refused and asked for again
``agentfsm_budget_spent_total{protocol}``              requests whose correction budget ran out
``agentfsm_tokens_total{model,direction}``             tokens ``in`` (prompt) and ``out``
``agentfsm_upstream_errors_total{status}``             upstream failures by HTTP status, or
                                                       ``timeout``, ``connection``, ``protocol``
``agentfsm_requests_in_flight``                        requests being answered now
=====================================================  =======================================

Outcomes: ``tool_calls``, ``answer``, ``exhausted`` (the budget ran out and the model's
latest prose was the answer), ``budget_spent`` (it ran out with no acceptable prose, or
under a required call: the give-up, an error),
``upstream_error``, ``client_error`` (a 4xx: a wrong key, a bad body), ``client_gone``,
``error``. The ``model`` label is the model the request named: a name the proxy serves
(a models file's entry) always, any other name (one a ``fallback`` or the single model
answers: a client can send any) only while fewer than :data:`MODEL_LABELS` such names
have been seen and when at most :data:`MODEL_LABEL_CHARS` long, else ``other``. So no
client can grow the exposition without bound, nor push the served names into ``other``.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from agentfsm.core.events import GuardEvent, RetryEvent, TranscriptEvent
from agentfsm.core.errors import AgentFSMError, BackendError, BackendHTTPError, BackendProtocolError, BackendTimeout
from agentfsm.server.observe import outcome_of

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from pydantic import SecretStr
    from starlette.requests import Request
    from starlette.responses import Response

    from agentfsm.server.exchange import Exchange
    from agentfsm.server.reply import Reply

__all__ = ["CONTENT_TYPE", "MODEL_LABELS", "MODEL_LABEL_CHARS", "ProxyMetrics", "metrics_endpoint", "upstream_status"]

CONTENT_TYPE = CONTENT_TYPE_LATEST
#: distinct ``model`` label values, of names the proxy does not serve, kept before the
#: rest count as ``other``
MODEL_LABELS = 64
#: the longest such name kept as a label (a Hugging Face repository id is at most 96)
MODEL_LABEL_CHARS = 128
_LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 320.0)
_CALL_BUCKETS = (1, 2, 3, 4, 5, 6, 8, 10, 15, 20)
_WANTED = frozenset({"guard", "retry"})


def upstream_status(error: BaseException) -> str | None:
    """The ``status`` label of an upstream failure (None: not an upstream failure)."""
    if isinstance(error, BackendHTTPError):
        return str(error.status_code)
    if isinstance(error, BackendTimeout):
        return "timeout"
    if isinstance(error, BackendProtocolError):
        return "protocol"
    if isinstance(error, BackendError):
        return "connection"
    return None


class _RequestCounts:
    """One request's observer: the corrections as they are sent, the rest at its end."""

    __slots__ = ("_metrics", "_started", "_guard")

    def __init__(self, metrics: ProxyMetrics) -> None:
        self._metrics = metrics
        self._started = time.perf_counter()
        self._guard: dict[str, str] = {}  # reason -> the guard that last gave it
        metrics.in_flight.inc()

    def wants(self, type_: str) -> bool:
        return type_ in _WANTED

    def __call__(self, event: TranscriptEvent) -> None:
        if isinstance(event, GuardEvent):
            if event.verdict != "accept":
                self._guard[event.reason] = event.guard
        elif isinstance(event, RetryEvent):
            self._metrics.corrections.labels(self._guard.get(event.reason, "unknown"), event.reason).inc()

    def end(self, ex: Exchange, reply: Reply | None, error: BaseException | None) -> None:
        m = self._metrics
        m.in_flight.dec()
        served = ex.settings.model_name or ex.backend.name
        protocol, model = ex.request.protocol, m.model_label(ex.model, served=ex.model == served)
        outcome = outcome_of(ex, reply, error)
        m.requests.labels(protocol, model, outcome).inc()
        m.duration.labels(protocol, model).observe(time.perf_counter() - self._started)
        tally = ex.tally
        calls = tally.model_calls or tally.attempts  # a request without tools counts its one call as an attempt
        if calls:
            m.model_calls.labels(protocol).observe(calls)
        if outcome in ("exhausted", "budget_spent"):
            m.budget_spent.labels(protocol).inc()
        if tally.usage.prompt_tokens:
            m.tokens.labels(model, "in").inc(tally.usage.prompt_tokens)
        if tally.usage.completion_tokens:
            m.tokens.labels(model, "out").inc(tally.usage.completion_tokens)
        status = upstream_status(error) if error is not None else None
        if status is not None:
            m.upstream_errors.labels(status).inc()


class ProxyMetrics:
    """The proxy's metrics, in a registry of their own; a :class:`~agentfsm.server.observe.Watch`."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "agentfsm_requests", "Requests by protocol, model and how they ended.",
            ("protocol", "model", "outcome"), registry=r,
        )
        self.duration = Histogram(
            "agentfsm_request_duration_seconds", "Seconds from a request's exchange to its end.",
            ("protocol", "model"), buckets=_LATENCY_BUCKETS, registry=r,
        )
        self.model_calls = Histogram(
            "agentfsm_model_calls_per_request", "Model calls one request took (consensus candidates included).",
            ("protocol",), buckets=_CALL_BUCKETS, registry=r,
        )
        self.corrections = Counter(
            "agentfsm_corrections", "Corrections sent to the model, by the guard and reason that asked.",
            ("guard", "reason"), registry=r,
        )
        self.budget_spent = Counter(
            "agentfsm_budget_spent", "Requests whose correction budget ran out.", ("protocol",), registry=r,
        )
        self.tokens = Counter(
            "agentfsm_tokens", "Tokens of every model call, in (prompt) and out (completion).",
            ("model", "direction"), registry=r,
        )
        self.upstream_errors = Counter(
            "agentfsm_upstream_errors", "Upstream failures that ended a request, by HTTP status or kind.",
            ("status",), registry=r,
        )
        self.in_flight = Gauge("agentfsm_requests_in_flight", "Requests being answered now.", registry=r)
        self._models: set[str] = set()
        self._lock = threading.Lock()

    def model_label(self, model: str, served: bool = False) -> str:
        """``model``, or ``other`` once :data:`MODEL_LABELS` other names have been seen
        or when longer than :data:`MODEL_LABEL_CHARS`; a ``served`` name (one the proxy
        lists, bounded by its configuration) always."""
        if served or model in self._models:
            return model
        if len(model) > MODEL_LABEL_CHARS:
            return "other"
        with self._lock:
            if len(self._models) < MODEL_LABELS:
                self._models.add(model)
                return model
        return "other"

    def exchange(self, ex: Exchange) -> _RequestCounts:
        """The observer of one request."""
        return _RequestCounts(self)

    def rejected(self, protocol: str, error: AgentFSMError, status: int) -> None:
        """A request refused before it became an exchange (no model, no tokens)."""
        outcome = "client_error" if status < 500 else "error"
        self.requests.labels(protocol, "", outcome).inc()

    def close(self) -> None:
        """Nothing is buffered: the registry is read when scraped."""

    def exposition(self) -> bytes:
        """The registry in Prometheus' text format."""
        return generate_latest(self.registry)


def metrics_endpoint(
    metrics: ProxyMetrics, api_key: SecretStr | None, *, check: Callable[[Request], None] | None = None
) -> Callable[[Request], Awaitable[Response]]:
    """The ``GET /metrics`` handler: the exposition, behind the proxy's API key when one is set
    (a wrong or missing key gets the OpenAI-shaped 401 the ``/v1`` endpoints give).
    ``check``: the app's whole client check instead (its Host and Origin allow-lists too,
    so that a web page cannot read the metrics by DNS rebinding)."""
    from starlette.responses import JSONResponse, Response

    from agentfsm.server.auth import check_api_key
    from agentfsm.server.wire import wire_for

    wire = wire_for("openai")

    def check_key(request: Request) -> None:
        check_api_key(request, api_key)

    allowed = check if check is not None else check_key

    async def serve_metrics(request: Request) -> Response:
        try:
            allowed(request)
        except AgentFSMError as exc:
            status, body = wire.error_for(exc)
            return JSONResponse(body, status_code=status)
        return Response(metrics.exposition(), media_type=CONTENT_TYPE)

    return serve_metrics
