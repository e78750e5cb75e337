"""A calibration profile: the settings ``agentfsm calibrate`` chose per model, and the table that chose them.

A profile file holds one entry per model (keyed by the backend's name, e.g.
``openai:qwen2.5:7b`` or ``local:SmolLM2-135M-Instruct.Q4_1``): the chosen settings (run
configuration fields), the measured table (one row per setting tried: accuracy with its
95 % interval, protocol-valid, mean model calls, seconds), the rule that chose, and when,
where and with which versions it was measured. ``agentfsm serve --models FILE`` reads
the chosen settings of an entry (:meth:`ModelProfile.run_config`).

Pure values: the edges read and write them as JSON (:meth:`Profile.from_json`,
:meth:`Profile.to_json`). A file that is not a profile is a
:class:`~agentfsm.core.errors.UsageError` naming what is wrong.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from agentfsm.core.config import DEFAULTS, RunConfig
from agentfsm.core.errors import UsageError

__all__ = ["PROFILE_VERSION", "ModelProfile", "Profile", "ProfileRow", "value_text"]

#: the version of the profile format written
PROFILE_VERSION = 1

_FROZEN = ConfigDict(frozen=True, extra="ignore")


class ProfileRow(BaseModel):
    """One setting as measured on the calibration set."""

    model_config = _FROZEN

    #: the run-configuration fields this row sets (e.g. ``dialect``, ``enforcement``)
    settings: dict[str, Any]
    #: calibration items run, and how many were right
    cases: int
    correct: int
    #: the 95 % (Wilson) interval of the accuracy, as fractions
    low: float
    high: float
    #: items that ended in a reply the protocol accepts (no spent budget, no loop)
    protocol_valid: int
    #: model calls per item, on average (corrections and consensus samples included)
    model_calls: float
    #: seconds per item, on average
    seconds: float
    #: whether this row is the default setting (the one a change has to beat)
    default: bool = False

    @property
    def accuracy(self) -> float:
        """Right items over items run (0 when none ran)."""
        return self.correct / self.cases if self.cases else 0.0

    def label(self) -> str:
        """``value / value ...`` in the table's column order."""
        return " / ".join(value_text(v) for v in self.settings.values())


class ModelProfile(BaseModel):
    """The calibration of one model: what was chosen, from which table, how measured."""

    model_config = _FROZEN

    #: the backend's name (the profile's key)
    model: str
    #: run-configuration fields chosen (only those the calibration varied)
    chosen: dict[str, Any]
    table: tuple[ProfileRow, ...]
    #: the written-down choice rule
    rule: str
    #: ISO date and time of the run
    date: str
    #: package versions (agentfsm, the model runtime, the benchmark data)
    versions: dict[str, str]
    #: the calibration items, in order
    items: tuple[str, ...]
    #: wall seconds of the whole calibration
    seconds: float
    command: str = ""
    machine: str = ""
    #: why the calibration ran fewer items than its set (a time limit), empty when it ran them all
    note: str = ""

    def run_config(self, base: RunConfig = DEFAULTS) -> RunConfig:
        """``base`` with the chosen settings (checked: a UsageError for a value this
        version does not know)."""
        return base.replace(**self.chosen)  # a list reads as the tuple (RunConfig)

    def chosen_row(self) -> ProfileRow | None:
        """The table's row of the chosen settings."""
        return next((r for r in self.table if r.settings == self.chosen), None)


class Profile(BaseModel):
    """A profile file: one :class:`ModelProfile` per model."""

    model_config = _FROZEN

    version: int = PROFILE_VERSION
    models: dict[str, ModelProfile] = {}

    def for_model(self, name: str) -> ModelProfile:
        """The entry of model ``name`` (a UsageError naming the models it holds)."""
        try:
            return self.models[name]
        except KeyError:
            held = ", ".join(self.models) or "none"
            raise UsageError(f"the profile has no model {name!r} (it has: {held})") from None

    def with_model(self, entry: ModelProfile) -> Profile:
        """A copy with ``entry`` added (replacing that model's earlier one)."""
        return Profile(version=PROFILE_VERSION, models={**self.models, entry.model: entry})

    def to_json(self) -> dict[str, Any]:
        """The profile as plain JSON data."""
        return self.model_dump(mode="json")

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | Any, source: str = "profile") -> Profile:
        """A profile from JSON data; a UsageError naming ``source`` and the first problem."""
        try:
            profile = cls.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "top level"
            raise UsageError(f"{source} is not an agentfsm profile: {where}: {first['msg']}") from None
        if profile.version > PROFILE_VERSION:
            raise UsageError(f"{source} is a profile of version {profile.version}; this agentfsm reads {PROFILE_VERSION}")
        return profile


def value_text(value: Any) -> str:
    """A setting's value as the table shows it (a list comma-separated, an empty one ``none``)."""
    if isinstance(value, list | tuple):
        return ",".join(map(str, value)) or "none"
    return str(value)
