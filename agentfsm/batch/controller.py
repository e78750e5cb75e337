"""The batch controller: many tool-using conversations, resumable, exactly once each.

::

    async for result in agentfsm.run_batch("tasks.jsonl", output="results.jsonl",
                                           backend=backend, tools_module="my.tools",
                                           concurrency=64):
        print(result.id, result.ok)

    stats = agentfsm.run_batch_sync(tasks, output="results.jsonl", backend=backend)

Contract:

- **Exactly once.** Results are appended one complete line per task (see
  :mod:`agentfsm.batch.io`); a re-run skips ids already in the output and repairs a
  torn last line, so a kill at any moment followed by a re-run loses and duplicates
  nothing. Results appear in completion order.
- **Failures are results.** A task whose run fails (a spent retry budget, a loop, a
  backend error, a tool module that raises) is written with ``ok: false`` and its
  ``error``, and counts as done: a re-run retries nothing unless ``retry_failed=True``
  (``--retry-failed``), which first removes the failed lines (atomic rewrite) and then
  runs those tasks again.
- **Bad input stops the batch before it starts.** A malformed tasks line, a duplicate
  id, a tool that the tools module does not implement, or an output file or transcripts
  directory that cannot be written raises :class:`~agentfsm.core.errors.UsageError`
  naming the line, task or path; nothing is written.
- **Bounded concurrency.** ``concurrency`` workers share one backend (one connection
  pool); ``backend`` may also be a zero-argument factory, called once. The workers
  start spread over ``ramp`` seconds (default :data:`DEFAULT_RAMP`), not at once: a
  herd of first requests reaches the upstream together, and the one event loop
  prepares them all before the first is sent, so the conversations then move in
  step, round after round.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agentfsm.batch.io import ResultLog, load_tasks
from agentfsm.batch.loop import run_on_batch_loop
from agentfsm.core.backend import Backend, GenerationOptions, read_options
from agentfsm.core.config import DEFAULTS, RunConfig
from agentfsm.batch.task import Task, TaskResult, TaskSettings, ToolProvider, run_task, validate_tasks
from agentfsm.core.errors import UsageError

__all__ = [
    "BatchRun",
    "BatchStats",
    "DEFAULT_RAMP",
    "Task",
    "TaskResult",
    "TaskSettings",
    "failure_reason",
    "run_batch",
    "run_batch_sync",
]

#: seconds over which a batch's workers start (see the module)
DEFAULT_RAMP = 0.1

TaskSource = str | os.PathLike[str] | Iterable[Task | Mapping[str, Any]]


@dataclass
class BatchStats:
    """Running totals of a batch (this run's tasks; ``skipped`` were done before)."""

    total: int = 0
    skipped: int = 0
    done: int = 0
    ok: int = 0
    failed: int = 0
    corrections: int = 0
    #: corrections (and stops) by guard name
    guards: dict[str, int] = field(default_factory=dict)
    #: failed tasks by reason: the class of the error that ended them
    failures: dict[str, int] = field(default_factory=dict)
    tool_calls: int = 0
    model_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    started: float = field(default_factory=time.perf_counter)
    finished: float | None = None

    def add(self, result: TaskResult) -> None:
        """Count one finished task."""
        self.done += 1
        if result.ok:
            self.ok += 1
        else:
            self.failed += 1
            reason = failure_reason(result.error)
            self.failures[reason] = self.failures.get(reason, 0) + 1
        self.corrections += result.corrections
        for name, count in result.guards.items():
            self.guards[name] = self.guards.get(name, 0) + count
        self.tool_calls += len(result.tool_calls)
        self.model_calls += result.steps
        self.prompt_tokens += result.usage.get("prompt_tokens", 0)
        self.completion_tokens += result.usage.get("completion_tokens", 0)

    @property
    def pending(self) -> int:
        """Tasks this run has still to finish."""
        return self.total - self.skipped - self.done

    @property
    def refusals(self) -> int:
        """Corrections by the refusal guard."""
        return self.guards.get("refusal", 0)

    @property
    def wall_seconds(self) -> float:
        """Seconds since the batch started (until it finished)."""
        return (self.finished or time.perf_counter()) - self.started

    @property
    def success_rate(self) -> float:
        """ok / done for this run (1.0 when nothing ran)."""
        return self.ok / self.done if self.done else 1.0

    @property
    def calls_per_second(self) -> float:
        """Model calls per wall-clock second."""
        wall = self.wall_seconds
        return self.model_calls / wall if wall > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        """The summary as plain JSON."""
        return {
            "total": self.total,
            "skipped": self.skipped,
            "done": self.done,
            "ok": self.ok,
            "failed": self.failed,
            "success_rate": round(self.success_rate, 4),
            "corrections": self.corrections,
            "corrections_by_guard": dict(sorted(self.guards.items())),
            "failures_by_reason": dict(sorted(self.failures.items())),
            "refusals": self.refusals,
            "tool_calls": self.tool_calls,
            "model_calls": self.model_calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "wall_seconds": round(self.wall_seconds, 3),
        }


class BatchRun:
    """An async iterator of this run's results; ``stats`` fill in as they arrive.

    Call ``await run.start()`` first to learn ``stats.total`` / ``stats.skipped``
    before the first result (iteration starts it otherwise).
    """

    def __init__(
        self,
        tasks: TaskSource,
        *,
        output: str | os.PathLike[str],
        backend: Backend | Callable[[], Backend] | None,
        settings: TaskSettings,
        concurrency: int,
        retry_failed: bool,
        fsync_every: int,
        close_backend: bool | None = None,
        ramp: float = DEFAULT_RAMP,
    ) -> None:
        if concurrency < 1:
            raise UsageError("concurrency must be at least 1")
        if not ramp >= 0:
            raise UsageError(f"ramp must be a number of seconds >= 0, got {ramp!r}")
        self.ramp = ramp
        self._source = tasks
        self._output = output
        self._backend = backend
        self.settings = settings
        self.concurrency = concurrency
        self.retry_failed = retry_failed
        self.fsync_every = fsync_every
        #: close the backend's connections at the end (default: when built from a factory)
        self.close_backend = close_backend
        self.stats = BatchStats()
        self.log: ResultLog | None = None
        self._pending: list[Task] = []
        self._provider: ToolProvider | None = None
        self._iter: AsyncGenerator[TaskResult, None] | None = None

    async def start(self) -> None:
        """Read and check the tasks, open the output, work out what is left (idempotent)."""
        if self.log is not None:
            return
        tasks = load_tasks(self._source)
        provider = ToolProvider(self.settings.tools_module)
        validate_tasks(tasks, provider, self.settings)
        log = ResultLog(self._output, fsync_every=self.fsync_every)
        if self.retry_failed:
            log.drop({r.id for r in log.done.values() if not r.ok})
        self.log = log
        self._provider = provider
        self._pending = [t for t in tasks if t.id not in log.done]
        self.stats = BatchStats(total=len(tasks), skipped=len(tasks) - len(self._pending))

    def _resolve_backend(self) -> tuple[Backend, bool]:
        """The backend, and whether this run built it."""
        backend = self._backend
        if backend is None:
            from agentfsm.runtime.agent import _default_backend

            return _default_backend(), False
        if isinstance(backend, Backend):
            return backend, False
        return backend(), True

    async def _results(self) -> AsyncGenerator[TaskResult, None]:
        await self.start()
        log, provider = self.log, self._provider
        assert log is not None and provider is not None
        if not self._pending:
            self.stats.finished = time.perf_counter()
            log.close()
            return
        backend, built = self._resolve_backend()
        close = built if self.close_backend is None else self.close_backend
        # a result, None when a worker is done, or the exception that ended one
        queue: asyncio.Queue[TaskResult | Exception | None] = asyncio.Queue()
        todo = iter(self._pending)

        count = min(self.concurrency, len(self._pending))

        async def worker(number: int) -> None:
            try:
                if number and self.ramp:
                    await asyncio.sleep(self.ramp * number / count)
                for task in todo:  # a shared iterator: each task is taken by one worker
                    result = await run_task(task, backend, self.settings, provider)
                    log.append(result)  # on disk before anyone sees it
                    self.stats.add(result)
                    queue.put_nowait(result)
            except Exception as exc:
                # the batch stops now (a results file that cannot be written): the other
                # workers must not go on running tasks whose results cannot be kept
                queue.put_nowait(exc)
                raise
            finally:
                queue.put_nowait(None)

        workers = [asyncio.create_task(worker(number)) for number in range(count)]
        running = len(workers)
        try:
            while running:
                item = await queue.get()
                if item is None:
                    running -= 1
                    continue
                if isinstance(item, Exception):
                    raise item
                yield item
            for w in workers:
                w.result()  # surface a worker's unexpected crash
        finally:
            for w in workers:
                w.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            self.stats.finished = time.perf_counter()
            log.close()
            aclose = getattr(backend, "aclose", None)
            if close and aclose is not None:
                await aclose()

    def __aiter__(self) -> AsyncIterator[TaskResult]:
        return self

    async def __anext__(self) -> TaskResult:
        if self._iter is None:
            self._iter = self._results()
        return await self._iter.__anext__()

    async def aclose(self) -> None:
        """Stop early: cancel the workers and close the output."""
        if self._iter is not None:
            await self._iter.aclose()
        elif self.log is not None:
            self.log.close()


def failure_reason(error: str | None) -> str:
    """A failed task's reason: the class of its error (``"RetryBudgetExceeded: ..."``)."""
    head = (error or "").split(":", 1)[0].strip()
    return head if head.isidentifier() else "error"


def run_batch(
    tasks: TaskSource,
    *,
    output: str | os.PathLike[str],
    backend: Backend | Callable[[], Backend] | None = None,
    tools_module: str | None = None,
    concurrency: int = 8,
    transcripts_dir: str | os.PathLike[str] | None = None,
    config: RunConfig = DEFAULTS,
    retry_failed: bool = False,
    fsync_every: int = 32,
    close_backend: bool | None = None,
    ramp: float = DEFAULT_RAMP,
    options: GenerationOptions | Mapping[str, Any] | None = None,
    **run_settings: Any,
) -> BatchRun:
    """Run ``tasks`` (a JSONL path, or Task/dict values) into ``output``; iterate the results.

    ``backend`` defaults to the embedded local model. ``tools_module`` supplies the tool
    implementations (``"pkg.mod"`` or ``"pkg.mod:TOOLS"``). ``fsync_every``: fsync after
    that many lines (0: only at the end); a process kill loses nothing either way.
    ``close_backend``: ``aclose()`` the backend at the end (default: only one this run
    built from a factory). ``ramp``: seconds over which the ``concurrency`` workers
    start (0: all at once). ``config`` is the run configuration (the agent's, for every
    task); ``run_settings`` (``dialect="command"``, ``max_steps=4``, ...) change it.
    ``options``: the generation options of every task's model calls, as ``Agent(options=...)``
    takes them (a task line carries none of its own).
    """
    settings = TaskSettings(
        run=config.replace(**run_settings) if run_settings else config,
        options=read_options(options),
        tools_module=tools_module,
        transcripts_dir=os.fspath(transcripts_dir) if transcripts_dir is not None else None,
    )
    return BatchRun(
        tasks,
        output=output,
        backend=backend,
        settings=settings,
        concurrency=concurrency,
        retry_failed=retry_failed,
        fsync_every=fsync_every,
        close_backend=close_backend,
        ramp=ramp,
    )


def run_batch_sync(tasks: TaskSource, **kwargs: Any) -> BatchStats:
    """:func:`run_batch` to the end, blocking; returns the stats. Not inside a running loop.

    The backend's async connections are closed at the end (they belong to the event
    loop this call starts and ends), unless ``close_backend=False``. It runs as
    :func:`run_on_batch_loop` runs its work (uvloop where installed, the collector
    tuned for throughput).
    """

    async def drain() -> BatchStats:
        run = run_batch(tasks, **{"close_backend": True, **kwargs})
        async for _ in run:
            pass
        return run.stats

    return run_on_batch_loop(drain)
