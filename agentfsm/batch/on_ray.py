"""Run a batch beyond one machine: the controller's per-task function as Ray tasks.

Needs the optional extra ``pip install 'agentfsm[ray]'``. The output contract is the
local controller's (:mod:`agentfsm.batch.controller`): the driver alone writes the results file,
through the same exactly-once log (one complete line per result on an ``O_APPEND``
descriptor, done ids skipped, a torn last line repaired), so a killed driver followed
by a re-run loses and duplicates nothing. Workers only compute; a worker that dies
loses nothing either, because only the driver's write marks a task done.

::

    import functools, ray
    from agentfsm.backends.openai_compat import OpenAICompatBackend
    from agentfsm.batch.on_ray import run_batch_ray

    ray.init(address="auto")               # or let run_batch_ray start a local one
    factory = functools.partial(OpenAICompatBackend, "http://vllm:8000/v1", model="m")
    for result in run_batch_ray("tasks.jsonl", output="results.jsonl",
                                backend_factory=factory, tools_module="my.tools",
                                concurrency=256):
        ...

``backend_factory`` is a picklable zero-argument callable (a backend holds sockets,
so each Ray task builds its own); ``tools_module`` must be importable on the workers.
Each Ray task runs one conversation with :func:`agentfsm.batch.task.run_task`;
``concurrency`` bounds the tasks in flight, and ``num_cpus`` what each one reserves
(fractional by default: the work is network-bound).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Generator
from typing import Any

from agentfsm.batch.io import ResultLog, load_tasks
from agentfsm.core.backend import Backend
from agentfsm.core.config import DEFAULTS, RunConfig
from agentfsm.batch.controller import TaskSource
from agentfsm.batch.task import Task, TaskResult, TaskSettings, ToolProvider, run_task, validate_tasks
from agentfsm.core.errors import MissingExtraError, UsageError

__all__ = ["run_batch_ray", "run_task_remote"]


def run_task_remote(
    task: dict[str, Any], settings: TaskSettings, backend_factory: Callable[[], Backend]
) -> dict[str, Any]:
    """The body of one Ray task: one conversation, as a plain result dict."""

    async def once() -> TaskResult:
        backend = backend_factory()
        try:
            return await run_task(Task.model_validate(task), backend, settings)
        finally:
            aclose = getattr(backend, "aclose", None)
            if aclose is not None:
                await aclose()

    return asyncio.run(once()).model_dump(mode="json")


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise MissingExtraError("ray", "running a batch on Ray") from exc
    return ray


def run_batch_ray(
    tasks: TaskSource,
    *,
    output: str | os.PathLike[str],
    backend_factory: Callable[[], Backend],
    tools_module: str | None = None,
    concurrency: int = 64,
    transcripts_dir: str | os.PathLike[str] | None = None,
    config: RunConfig = DEFAULTS,
    retry_failed: bool = False,
    fsync_every: int = 32,
    num_cpus: float = 0.25,
    ray_init: dict[str, Any] | None = None,
    **run_settings: Any,
) -> Generator[TaskResult, None, None]:
    """Run the tasks as Ray tasks; yield each result once it is written to ``output``.

    Starts a local Ray instance with ``ray.init(**ray_init)`` unless one is already
    connected. ``transcripts_dir`` must be a path the workers share with the driver.
    ``config`` and ``run_settings`` as for :func:`~agentfsm.batch.controller.run_batch`.
    """
    if concurrency < 1:
        raise UsageError("concurrency must be at least 1")
    ray = _ray()
    settings = TaskSettings(
        run=config.replace(**run_settings) if run_settings else config,
        tools_module=tools_module,
        transcripts_dir=os.fspath(transcripts_dir) if transcripts_dir is not None else None,
    )
    loaded = load_tasks(tasks)
    validate_tasks(loaded, ToolProvider(tools_module), settings)
    return _drive(ray, loaded, settings, output, backend_factory, concurrency, retry_failed, fsync_every, num_cpus, ray_init)


def _drive(
    ray: Any,
    tasks: list[Task],
    settings: TaskSettings,
    output: str | os.PathLike[str],
    backend_factory: Callable[[], Backend],
    concurrency: int,
    retry_failed: bool,
    fsync_every: int,
    num_cpus: float,
    ray_init: dict[str, Any] | None,
) -> Generator[TaskResult, None, None]:
    log = ResultLog(output, fsync_every=fsync_every)
    try:
        if retry_failed:
            log.drop({r.id for r in log.done.values() if not r.ok})
        pending = iter([t for t in tasks if t.id not in log.done])
        if not ray.is_initialized():
            ray.init(**(ray_init or {}))
        remote = ray.remote(num_cpus=num_cpus, max_retries=0)(run_task_remote)
        factory_ref = ray.put(backend_factory)
        in_flight: list[Any] = []

        def submit() -> bool:
            task = next(pending, None)
            if task is None:
                return False
            in_flight.append(remote.remote(task.model_dump(mode="json"), settings, factory_ref))
            return True

        while len(in_flight) < concurrency and submit():
            pass
        while in_flight:
            ready, rest = ray.wait(in_flight, num_returns=1)
            in_flight[:] = rest
            for ref in ready:
                result = TaskResult.model_validate(ray.get(ref))
                log.append(result)  # only the driver writes: exactly once
                submit()
                yield result
    finally:
        log.close()
