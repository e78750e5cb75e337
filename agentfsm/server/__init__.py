"""The HTTP proxy (imported on its own, so library users do not load Starlette).

``create_app`` builds the app (:mod:`agentfsm.server.app`); the request's way through
it: :mod:`~agentfsm.server.handle` (one request, end to end), :mod:`~agentfsm.server.models` (the models served, routed by name; read from a
models file by :mod:`~agentfsm.server.models_file`), :mod:`~agentfsm.server.auth` (Host,
Origin, key, body), :mod:`~agentfsm.server.limits` (header deadline, connections, each
client's share of the upstream), :mod:`~agentfsm.server.exchange` (one
request's state and transcript), :mod:`~agentfsm.server.reply` (its answer: whole, and
cut short by a disconnect), :mod:`~agentfsm.server.streaming` (streamed answers),
:mod:`~agentfsm.server.wire` (the client's protocol shapes). Its settings and their
defaults are in :mod:`~agentfsm.server.settings`, which loads no server library; the
names below are imported on first use, so the CLI can read those defaults cheaply.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentfsm.core._lazy import lazy_exports

if TYPE_CHECKING:
    from agentfsm.server.app import create_app
    from agentfsm.server.models import ModelTable, ServedModel
    from agentfsm.server.models_file import load_models_file
    from agentfsm.server.settings import DEFAULT_BODY_TIMEOUT, DEFAULT_MAX_BODY_BYTES, Settings

__all__ = [
    "DEFAULT_BODY_TIMEOUT",
    "DEFAULT_MAX_BODY_BYTES",
    "ModelTable",
    "ServedModel",
    "Settings",
    "create_app",
    "load_models_file",
]

_EXPORTS = {
    "DEFAULT_BODY_TIMEOUT": "agentfsm.server.settings",
    "DEFAULT_MAX_BODY_BYTES": "agentfsm.server.settings",
    "ModelTable": "agentfsm.server.models",
    "ServedModel": "agentfsm.server.models",
    "Settings": "agentfsm.server.settings",
    "create_app": "agentfsm.server.app",
    "load_models_file": "agentfsm.server.models_file",
}


__getattr__ = lazy_exports(__name__, _EXPORTS, globals())
