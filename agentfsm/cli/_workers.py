"""``agentfsm serve --workers N``: N processes answering on one port, each with the same app.

The proxy keeps no state between requests (each request's state is derived from its
history), so any worker can answer any request. uvicorn binds the socket once and starts
the workers (spawned processes, restarted when one dies); each builds its app from the
options the parent checked, which travel in one environment variable as JSON. The keys
never do: each travels in its own documented variable (``AGENTFSM_API_KEY``,
``AGENTFSM_UPSTREAM_API_KEY``, and those a models file names), which the workers inherit.
Each worker runs the same guarded HTTP protocol as one process does (a header deadline,
a connection limit per worker: :mod:`agentfsm.server.limits`), named in this module so
that uvicorn can hand it to the spawned workers.

A worker that dies is replaced by uvicorn and said in a warning (uvicorn tells it at
INFO, below serve's level). A worker that fails to start (its app cannot be built, or
uvicorn's start-up fails in it) would fail the same way every time: uvicorn then stops
the others, and ``agentfsm serve`` exits 3 (the code of a start-up failure, as when the port
is taken) with one line saying why, ``agentfsm: error: a worker failed to start: ...``,
so that a supervisor restarts it. Before, uvicorn's stop returned and serve exited 0,
and a worker whose app could not be built died with a traceback and was replaced, and
again, for ever. A worker whose parent is gone (killed with SIGKILL, or by
the kernel's OOM killer) stops itself within a second: it would otherwise serve on,
orphaned, holding the port that a new ``agentfsm serve`` then could not bind.

SIGHUP to ``agentfsm serve`` makes uvicorn replace the workers one at a time, each new
one building its app again (the models file read again) and the old one stopped once the
new one serves; a new worker that cannot build its app is stopped and the old ones serve
on, said in one line with why (``SIGHUP: the workers were not started again, they serve
as they did: ...``), where uvicorn said only that it ``was not ready in time``. The
workers themselves ignore SIGHUP: one sent to the whole process group (a terminal's
hangup) killed each mid-request, before the supervisor replaced it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

__all__ = ["graceful", "serve_workers", "worker_app"]

#: the checked options of ``agentfsm serve``, as JSON, for the workers
OPTIONS_ENV = "AGENTFSM_SERVE_OPTIONS"
#: the header deadline and connection limit of each worker's HTTP protocol, as JSON
GUARD_ENV = "AGENTFSM_SERVE_GUARD"
#: the process id of the workers' parent (a worker started as its parent died sees
#: another parent already: it must not take that one for its own)
PARENT_ENV = "AGENTFSM_SERVE_PARENT"
#: a folder where a worker that failed to start leaves why, for the parent to say
FAILED_ENV = "AGENTFSM_SERVE_FAILED"
#: uvicorn's exit status for a server that could not start (``uvicorn.config.STARTUP_FAILURE``)
STARTUP_FAILURE = 3
_PATHS = ("transcripts", "models")
#: seconds a worker may take to answer uvicorn's health check, and a new one (SIGHUP) to
#: start serving (uvicorn's default, 5, aborted a restart whose worker took longer to
#: import and build its app, as a busy machine's or one loading the embedded model does)
HEALTHCHECK_TIMEOUT = 30


def _protocol(header_timeout: float, max_connections: int) -> type[asyncio.Protocol]:
    """The guarded protocol, under this module's name ``WorkerProtocol`` (pickled by
    reference to the workers, which build it again from :data:`GUARD_ENV` on import)."""
    from agentfsm.server.limits import guarded_protocol

    protocol = guarded_protocol(header_timeout, max_connections)
    protocol.__module__, protocol.__qualname__ = __name__, "WorkerProtocol"
    return protocol


#: the workers' HTTP protocol (set in the parent by :func:`serve_workers`, in a worker on import)
WorkerProtocol: type[asyncio.Protocol] | None = (
    _protocol(*json.loads(os.environ[GUARD_ENV])) if GUARD_ENV in os.environ else None
)


def _verbose() -> bool:
    """Whether the operator asked for INFO lines or more (``AGENTFSM_LOG_LEVEL``)."""
    return os.environ.get("AGENTFSM_LOG_LEVEL", "WARNING").strip().upper() in ("TRACE", "DEBUG", "INFO")


class _WorkerDeaths(logging.Filter):
    """On uvicorn's supervisor logger: a worker's death (told at INFO) as a warning; its
    other INFO lines only where the operator asked for them; and a restart (SIGHUP) that a
    new worker failed, with why (``failed``: where workers leave it), not as uvicorn tells
    it (``New child process [PID] was not ready in time; ...``)."""

    def __init__(self, verbose: bool, failed: Path | None = None) -> None:
        super().__init__()
        self._verbose = verbose
        self._failed = failed

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING:
            self._restart_failed(record)
            return True
        text = record.getMessage()
        if text.startswith("Child process [") and text.endswith("died"):
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.msg, record.args = f"worker {text.removeprefix('Child process ')}; a new worker replaces it", None
            return True
        if text.startswith("Received SIGHUP"):  # said, as one process says its reload
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.msg, record.args = "SIGHUP: replacing the workers one at a time, each reading the models file again", None
            return True
        return self._verbose

    def _restart_failed(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if self._failed is None or not (text.startswith("New child process [") and "not ready in time" in text):
            return
        left = self._failed / text.removeprefix("New child process [").split("]", 1)[0]
        try:
            why = left.read_text(encoding="utf-8", errors="replace").strip()
            left.unlink()
        except OSError:  # not a failure to build the app (a start slower than uvicorn waits): as uvicorn says
            return
        record.msg, record.args = f"SIGHUP: the workers were not started again, they serve as they did: {why}", None

    def filter_errors(self, record: logging.LogRecord) -> bool:
        """uvicorn's ``Child process [PID] failed to start, stopping the parent process.``
        left out: serve says it once it has stopped, with why (:func:`serve_workers`)."""
        return not record.getMessage().endswith("failed to start, stopping the parent process.")


def _exit_with_parent(parent: int, interval: float = 1.0) -> None:
    """Stop this worker (SIGTERM: uvicorn's own graceful shutdown) once ``parent`` is no
    longer its parent."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="agentfsm-parent-watch", daemon=True).start()


def graceful(shutdown_timeout: float) -> dict[str, Any]:
    """uvicorn's setting for ``--shutdown-timeout``: once told to stop, it waits that long
    for the requests under way, then cancels them (the app answers each 503 and ends its
    transcript cancelled, :func:`agentfsm.server.handle.serve`). uvicorn annotates it
    ``int`` but uses it as :func:`asyncio.wait_for`'s timeout, which takes any seconds."""
    return {"timeout_graceful_shutdown": shutdown_timeout}


def serve_workers(options: dict[str, Any], *, workers: int, port: int, api_key: str | None,
                  upstream_api_key: str | None, guard: tuple[float, int], shutdown_timeout: float) -> None:
    """Serve ``options``' app from ``workers`` processes on ``port`` (until stopped), each
    with ``guard`` (header timeout, connection limit) on its HTTP protocol and
    ``shutdown_timeout`` for its requests under way once stopped (uvicorn's supervisor
    passes SIGTERM on to each worker). Stopped by SIGTERM, the process then ends by it, as
    one process does (a shell says 143); by Ctrl-C, it returns (0), as one process does."""
    import uvicorn

    global WorkerProtocol
    os.environ[GUARD_ENV] = json.dumps(list(guard))
    WorkerProtocol = _protocol(*guard)

    plain = {k: str(v) if k in _PATHS and v is not None else v for k, v in options.items()}
    plain["config"] = options["config"].as_dict()
    os.environ[OPTIONS_ENV] = json.dumps(plain)
    os.environ[PARENT_ENV] = str(os.getpid())
    for name, value in (("AGENTFSM_API_KEY", api_key), ("AGENTFSM_UPSTREAM_API_KEY", upstream_api_key)):
        if value:
            os.environ[name] = value
    # the supervisor's INFO lines reach the filter, which keeps a worker's death
    failed = Path(tempfile.mkdtemp(prefix="agentfsm-serve-"))
    os.environ[FAILED_ENV] = str(failed)
    deaths = _WorkerDeaths(_verbose(), failed)
    logging.getLogger("uvicorn.error").addFilter(deaths)
    logging.getLogger("uvicorn.error").addFilter(deaths.filter_errors)
    try:
        with _signals_received() as received:
            uvicorn.run(
                "agentfsm.cli._workers:worker_app", factory=True, workers=workers, host=options["host"], port=port,
                log_level="info", access_log=False, loop="auto", http=WorkerProtocol, **graceful(shutdown_timeout),
                timeout_worker_healthcheck=HEALTHCHECK_TIMEOUT,
            )
        said = sorted(p.read_text(encoding="utf-8", errors="replace").strip() for p in failed.iterdir())
    finally:
        shutil.rmtree(failed, ignore_errors=True)
    if signal.SIGTERM in received:  # as one process ends (uvicorn raises the signal it caught again)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.raise_signal(signal.SIGTERM)
    if signal.SIGINT not in received:  # uvicorn stops by itself only when a worker failed to start
        why = f": {said[0]}" if said else " (uvicorn's error above says why)"
        print(f"agentfsm: error: a worker failed to start{why}", file=sys.stderr)
        raise SystemExit(STARTUP_FAILURE)


@contextmanager
def _signals_received() -> Iterator[set[int]]:
    """The numbers of the signals received while inside, once left. uvicorn's supervisor
    takes SIGTERM and SIGINT alike and returns: its handlers tell nothing, so Python's
    wakeup file descriptor (written for each signal a Python handler takes) does."""
    received: set[int] = set()
    if threading.current_thread() is not threading.main_thread():
        yield received
        return
    read, write = os.pipe()
    os.set_blocking(read, False)
    os.set_blocking(write, False)
    previous = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    try:
        yield received
    finally:
        signal.set_wakeup_fd(previous)
        try:
            while chunk := os.read(read, 4096):
                received.update(chunk)
        except BlockingIOError:
            pass
        os.close(read)
        os.close(write)


def worker_app() -> Any:
    """The app of one worker: logging as the CLI sets it up, then the parent's options."""
    from loguru import logger

    from agentfsm.cli._logging import configure_logging
    from agentfsm.cli.serve import build_app, freeze_heap
    from agentfsm.core.config import DEFAULTS

    configure_logging(os.environ.get("AGENTFSM_LOG_LEVEL", "WARNING"))
    logger.enable("agentfsm")
    if hasattr(signal, "SIGHUP") and threading.current_thread() is threading.main_thread():
        # the supervisor's to answer (by replacing this worker once its new one serves); a
        # hangup sent to the whole group (the terminal's) would otherwise kill it mid-request
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    if not _verbose():  # uvicorn runs at INFO for the supervisor's sake (above)
        logging.getLogger("uvicorn.error").setLevel(logging.WARNING)
    _exit_with_parent(int(os.environ.get(PARENT_ENV) or os.getppid()))
    try:
        options = json.loads(os.environ[OPTIONS_ENV])
        options["config"] = DEFAULTS.replace(**options["config"])  # JSON's lists read as tuples (RunConfig)
        for name in _PATHS:
            if options.get(name) is not None:
                options[name] = Path(options[name])
        app = build_app(
            api_key=os.environ.get("AGENTFSM_API_KEY") or None,
            upstream_api_key=os.environ.get("AGENTFSM_UPSTREAM_API_KEY") or None,
            **options,
        )
    except Exception as exc:  # noqa: BLE001 - any failure to build the app is a failure to start
        _failed_to_start(exc)
    freeze_heap()  # each worker's collector tuned as the single process's is
    return app


def _failed_to_start(exc: Exception) -> NoReturn:
    """End this worker as uvicorn ends one that could not start (so its supervisor stops,
    rather than start another that fails alike), leaving why for the parent to say."""
    from agentfsm.core.errors import AgentFSMError

    text = str(exc) if isinstance(exc, AgentFSMError) else f"{type(exc).__name__}: {exc}"
    why = " ".join(text.split())
    try:
        (Path(os.environ[FAILED_ENV]) / str(os.getpid())).write_text(why, encoding="utf-8")
    except (KeyError, OSError):  # no folder to leave it in: said here instead
        print(f"agentfsm: error: worker [{os.getpid()}] failed to start: {why}", file=sys.stderr)
    raise SystemExit(STARTUP_FAILURE)
