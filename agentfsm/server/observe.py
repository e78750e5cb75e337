"""The proxy's one seam for watching requests: metrics (:mod:`agentfsm.server.metrics`) and
tracing (:mod:`agentfsm.server.tracing`) plug in here, and only here.

A :class:`Watch` belongs to the app (``Settings.watch``; None when nothing watches,
and then a request pays one attribute check). For each request it makes a
:class:`RequestObserver`, which the exchange hands

- the request's events as its :class:`~agentfsm.runtime.recorder.Recorder` writes them
  (``observer(event)``, typed), only of the types it :meth:`~RequestObserver.wants`:
  the turn builds no event an observer does not want, so counting corrections costs
  a ``guard`` and a ``retry`` event, not a dump of every prompt;
- the request's end, once (:meth:`~RequestObserver.end`), with the reply or the error.

A request refused before it became an exchange (a wrong key, a body that is not
JSON) is told to :meth:`Watch.rejected`; the app's shutdown to :meth:`Watch.close`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from agentfsm.core.errors import AgentFSMError, BackendError, ClientGone, RetryBudgetExceeded
from agentfsm.core.events import TranscriptEvent

if TYPE_CHECKING:
    from agentfsm.server.exchange import Exchange
    from agentfsm.server.reply import Reply
    from agentfsm.server.metrics import ProxyMetrics

__all__ = ["RequestObserver", "Watch", "Watches", "app_watches", "outcome_of", "watching"]


class RequestObserver(Protocol):
    """Sees one request's events and its end."""

    def wants(self, type_: str) -> bool:
        """Whether events of ``type_`` are worth building for this observer."""

    def __call__(self, event: TranscriptEvent) -> None:
        """One event of the request, as written."""

    def end(self, ex: Exchange, reply: Reply | None, error: BaseException | None) -> None:
        """The request is over: answered with ``reply``, or ended by ``error``."""


class Watch(Protocol):
    """Watches every request of an app."""

    def exchange(self, ex: Exchange) -> RequestObserver:
        """The observer of a request that has just become an exchange."""

    def rejected(self, protocol: str, error: AgentFSMError, status: int) -> None:
        """A request answered with ``status`` before it became an exchange."""

    def close(self) -> None:
        """The app is shutting down: hand on what is still buffered."""


def outcome_of(ex: Exchange, reply: Reply | None, error: BaseException | None) -> str:
    """How a request ended: ``tool_calls``, ``answer``, ``exhausted``, ``budget_spent``,
    ``upstream_error``, ``client_gone``, ``client_error`` or ``error``."""
    if error is None:
        if reply is not None and reply.calls:
            return "tool_calls"
        return "exhausted" if reply is not None and reply.exhausted else "answer"
    if isinstance(error, RetryBudgetExceeded):
        return "budget_spent"
    if isinstance(error, BackendError):
        return "upstream_error"
    if isinstance(error, ClientGone):
        return "client_gone"
    if isinstance(error, AgentFSMError) and ex.wire.error_for(error)[0] < 500:
        return "client_error"
    return "error"


class _Both:
    """Several observers of one request, as one."""

    def __init__(self, observers: Sequence[RequestObserver]) -> None:
        self._observers = observers

    def wants(self, type_: str) -> bool:
        return any(o.wants(type_) for o in self._observers)

    def __call__(self, event: TranscriptEvent) -> None:
        for observer in self._observers:
            if observer.wants(event.type):
                observer(event)

    def end(self, ex: Exchange, reply: Reply | None, error: BaseException | None) -> None:
        for observer in self._observers:
            observer.end(ex, reply, error)


class Watches:
    """Several watches (metrics and tracing), as one."""

    def __init__(self, watches: Sequence[Watch]) -> None:
        self.watches = tuple(watches)

    def exchange(self, ex: Exchange) -> RequestObserver:
        return _Both([w.exchange(ex) for w in self.watches])

    def rejected(self, protocol: str, error: AgentFSMError, status: int) -> None:
        for watch in self.watches:
            watch.rejected(protocol, error, status)

    def close(self) -> None:
        for watch in self.watches:
            watch.close()


def watching(*watches: Watch | None) -> Watch | None:
    """The watches given (None left out) as one: None for none, itself for one."""
    present = [w for w in watches if w is not None]
    if not present:
        return None
    return present[0] if len(present) == 1 else Watches(present)


def app_watches(metrics: bool, tracer_provider: Any = None) -> tuple[ProxyMetrics | None, Watch | None]:
    """An app's metrics (when asked for) and what watches its requests (None: nothing).

    The metrics and tracing modules are imported only when asked for: a proxy without
    them loads neither prometheus_client nor OpenTelemetry.
    """
    proxy_metrics = None
    watches: list[Watch] = []
    if metrics:
        from agentfsm.server.metrics import ProxyMetrics

        proxy_metrics = ProxyMetrics()
        watches.append(proxy_metrics)
    if tracer_provider is not None:
        from agentfsm.server.tracing import RequestTracer

        watches.append(RequestTracer(tracer_provider))
    return proxy_metrics, watching(*watches)
