"""Transport policy for HTTP backends: the base URL, timeouts, a per-call deadline,
retries, error mapping.

Foreign errors (httpx, tenacity) become agentfsm errors here, at the edge.
Retries are bounded twice: by ``max_retries`` and by the call's total deadline.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, TypeVar

import httpx
import tenacity
from loguru import logger

from agentfsm.backends._upstream import AttemptTimeouts, UpstreamResponse
from agentfsm.core.errors import (
    BackendConnectionError,
    BackendError,
    BackendHTTPError,
    BackendProtocolError,
    BackendTimeout,
    UsageError,
)

__all__ = [
    "KEY_NOT_SENDABLE",
    "RETRY_STATUSES",
    "CallState",
    "RetryPolicy",
    "Timeouts",
    "bounded",
    "is_retryable",
    "key_sendable",
    "map_transport_error",
    "parse_retry_after",
    "split_base_url",
    "url_secrets",
]

_T = TypeVar("_T")

#: statuses worth another try: timeout, conflict, throttled, server errors
RETRY_STATUSES = frozenset({408, 409, 429})


@dataclass(frozen=True)
class Timeouts:
    """Seconds: to connect, between two reads, and for the whole call (retries included).

    ``total`` is what bounds an upstream that drips one byte at a time, which a read
    timeout alone never does.
    """

    connect: float = 5.0
    read: float = 60.0
    total: float = 120.0


@dataclass
class CallState:
    """One backend call: its deadline and what the last attempt learned."""

    total: float
    deadline: float = 0.0
    #: seconds the upstream asked us to wait (Retry-After of the last attempt)
    retry_after: float | None = None
    planned: dict[int, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.deadline = time.monotonic() + self.total

    def remaining(self) -> float:
        """Seconds left before the deadline (may be negative)."""
        return self.deadline - time.monotonic()

    def check(self) -> float:
        """Seconds left, or BackendTimeout when none are."""
        left = self.remaining()
        if left <= 0:
            raise BackendTimeout(f"no complete answer within the total timeout of {self.total:g}s")
        return left

    def httpx_timeout(self, timeouts: Timeouts) -> httpx.Timeout:
        """Per-attempt httpx timeouts, never past the deadline."""
        left = self.check()
        return httpx.Timeout(
            connect=min(timeouts.connect, left),
            read=min(timeouts.read, left),
            write=min(timeouts.read, left),
            pool=left,
        )

    def attempt_timeouts(self, timeouts: Timeouts) -> AttemptTimeouts:
        """:meth:`httpx_timeout` for an :class:`~agentfsm.backends._upstream.AsyncUpstream`."""
        left = self.check()
        return AttemptTimeouts(min(timeouts.connect, left), min(timeouts.read, left), left)


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds from ``retry-after-ms`` / ``Retry-After`` (delta seconds or an HTTP date)."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


def map_transport_error(exc: httpx.HTTPError, redact: Callable[[str], str]) -> BackendError:
    """An httpx transport error as an agentfsm error (raise it ``from exc``); the transport's
    own words (which may name the upstream's address) are its ``detail``."""
    detail = redact(str(exc) or type(exc).__name__)
    if isinstance(exc, httpx.ConnectTimeout):
        return BackendTimeout("connecting to the upstream timed out", detail=detail)
    if isinstance(exc, httpx.TimeoutException):
        return BackendTimeout(f"upstream timed out ({type(exc).__name__})", detail=detail)
    if isinstance(exc, (httpx.ConnectError, httpx.ReadError, httpx.WriteError, httpx.CloseError)):
        return BackendConnectionError("upstream connection failed", detail=detail)
    if isinstance(exc, httpx.RemoteProtocolError):
        return BackendConnectionError("upstream dropped the connection", detail=detail)
    if isinstance(exc, httpx.ProtocolError):
        return BackendProtocolError("HTTP protocol error", detail=detail)
    return BackendConnectionError("upstream request failed", detail=detail)


def is_retryable(exc: BaseException) -> bool:
    """Connection failures, connect timeouts, and 408/409/429/5xx answers."""
    if isinstance(exc, BackendHTTPError):
        return exc.status_code in RETRY_STATUSES or exc.status_code >= 500
    if isinstance(exc, BackendConnectionError):
        return True
    return isinstance(exc, BackendTimeout) and isinstance(exc.__cause__, httpx.ConnectTimeout)


async def bounded(start: Callable[[], Awaitable[_T]], call: CallState) -> _T:
    """Await ``start()``, but never past the call's deadline (BackendTimeout)."""
    left = call.check()
    try:
        async with asyncio.timeout(left):
            return await start()
    except TimeoutError as exc:
        raise BackendTimeout(f"no complete answer within the total timeout of {call.total:g}s") from exc


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries: ``max_retries`` more attempts, never sleeping past the deadline.

    An upstream's ``Retry-After`` is honoured as it is, or not at all: one longer than
    ``retry_after_cap`` or than the time left is not waited for (retrying sooner than
    asked only earns another refusal); the error, with its ``retry_after``, is raised
    at once, so that a client can wait on its own terms.
    """

    max_retries: int = 3
    retry_after_cap: float = 10.0
    backoff: float = 0.5
    backoff_max: float = 8.0

    def sleep_for(self, call: CallState, attempt: int) -> float:
        """Seconds to wait after failed attempt ``attempt`` (memoized per attempt)."""
        if attempt not in call.planned:
            if call.retry_after is not None:
                seconds = call.retry_after
            else:
                seconds = min(self.backoff * 2 ** (attempt - 1), self.backoff_max)
                seconds *= 0.5 + random.random() / 2  # jitter: no thundering herd
            call.planned[attempt] = seconds
        return call.planned[attempt]

    def _wait(self, call: CallState) -> Callable[[tenacity.RetryCallState], float]:
        def wait(state: tenacity.RetryCallState) -> float:
            return self.sleep_for(call, state.attempt_number)

        return wait

    def _stop(self, call: CallState) -> tenacity.stop.stop_base:
        return tenacity.stop_any(
            tenacity.stop_after_attempt(self.max_retries + 1), _StopAtDeadline(self, call)
        )

    def sync(self, call: CallState) -> tenacity.Retrying:
        """A tenacity controller for one blocking call."""
        return tenacity.Retrying(
            stop=self._stop(call),
            wait=self._wait(call),
            retry=tenacity.retry_if_exception(is_retryable),
            before_sleep=_log_retry,
            reraise=True,
        )

    def asynchronous(self, call: CallState) -> tenacity.AsyncRetrying:
        """A tenacity controller for one async call."""
        return tenacity.AsyncRetrying(
            stop=self._stop(call),
            wait=self._wait(call),
            retry=tenacity.retry_if_exception(is_retryable),
            before_sleep=_log_retry,
            reraise=True,
        )

    async def arun(self, call: CallState, attempt: Callable[..., Awaitable[_T]], *args: Any) -> _T:
        """``attempt(*args)`` under :meth:`asynchronous`'s controller, which is built only
        once the first attempt has failed with a retryable error (most calls never need
        it: building and driving it cost ~0.1 ms a call). The controller then sees that
        failure as its own first attempt, so waits, stops and logs are its own."""
        try:
            return await attempt(*args)
        except Exception as exc:
            if not is_retryable(exc):
                raise
            first: BaseException | None = exc

        async def again(*again_args: Any) -> _T:
            nonlocal first
            if first is not None:
                failed, first = first, None
                raise failed
            return await attempt(*again_args)

        return await self.asynchronous(call)(again, *args)


class _StopAtDeadline(tenacity.stop.stop_base):
    """Stop when the next sleep would end past the call's deadline or exceed the Retry-After cap."""

    def __init__(self, policy: RetryPolicy, call: CallState) -> None:
        self.policy = policy
        self.call = call

    def __call__(self, retry_state: tenacity.RetryCallState) -> bool:
        sleep = self.policy.sleep_for(self.call, retry_state.attempt_number)
        if self.call.retry_after is not None and sleep > self.policy.retry_after_cap:
            return True
        return sleep >= self.call.remaining()


def _log_retry(state: tenacity.RetryCallState) -> None:
    exc = state.outcome.exception() if state.outcome else None
    sleep = state.next_action.sleep if state.next_action else 0.0
    logger.warning(
        "upstream attempt {} failed ({}: {}); retrying in {:.2f}s",
        state.attempt_number, type(exc).__name__, exc, sleep,
    )


#: query parameters of a base URL whose values are credentials (by a part of their name)
_CREDENTIAL_PARAMS = ("key", "token", "secret", "code", "sig", "password", "auth", "credential")


#: why a key cannot be sent (it is never shown: not even its length)
KEY_NOT_SENDABLE = (
    "the upstream key holds a line break or a character other than printable ASCII, which no "
    "HTTP header carries (a key file's last line break, kept by the variable?)"
)


def key_sendable(key: str) -> bool:
    """Whether ``key`` can be sent in a header as it is (printable ASCII)."""
    return key.isascii() and key.isprintable()


def url_secrets(base_url: str) -> list[str]:
    """The values of a base URL's query parameters that carry a credential (``key``,
    ``api-key``, ``code``, ``token``, ``sig`` ...): redacted wherever text is shown."""
    try:
        params = httpx.URL(base_url).params.multi_items()
    except (ValueError, httpx.InvalidURL):
        return []
    return [v for k, v in params if v and any(part in k.lower() for part in _CREDENTIAL_PARAMS)]


def split_base_url(base_url: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """The base URL without its query, and the query's parameters (sent with every request,
    as Azure's ``?api-version=`` must be); a user name or password in it is refused.

    Credentials in a URL travel in clear in every log line that shows the URL, and clash
    with the key's own ``Authorization`` header: the key is given apart (``api_key``).
    A port outside 1-65535 or a host name that does not encode is refused here too (the
    client would fail on every request).
    """
    try:
        url = httpx.URL(base_url)
        host = url.host  # decoded here: a name that does not encode fails now
    except httpx.InvalidURL as exc:
        raise UsageError(f"the base URL is not a URL: {exc}") from None
    except ValueError as exc:  # an IDNA error: a host name that cannot be encoded
        raise UsageError(f"the base URL's host is not a valid name: {exc}") from None
    if url.port is not None and not 0 < url.port < 65536:
        raise UsageError(f"the base URL's port {url.port} is outside 1-65535")
    if url.userinfo:
        shown = url.copy_with(username=None, password=None, query=None)
        raise UsageError(
            f"the base URL {str(shown)!r} holds a user name or password; give the upstream's key "
            "apart (--upstream-api-key or $AGENTFSM_UPSTREAM_API_KEY), not in the URL"
        )
    if url.scheme not in ("http", "https") or not host:
        raise UsageError(f"the base URL must be http(s)://HOST[:PORT][/PATH], got {str(url.copy_with(query=None))!r}")
    params = tuple(url.params.multi_items())
    return str(url.copy_with(query=None, fragment=None)).rstrip("/"), params
