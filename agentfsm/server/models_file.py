"""``agentfsm serve --models FILE``: the models file, read into a :class:`~agentfsm.server.models.ModelTable`.

TOML, read with the standard library's ``tomllib`` (the Python ecosystem's configuration
format: ``pyproject.toml``; comments, no indentation rules, no extra dependency)::

    # requests naming no listed model go here (leave it out: such a request is a 404)
    fallback = "small"

    [models.qwen]                        # the name clients send as "model"
    base_url = "http://127.0.0.1:11434/v1"
    model = "qwen2.5:7b-instruct"        # the upstream's own name for it
    api_key_env = "OLLAMA_API_KEY"       # the key is read from this variable, never from the file
    context_tokens = 32768
    profile = "profiles/qwen.json"       # the settings agentfsm calibrate chose for it

    [models.small]
    backend = "local"                    # the embedded model
    dialect = "command"                  # explicit settings: any run-configuration field the proxy uses
    enforcement = "constrained"

A name holding anything but letters, digits, ``-`` and ``_`` is quoted, as TOML reads
keys: ``[models."qwen2.5:7b"]``, ``[models."org/model:tag"]`` (unquoted, ``[models.qwen2.5]``
is an entry ``qwen2`` holding a table ``5``: refused, naming the rule). A name may not
begin or end with a space or hold a character that is not printable.

Upstream keys: ``backend`` (``openai``, the default, or ``local``), ``base_url``, ``model``,
``api_key_env``, ``context_tokens``, ``json_schema_mode``, ``max_retries``, ``timeout`` and
``read_timeout`` (seconds), ``profile`` and ``profile_model`` (:class:`ModelEntry`).

An entry's settings are, from the first that sets a field: the entry's own fields, its
profile's chosen settings, the command line's options (``--dialect`` ...), the defaults.
A relative ``profile`` path is read from the models file's folder. Every mistake (an
unknown key, a value of the wrong type, a missing or empty variable, a key no header can
carry, a profile without the model)
is a :class:`~agentfsm.core.errors.UsageError` naming the file and the entry, at start-up:
values are read strictly (``context_tokens = "4096"`` or ``true`` is refused, not
converted), times must be finite, and a base URL must be one the upstream's client can
open (a port in 1-65535, a host name that encodes). Keys are never kept anywhere but in
their backend; a credential in a base URL's query (``?key=...``, ``?code=...``) is shown
to ``on_secret`` as a key is.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentfsm.backends._transport import KEY_NOT_SENDABLE, key_sendable, split_base_url, url_secrets
from agentfsm.core.backend import Backend
from agentfsm.core.config import DEFAULTS, RunConfig
from agentfsm.core.errors import UsageError
from agentfsm.core.profile import Profile
from agentfsm.server.models import ModelTable, ServedModel
from agentfsm.server.settings import NOT_FOR_THE_PROXY, check_served

__all__ = ["ModelEntry", "build_backend", "load_models_file", "read_profile"]

_RUN_FIELDS = frozenset(RunConfig.__dataclass_fields__) - set(NOT_FOR_THE_PROXY)


def _has_userinfo(url: str) -> bool:
    """Whether ``url`` holds a user name or password (False for one that does not parse)."""
    import httpx

    try:
        return bool(httpx.URL(url).userinfo)
    except (ValueError, httpx.InvalidURL):
        return False


class ModelEntry(BaseModel):
    """One ``[models.NAME]`` table's upstream part (its run-configuration fields are read apart)."""

    # strict: a quoted number or a boolean is a mistake in the file, not a value to convert
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    #: ``openai`` (any OpenAI-compatible upstream; the default) or ``local`` (the embedded model)
    backend: Literal["openai", "local"] = "openai"
    base_url: str | None = None
    #: the upstream's name for the model (default: the entry's name)
    model: str | None = None
    #: the environment variable holding the upstream's key (none: no key is sent)
    api_key_env: str | None = None
    #: the model's context window in tokens (as ``--context-tokens``)
    context_tokens: int | None = Field(default=None, ge=1)
    #: how constrained decoding is asked for: ``auto`` tries OpenAI's json_schema, then json_object
    json_schema_mode: Literal["auto", "json_schema", "json_object", "off"] = "auto"
    #: transport retries per model call
    max_retries: int = Field(default=3, ge=0)
    #: seconds one model call may take in all (retries included), and between two reads
    timeout: float = Field(default=120.0, gt=0, allow_inf_nan=False)
    read_timeout: float = Field(default=60.0, gt=0, allow_inf_nan=False)
    #: a profile written by ``agentfsm calibrate``, and the model to take from it (default:
    #: this entry's backend's name, as calibrate keys it)
    profile: str | None = None
    profile_model: str | None = None


