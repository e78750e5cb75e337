"""What the Python client scripts share: the proxy's address, the tool, the result lines.

A script runs every mode named on its command line, one after the other (one process,
one import), and prints one JSON line per mode: its result, or the client's error.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any

URL = os.environ["AGENTFSM_URL"]
OPENAI_URL = f"{URL}/v1"
KEY = "unused"
MODEL = "fake-model"
QUESTION = "What is the weather in Paris? Use the get_weather tool."
#: every call the model's tool received in the current mode, in order
CALLS: list[dict[str, str]] = []
MODE = {"name": ""}


def get_weather(city: str) -> str:
    """Get the current weather in a city."""
    CALLS.append({"city": city})
    return f"18 C and sunny in {city}"


def done(final: object, **extra: object) -> None:
    """Print the current mode's result as one JSON line (the test reads it)."""
    print(json.dumps({"mode": MODE["name"], "final": final, "calls": CALLS, **extra}, default=str), flush=True)


def run_modes(main: Callable[[str], Any]) -> None:
    """Run ``main(mode)`` for each mode in ``sys.argv[1:]``; a failure is printed, not raised."""
    for mode in sys.argv[1:]:
        CALLS.clear()
        MODE["name"] = mode
        try:
            outcome = main(mode)
            if inspect.iscoroutine(outcome):
                asyncio.run(outcome)
        except Exception:
            print(json.dumps({"mode": mode, "error": traceback.format_exc()}), flush=True)
