"""The client suite's fixtures (the proxy subprocess, grouped client runs); helpers in ``_harness``."""

from tests.clients._harness import proxy, run_group

__all__ = ["proxy", "run_group"]
