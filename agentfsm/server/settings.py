"""The proxy's settings: the run configuration plus what only a server has.

Declared once here, with their defaults; :func:`~agentfsm.server.app.create_app` and
``agentfsm serve`` read them from here. This module imports no server library, so the
CLI can show these defaults without loading Starlette.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeAlias, get_args

from agentfsm.core.config import DEFAULTS, RunConfig
from agentfsm.core.errors import UsageError

if TYPE_CHECKING:
    from pydantic import SecretStr

    from agentfsm.server.observe import Watch

__all__ = [
    "DEFAULT_BODY_TIMEOUT",
    "DEFAULT_HEADER_TIMEOUT",
    "DEFAULT_KEEP_ALIVE",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_TOOLS",
    "DEFAULT_SHUTDOWN_TIMEOUT",
    "NOT_FOR_THE_PROXY",
    "STREAM_PROSE",
    "Settings",
    "StreamProse",
    "check_served",
]

#: run-configuration fields the proxy does not take from its configuration: each request
#: brings its own tool_choice and parallel, and runs one deciding turn and no tools
NOT_FOR_THE_PROXY = ("tool_choice", "parallel", "max_steps", "result_max_chars")


def check_served(names: Iterable[str]) -> None:
    """Refuse settings named for a served model that the proxy does not take
    (:data:`NOT_FOR_THE_PROXY`): a models file's entry, its profile's chosen settings and
    ``create_app``'s keywords name them the same way, and none is dropped silently."""
    not_here = sorted(name for name in names if name in NOT_FOR_THE_PROXY)
    if not_here:
        raise UsageError(
            f"{', '.join(not_here)}: each request brings its own tool_choice and parallel, and runs one "
            "deciding turn and no tools (not a setting of a served model)"
        )


#: how a streamed tool-mode answer's prose leaves: ``exact``, held until the engine accepts
#: the reply, so that the stream carries what the whole answer carries; ``live``, as the
#: model writes it, where a refused reply's prose has then already reached the client
StreamProse: TypeAlias = Literal["exact", "live"]
STREAM_PROSE: tuple[StreamProse, ...] = get_args(StreamProse)


#: the largest request body accepted by default (32 MiB, about what Anthropic's API takes:
#: a Claude Code session carries each screenshot it has read, base64 in a tool result, in
#: every later request)
DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024
#: seconds a client may take to send its whole body by default
DEFAULT_BODY_TIMEOUT = 30.0
#: seconds a client may take to send a request's line and headers by default (the HTTP
#: server's bound: :func:`agentfsm.server.limits.guarded_protocol`)
DEFAULT_HEADER_TIMEOUT = 10.0
#: seconds ``serve`` waits, once told to stop (SIGTERM, Ctrl-C), for the requests under way
#: before it cancels them: under Docker's 10 s grace before SIGKILL (``docker stop``), so
#: that a cancelled request still answers its client and ends its transcript
DEFAULT_SHUTDOWN_TIMEOUT = 8.0
#: seconds a stream may go without an event before the proxy sends a keep-alive (an SSE
#: comment; Anthropic's ``ping``): a held stream (a turn being decided on a slow model)
#: sends nothing for minutes, and clients, proxies and load balancers give up on an idle
#: stream (nginx's ``proxy_read_timeout``: 60 s; Codex's stream idle timeout: 300 s)
DEFAULT_KEEP_ALIVE = 15.0
#: the most tools one request may offer by default (OpenAI's own API takes 128; the
#: contract, grammar and parser of a tool set are built per distinct set, in memory
#: bounded in bytes, and a set of thousands costs seconds to build)
DEFAULT_MAX_TOOLS = 2048


@dataclass(frozen=True)
class Settings:
    """How the proxy runs every request (fixed when the app is built).

    ``run`` is the run configuration; the proxy uses every field but
    :data:`NOT_FOR_THE_PROXY` (each request brings its own ``tool_choice`` and
    ``parallel``, and runs one deciding turn and no tools).
    """

    run: RunConfig = DEFAULTS
    #: a SecretStr: shown as '**********' in reprs and tracebacks' locals
    api_key: SecretStr | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    transcripts_dir: Path | None = None
    model_name: str | None = None
    request_timeout: float | None = None
    #: seconds a client may take to send its whole body (408 after)
    body_timeout: float = DEFAULT_BODY_TIMEOUT
    #: what watches every request (metrics, tracing: :mod:`agentfsm.server.observe`); None: nothing
    watch: Watch | None = None
    #: host names a request's ``Host`` may carry besides loopback names (``*.suffix``,
    #: ``*`` for any); None: loopback names only without an API key, any host with one
    allowed_hosts: tuple[str, ...] | None = None
    #: origins a browser request may come from besides loopback ones (``*`` for any)
    allowed_origins: tuple[str, ...] = ()
    #: the most tools one request may offer (a 400 above)
    max_tools: int = DEFAULT_MAX_TOOLS
    #: requests one client (address) may have at the upstream at once (None: no bound)
    client_share: int | None = None
    #: how streamed prose leaves (:data:`StreamProse`)
    stream_prose: StreamProse = "exact"
    #: seconds a stream may go without an event before a keep-alive is sent
    keep_alive: float = DEFAULT_KEEP_ALIVE
    #: where ``run`` came from, as transcripts record it (:attr:`~agentfsm.server.models.ServedModel.settings_from`)
    settings_from: str = "flags"
