"""Model backends: the embedded model, OpenAI-compatible upstreams, and a scripted one.

All implement :class:`~agentfsm.core.backend.Backend`. :func:`create_backend` builds
one by kind (``replay`` too: :class:`~agentfsm.replays.backend.ReplayBackend`, which lives
with the rest of replay, above the producers it runs again). The package imports lazily: naming ``agentfsm.backends`` loads no HTTP
client, and the local backend never needs ``llama-cpp-python`` until it is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentfsm.core._lazy import lazy_exports
from agentfsm.core.backend import Backend, Capabilities, Completion, GenerationOptions, ListContinuation, Usage
from agentfsm.core.errors import UsageError

if TYPE_CHECKING:
    from agentfsm.backends._transport import Timeouts
    from agentfsm.backends.openai_compat import JSONSchemaMode, OpenAICompatBackend
    from agentfsm.backends.scripted import ScriptedBackend, ScriptedRequest, ScriptExhausted

__all__ = [
    "BACKEND_KINDS",
    "Backend",
    "Capabilities",
    "Completion",
    "GenerationOptions",
    "JSONSchemaMode",
    "ListContinuation",
    "OpenAICompatBackend",
    "ScriptExhausted",
    "ScriptedBackend",
    "ScriptedRequest",
    "Timeouts",
    "Usage",
    "create_backend",
]

#: the kinds :func:`create_backend` knows
BACKEND_KINDS = ("local", "openai", "scripted", "replay")

#: lazily imported names -> the module that defines them
_LAZY = {
    "Timeouts": "agentfsm.backends._transport",
    "JSONSchemaMode": "agentfsm.backends.openai_compat",
    "OpenAICompatBackend": "agentfsm.backends.openai_compat",
    "ScriptedBackend": "agentfsm.backends.scripted",
    "ScriptedRequest": "agentfsm.backends.scripted",
    "ScriptExhausted": "agentfsm.backends.scripted",
}


__getattr__ = lazy_exports(__name__, _LAZY, globals())


def create_backend(kind: str, **kwargs: Any) -> Backend:
    """A backend by kind: ``local`` (shared, loaded once), ``openai``, ``scripted``, ``replay``.

    Keyword arguments go to the backend's constructor (for ``local``, to
    :func:`~agentfsm.backends.local.get_local_backend`).
    """
    if kind == "local":
        from agentfsm.backends.local import get_local_backend

        return get_local_backend(**kwargs)
    if kind == "openai":
        from agentfsm.backends.openai_compat import OpenAICompatBackend

        return OpenAICompatBackend(**kwargs)
    if kind == "scripted":
        from agentfsm.backends.scripted import ScriptedBackend

        return ScriptedBackend(**kwargs)
    if kind == "replay":
        from agentfsm.replays.backend import ReplayBackend

        return ReplayBackend(**kwargs)
    raise UsageError(f"unknown backend kind {kind!r}; expected one of {', '.join(BACKEND_KINDS)}")
