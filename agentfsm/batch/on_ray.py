"""Run a batch beyond one machine: the controller's per-task function on Ray actors.

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

The work is network-bound, so it runs on a few long-lived async actors (worker
processes), not one Ray task per conversation: ``actors`` of them (default: one per CPU
of the cluster, at most ``concurrency``), each reserving ``num_cpus`` and running its
share of the ``concurrency`` conversations at once on its own event loop, through one
backend (one connection pool) that it builds with ``backend_factory`` (a picklable
zero-argument callable: a backend holds sockets). The driver keeps ``concurrency``
conversations in flight and gives each freed slot's actor the next task.
``tools_module`` must be importable on the workers.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Generator, Mapping
from typing import Any

from agentfsm.batch.io import ResultLog, load_tasks
from agentfsm.core.backend import Backend, GenerationOptions, read_options
from agentfsm.core.config import DEFAULTS, RunConfig
from agentfsm.batch.controller import TaskSource
from agentfsm.batch.task import Task, TaskResult, TaskSettings, ToolProvider, run_task, validate_tasks
from agentfsm.core.errors import MissingExtraError, UsageError

__all__ = ["BatchWorker", "run_batch_ray"]


class BatchWorker:
    """The body of one Ray actor: conversations on its event loop, through one backend."""

    def __init__(self, settings: TaskSettings, backend_factory: Callable[[], Backend]) -> None:
        self.settings = settings
        self.factory = backend_factory
        self.provider = ToolProvider(settings.tools_module)
        self.backend: Backend | None = None

    async def run(self, task: dict[str, Any]) -> dict[str, Any]:
        """One conversation, as a plain result dict."""
        if self.backend is None:  # built on the actor's loop, which its pool belongs to
            self.backend = self.factory()
        result = await run_task(Task.model_validate(task), self.backend, self.settings, self.provider)
        return result.model_dump(mode="json")

    async def close(self) -> None:
        """Close the backend's connections."""
        backend, self.backend = self.backend, None
        aclose = getattr(backend, "aclose", None)
        if aclose is not None:
            await aclose()


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
    actors: int | None = None,
    num_cpus: float = 1.0,
    ray_init: dict[str, Any] | None = None,
    options: GenerationOptions | Mapping[str, Any] | None = None,
    **run_settings: Any,
) -> Generator[TaskResult, None, None]:
    """Run the tasks on Ray actors; yield each result once it is written to ``output``.

    Starts a local Ray instance with ``ray.init(**ray_init)`` unless one is already
    connected. ``transcripts_dir`` must be a path the workers share with the driver.
    ``actors`` and ``num_cpus``: see the module. ``config``, ``options`` and ``run_settings``
    as for :func:`~agentfsm.batch.controller.run_batch`.
    """
    if concurrency < 1:
        raise UsageError("concurrency must be at least 1")
    if actors is not None and actors < 1:
        raise UsageError("actors must be at least 1")
    if not num_cpus > 0:
        raise UsageError(f"num_cpus must be a positive number, got {num_cpus!r}")
    ray = _ray()
    settings = TaskSettings(
        run=config.replace(**run_settings) if run_settings else config,
        options=read_options(options),
        tools_module=tools_module,
        transcripts_dir=os.fspath(transcripts_dir) if transcripts_dir is not None else None,
    )
    loaded = load_tasks(tasks)
    validate_tasks(loaded, ToolProvider(tools_module), settings)
    return _drive(ray, loaded, settings, output, backend_factory, concurrency, retry_failed, fsync_every,
                  actors, num_cpus, ray_init)


def _drive(
    ray: Any,
    tasks: list[Task],
    settings: TaskSettings,
    output: str | os.PathLike[str],
    backend_factory: Callable[[], Backend],
    concurrency: int,
    retry_failed: bool,
    fsync_every: int,
    actors: int | None,
    num_cpus: float,
    ray_init: dict[str, Any] | None,
) -> Generator[TaskResult, None, None]:
    log = ResultLog(output, fsync_every=fsync_every)
    workers: list[Any] = []
    try:
        if retry_failed:
            log.drop({r.id for r in log.done.values() if not r.ok})
        todo = [t for t in tasks if t.id not in log.done]
        if not todo:
            return
        pending = iter(todo)
        if not ray.is_initialized():
            ray.init(**(ray_init or {}))
        width = min(concurrency, len(todo))
        count = actors or max(1, int(ray.cluster_resources().get("CPU", 1) // num_cpus))
        count = min(count, width)
        per_actor = math.ceil(width / count)
        actor = ray.remote(num_cpus=num_cpus, max_restarts=0)(BatchWorker)
        workers = [
            actor.options(max_concurrency=per_actor).remote(settings, backend_factory) for _ in range(count)
        ]
        in_flight: dict[Any, Any] = {}  # result ref -> the actor running it

        def submit(worker: Any) -> None:
            task = next(pending, None)
            if task is not None:
                in_flight[worker.run.remote(task.model_dump(mode="json"))] = worker

        for slot in range(width):  # the slots dealt round the actors
            submit(workers[slot % count])
        while in_flight:
            ready, _ = ray.wait(list(in_flight), num_returns=1)
            for ref in ready:
                worker = in_flight.pop(ref)
                result = TaskResult.model_validate(ray.get(ref))
                log.append(result)  # only the driver writes: exactly once
                submit(worker)  # the freed slot's actor takes the next task
                yield result
    finally:
        log.close()
        if workers:
            try:
                ray.get([w.close.remote() for w in workers], timeout=10)
            finally:
                for w in workers:
                    ray.kill(w)
