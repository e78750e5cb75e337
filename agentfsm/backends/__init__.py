"""Model backends: the embedded model, OpenAI-compatible upstreams, scripted and replay.

All implement :class:`~agentfsm.backends.base.Backend`. :func:`create_backend` builds
one by kind; the local backend is imported lazily, so that using an upstream never
needs ``llama-cpp-python``.
"""

from __future__ import annotations

from typing import Any

from agentfsm.backends._transport import Timeouts
from agentfsm.backends.base import Backend, Capabilities, Completion, GenerationOptions, ListContinuation, Usage
from agentfsm.backends.openai_compat import JSONSchemaMode, OpenAICompatBackend
from agentfsm.backends.replay import ReplayBackend, read_model_outputs
from agentfsm.backends.scripted import ScriptedBackend, ScriptedRequest, ScriptExhausted
from agentfsm.errors import UsageError

__all__ = [
    "BACKEND_KINDS",
    "Backend",
    "Capabilities",
    "Completion",
    "GenerationOptions",
    "JSONSchemaMode",
    "ListContinuation",
    "OpenAICompatBackend",
    "ReplayBackend",
    "ScriptExhausted",
    "ScriptedBackend",
    "ScriptedRequest",
    "Timeouts",
    "Usage",
    "create_backend",
    "read_model_outputs",
]

#: the kinds :func:`create_backend` knows
BACKEND_KINDS = ("local", "openai", "scripted", "replay")


def create_backend(kind: str, **kwargs: Any) -> Backend:
    """A backend by kind: ``local`` (shared, loaded once), ``openai``, ``scripted``, ``replay``.

    Keyword arguments go to the backend's constructor (for ``local``, to
    :func:`~agentfsm.backends.local.get_local_backend`).
    """
    if kind == "local":
        from agentfsm.backends.local import get_local_backend

        return get_local_backend(**kwargs)
    if kind == "openai":
        return OpenAICompatBackend(**kwargs)
    if kind == "scripted":
        return ScriptedBackend(**kwargs)
    if kind == "replay":
        return ReplayBackend(**kwargs)
    raise UsageError(f"unknown backend kind {kind!r}; expected one of {', '.join(BACKEND_KINDS)}")
