"""The models one proxy serves: each client-visible name, its backend and its settings.

A request is routed by its ``model`` field (:meth:`ModelTable.route`); a name the table
does not hold is the provider's 404 (:class:`~agentfsm.core.errors.ModelNotFound`),
unless the table has a ``fallback`` entry for such names (the single-backend flags of
``agentfsm serve`` build a table of one entry that is its own fallback, so any name
reaches it, as before). ``GET /v1/models`` lists :attr:`ModelTable.names`.

The table holds no state of any request: each is answered from its own history, so any
number of processes can serve one table (``agentfsm serve --workers N``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from agentfsm.core.backend import Backend
from agentfsm.core.choice import ToolChoice
from agentfsm.core.config import DEFAULTS, RunConfig
from agentfsm.core.errors import ModelNotFound, RequestError, UsageError
from agentfsm.core.profile import value_text
from agentfsm.prompt.enforcement import choose_level
from agentfsm.server.settings import NOT_FOR_THE_PROXY

__all__ = ["ModelTable", "ServedModel", "settings_text"]

#: the fields a settings header always names (the others only where they differ from the default)
_ALWAYS = ("dialect", "enforcement")


@dataclass(frozen=True)
class ServedModel:
    """One client-visible model: the backend its requests go to and the settings they run with."""

    #: the name clients send as ``model`` (and /v1/models lists)
    name: str
    backend: Backend
    run: RunConfig = DEFAULTS
    #: where :attr:`run` came from, as transcripts record it (``flags``, ``models file``,
    #: ``profile FILE``)
    settings_from: str = "flags"

    def __post_init__(self) -> None:
        # an enforcement level the backend lacks would fail every request that offers tools,
        # each as the client's 400: it is a mistake of the settings, named at start-up
        try:
            choose_level(self.run.enforcement, self.backend.capabilities, ToolChoice.AUTO)
        except UsageError as exc:
            raise UsageError(f"enforcement {self.run.enforcement} (from {self.settings_from}): {exc}") from None


class ModelTable:
    """Client-visible names to :class:`ServedModel` entries, in the order given."""

    def __init__(self, models: Sequence[ServedModel], fallback: str | None = None) -> None:
        if not models:
            raise UsageError("a model table needs at least one model")
        self._by_name: dict[str, ServedModel] = {}
        for entry in models:
            if not entry.name.strip():
                raise UsageError("a served model's name may not be empty")
            if entry.name != entry.name.strip() or not entry.name.isprintable():
                # a header cannot carry it as written (x-agentfsm-model), nor a client mean it
                raise UsageError(
                    f"the model name {entry.name!r} begins or ends with a space, or holds a character that is not "
                    "printable (a control character, a line break)"
                )
            if entry.name in self._by_name:
                raise UsageError(f"the model name {entry.name!r} is listed twice")
            self._by_name[entry.name] = entry
        if fallback is not None and fallback not in self._by_name:
            raise UsageError(f"the fallback {fallback!r} is not one of the models ({', '.join(self._by_name)})")
        self.fallback = fallback

    @classmethod
    def single(cls, backend: Backend, run: RunConfig = DEFAULTS, name: str | None = None) -> ModelTable:
        """One backend under ``name`` (default: the backend's), answering every model name."""
        entry = ServedModel(name or backend.name, backend, run)
        return cls([entry], fallback=entry.name)

    @property
    def names(self) -> tuple[str, ...]:
        """The client-visible names, in order."""
        return tuple(self._by_name)

    @property
    def models(self) -> tuple[ServedModel, ...]:
        """The entries, in order."""
        return tuple(self._by_name.values())

    def route(self, requested: str | None) -> ServedModel:
        """The entry for a request's ``model`` (the fallback for a name not listed, when
        there is one; else :class:`ModelNotFound`, or a 400 when the request names none)."""
        found = self._by_name.get(requested or "")
        if found is not None:
            return found
        if self.fallback is not None:
            return self._by_name[self.fallback]
        if not requested:
            raise RequestError(f"the request names no model; this proxy serves: {', '.join(self.names)}", param="model")
        raise ModelNotFound(requested, self.names)

    def backends(self) -> list[Backend]:
        """Each distinct backend once (entries may share one)."""
        seen: dict[int, Backend] = {}
        for entry in self._by_name.values():
            seen.setdefault(id(entry.backend), entry.backend)
        return list(seen.values())


@lru_cache(maxsize=256)
def settings_text(run: RunConfig) -> str:
    """The settings a proxied request runs with, for the ``x-agentfsm-settings`` header:
    ``dialect`` and ``enforcement``, then each other field the proxy uses where it differs
    from the default, ``name=value`` separated by ``; ``."""
    parts = []
    for name, value in run.as_dict().items():
        if name in NOT_FOR_THE_PROXY:
            continue
        if name in _ALWAYS or value != getattr(DEFAULTS, name):
            parts.append(f"{name}={value_text(value)}")
    return "; ".join(parts)
