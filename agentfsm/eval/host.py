"""A one-line description of the machine a benchmark ran on (CPU model, cores, RAM, Python)."""

from __future__ import annotations

import os
import platform
from datetime import UTC, datetime
from pathlib import Path

__all__ = ["machine_description", "now_iso"]


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def _ram_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / (1024 * 1024)
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def machine_description() -> str:
    """``CPU model, N cores, X GiB RAM, Python 3.x.y on OS``."""
    ram = _ram_gib()
    ram_text = f"{ram:.1f} GiB RAM" if ram is not None else "RAM unknown"
    return (
        f"{_cpu_model()}, {_cores()} cores, {ram_text}, "
        f"Python {platform.python_version()} on {platform.system()} {platform.release()}"
    )


def now_iso() -> str:
    """The current UTC time, to the second, ISO 8601."""
    return datetime.now(UTC).replace(microsecond=0).isoformat()
