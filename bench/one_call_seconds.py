"""Seconds and model calls of some suite tasks on the embedded model, from one checkout.

Run it with ``PYTHONPATH=<a checkout>`` to time that checkout's code (two checkouts in
turn give a before/after on the same machine; bench/results/quality-fast-2026-11-26.md):

    PYTHONPATH=. python bench/one_call_seconds.py add_8_5.en1,km_100.en1

Prints one JSON line per task, then the total.
"""

from __future__ import annotations

import asyncio
import json
import sys

from agentfsm.backends.local import LocalBackend
from agentfsm.eval.suite import run_suite_task
from agentfsm.eval.suite_data import TASKS


async def main(names: list[str]) -> None:
    backend = LocalBackend()
    backend.load()
    unknown = set(names) - {t.name for t in TASKS}
    if unknown:
        raise SystemExit(f"unknown task(s): {', '.join(sorted(unknown))}")
    total, calls = 0.0, 0
    for task in TASKS:
        if task.name in names:
            r = await run_suite_task(backend, task)
            total, calls = total + r.seconds, calls + r.model_calls
            print(json.dumps({"task": task.name, "ok": r.valid, "calls": r.model_calls, "s": round(r.seconds, 2)}),
                  flush=True)
    print(json.dumps({"total_s": round(total, 2), "calls": calls}))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    asyncio.run(main(sys.argv[1].split(",")))
