"""Batch jobs: many conversations, resumable, each task's result written exactly once.

``run_batch`` / ``run_batch_sync`` are the local asyncio controller;
:mod:`agentfsm.batch.on_ray` runs the same per-task function on Ray.
"""

from agentfsm.batch.controller import BatchStats, run_batch, run_batch_sync
from agentfsm.batch.task import Task, TaskResult

__all__ = ["BatchStats", "Task", "TaskResult", "run_batch", "run_batch_sync"]
