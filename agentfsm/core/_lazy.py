"""Lazy package exports (PEP 562): a name is imported from its module on first use.

Packages use it so that importing them stays cheap: ``agentfsm`` loads no backend,
``agentfsm.backends`` no HTTP client, ``agentfsm.server`` no web framework,
``agentfsm.eval`` no runtime, until one of those names is read.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, exports: Mapping[str, str], namespace: dict[str, Any]
) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``name`` comes from the module
    ``exports[name]`` and is kept in ``namespace`` (the package's ``globals()``), so later
    lookups skip the hook; any other name is an AttributeError."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    return __getattr__