def read_profile(path: Path) -> Profile:
    """The profile at ``path`` (a UsageError when it cannot be read or is not one)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read the profile {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise UsageError(f"{path} is not JSON: {exc}") from None
    return Profile.from_json(data, source=str(path))


def build_backend(name: str, entry: ModelEntry, key: str | None) -> Backend:
    """The backend an entry describes (``key``: its upstream key, already read)."""
    from agentfsm.backends import Timeouts, create_backend

    if entry.backend == "local":
        if entry.base_url is not None or entry.api_key_env is not None:
            raise UsageError("a local entry takes no base_url or api_key_env")
        return create_backend("local", **({"n_ctx": entry.context_tokens} if entry.context_tokens else {}))
    if not entry.base_url:
        raise UsageError("an openai entry needs base_url")
    return create_backend(
        "openai",
        base_url=entry.base_url,
        model=entry.model or name,
        api_key=key or "",  # "": no key sent (never a key from the environment the file did not name)
        context_tokens=entry.context_tokens,
        json_schema_mode=entry.json_schema_mode,
        max_retries=entry.max_retries,
        timeout=Timeouts(read=entry.read_timeout, total=entry.timeout),
    )


def load_models_file(
    path: str | os.PathLike[str],
    base: RunConfig = DEFAULTS,
    *,
    environ: Mapping[str, str] | None = None,
    make_backend: Callable[[str, ModelEntry, str | None], Backend] = build_backend,
    on_secret: Callable[[str], None] | None = None,
) -> ModelTable:
    """The table the models file at ``path`` describes; ``base`` is each entry's starting
    settings (the command line's). ``make_backend`` builds each entry's backend (tests
    give a fake for the embedded model); ``on_secret`` is shown each key read (the CLI
    registers it for redaction)."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
        data = tomllib.loads(text)
    except OSError as exc:
        raise UsageError(f"cannot read the models file {file}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{file} is not UTF-8 text (byte {exc.start}): save it as UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{file} is not valid TOML: {exc}{_name_hint(text, exc)}") from None
    unknown = sorted(set(data) - {"models", "fallback"})
    if unknown:
        raise UsageError(f"{file}: unknown top-level key(s) {', '.join(unknown)}; expected [models.NAME] tables and fallback")
    tables = data.get("models")
    if not isinstance(tables, dict) or not tables:
        raise UsageError(f"{file}: no models; add a [models.NAME] table per model")
    fallback = data.get("fallback")
    if fallback is not None and not isinstance(fallback, str):
        raise UsageError(f"{file}: fallback must be a model name")
    env = os.environ if environ is None else environ
    served: list[ServedModel] = []
    for name, table in tables.items():
        if not isinstance(table, dict):
            raise UsageError(f"{file}: models.{name} must be a table ([models.{name}])")
        try:
            served.append(_entry(file, name, table, base, env, make_backend, on_secret))
        except UsageError as exc:
            raise UsageError(f"{file}: models.{name}: {exc}") from None
    try:
        return ModelTable(served, fallback=fallback)
    except UsageError as exc:
        raise UsageError(f"{file}: {exc}") from None


#: how a name that is not a bare TOML key is written (Ollama's and LiteLLM's names are not)
_QUOTED = 'a model name holding anything but letters, digits, "-" and "_" is quoted: [models."org/model:tag"]'


def _name_hint(text: str, exc: tomllib.TOMLDecodeError) -> str:
    """The quoting rule, after a syntax error on a ``[models....]`` line (``[models.qwen2.5:7b]``)."""
    found = re.search(r"at line (\d+)", str(exc))
    lines = text.split("\n") if found else []
    number = int(found.group(1)) if found else 0
    if 0 < number <= len(lines) and lines[number - 1].lstrip().startswith("[models."):
        return f"; {_QUOTED}"
    return ""


def _entry(
    file: Path,
    name: str,
    table: dict[str, Any],
    base: RunConfig,
    env: Mapping[str, str],
    make_backend: Callable[[str, ModelEntry, str | None], Backend],
    on_secret: Callable[[str], None] | None,
) -> ServedModel:
    inner = next((k for k, v in table.items() if isinstance(v, dict)), None)
    if inner is not None:  # [models.qwen2.5] is the entry qwen2 holding a table 5
        raise UsageError(f"{inner} is a table inside this entry, as [models.{name}.{inner}] reads; {_QUOTED}")
    settings = {k: v for k, v in table.items() if k in _RUN_FIELDS}
    check_served(table)
    try:
        entry = ModelEntry.model_validate({k: v for k, v in table.items() if k not in _RUN_FIELDS})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        known = ", ".join(sorted(set(ModelEntry.model_fields) | _RUN_FIELDS))
        hint = f" (keys: {known})" if first["type"] == "extra_forbidden" else ""
        raise UsageError(f"{where}: {first['msg']}{hint}") from None
    if entry.profile_model is not None and entry.profile is None:
        raise UsageError("profile_model: names a model of a profile, but the entry has no profile")
    if entry.base_url is not None:
        if on_secret is not None:  # before any check that could show the URL
            for secret in url_secrets(entry.base_url):
                on_secret(secret)
        if _has_userinfo(entry.base_url):
            raise UsageError(
                "base_url: holds a user name or password; name the environment variable that holds "
                "the upstream's key with api_key_env instead"
            )
        try:
            split_base_url(entry.base_url)  # at start-up, not as a 500 on every request
        except UsageError as exc:
            raise UsageError(f"base_url: {exc}") from None
    key = None
    if entry.api_key_env is not None:
        if not entry.api_key_env.strip():
            raise UsageError("api_key_env is empty: name the environment variable that holds the key")
        key = env.get(entry.api_key_env)
        if on_secret is not None and key:
            on_secret(key)
        if not key or not key.strip():
            raise UsageError(f"the environment variable {entry.api_key_env} (api_key_env) is not set, or empty")
        if not key_sendable(key):
            raise UsageError(f"the environment variable {entry.api_key_env} (api_key_env): {KEY_NOT_SENDABLE}")
    backend = make_backend(name, entry, key)
    run, source = base, "models file" if settings else "flags"
    if entry.profile is not None:
        profile_path = file.parent / entry.profile
        key = entry.profile_model or backend.name
        chosen = read_profile(profile_path).for_model(key)
        try:  # a value edited by hand is named where it is written: not in the models file
            check_served(chosen.chosen)
            run = chosen.run_config(run)
        except UsageError as exc:
            raise UsageError(f"{profile_path}: models.{key}.chosen: {exc}") from None
        source = f"profile {entry.profile}"
    if settings:
        run = run.replace(**settings)
        if entry.profile is not None:
            source += " + models file"
    return ServedModel(name, backend, run, source)
