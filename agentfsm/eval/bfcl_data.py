"""Berkeley Function Calling Leaderboard cases, read from the installed ``bfcl-eval`` data.

The data is not vendored: it ships inside the PyPI package ``bfcl-eval`` (installed
with ``--no-deps``, since only its data files and nothing of its code is needed at run
time). Each category is a JSON-lines file ``BFCL_v4_<category>.json`` and, for the
categories scored by the AST checker, ``possible_answer/BFCL_v4_<category>.json``.

Loading follows BFCL: the function descriptions get the language hint BFCL adds
(" Note that the provided function is in Python 3 syntax."; Java and JavaScript
parameters are offered as strings, see :mod:`~agentfsm.eval.languages`), and BFCL's own type
names (``dict``, ``float``, ``tuple``, ``any`` ...) are mapped to JSON Schema for the
:class:`~agentfsm.core.messages.ToolSpec` the runtime offers, with BFCL's
``GORILLA_TO_OPENAPI`` table.
"""

from __future__ import annotations

import copy
import importlib.util
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentfsm.core.errors import MissingExtraError, UsageError
from agentfsm.core.messages import ToolSpec
from agentfsm.eval.languages import HINTS, language_of, prompt_functions

__all__ = [
    "AST_CATEGORIES",
    "CATEGORIES",
    "RELEVANCE_CATEGORIES",
    "BfclCase",
    "bfcl_data_dir",
    "gorilla_to_json_schema",
    "load_cases",
    "parse_categories",
    "tool_specs",
]

#: categories scored by the AST checker against ``possible_answer``
AST_CATEGORIES: tuple[str, ...] = (
    "simple_python",
    "simple_java",
    "simple_javascript",
    "multiple",
    "parallel",
    "parallel_multiple",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
)
#: categories scored on whether any call was made (irrelevance: a call is wrong)
RELEVANCE_CATEGORIES: tuple[str, ...] = ("irrelevance", "live_irrelevance", "live_relevance")
#: every single-turn category this harness runs
CATEGORIES: tuple[str, ...] = AST_CATEGORIES + RELEVANCE_CATEGORIES

_ALIASES = {"simple": "simple_python"}

#: BFCL's ``GORILLA_TO_OPENAPI`` (bfcl_eval/constants/type_mappings.py)
_GORILLA_TO_OPENAPI: dict[str, str] = {
    "integer": "integer",
    "number": "number",
    "float": "number",
    "string": "string",
    "boolean": "boolean",
    "bool": "boolean",
    "array": "array",
    "list": "array",
    "dict": "object",
    "object": "object",
    "tuple": "array",
    "any": "string",
    "byte": "integer",
    "short": "integer",
    "long": "integer",
    "double": "number",
    "char": "string",
    "ArrayList": "array",
    "Array": "array",
    "HashMap": "object",
    "Hashtable": "object",
    "Queue": "array",
    "Stack": "array",
    "Any": "string",
    "String": "string",
    "Bigint": "integer",
}

@dataclass(frozen=True)
class BfclCase:
    """One single-turn BFCL case: the question, the offered functions, the answer key."""

    id: str
    category: str
    #: the first turn's messages, ``[{"role": ..., "content": ...}]``
    messages: tuple[dict[str, str], ...]
    #: BFCL function docs with the language hint, as the checker reads them
    functions: tuple[dict[str, Any], ...]
    #: ``[{func_name: {param: [allowed values]}}]``; ``None`` for relevance categories
    ground_truth: tuple[dict[str, Any], ...] | None = None
    tools: tuple[ToolSpec, ...] = field(default=(), compare=False)
    #: the docs as BFCL hands them to a model (Java/JavaScript parameters as strings);
    #: empty when they are :attr:`functions` (Python)
    prompt_functions: tuple[dict[str, Any], ...] = field(default=(), compare=False)

    @property
    def offered(self) -> tuple[dict[str, Any], ...]:
        """The function docs a model is shown."""
        return self.prompt_functions or self.functions


def bfcl_data_dir() -> Path:
    """The ``data`` folder of the installed ``bfcl-eval`` package (not imported: it is heavy)."""
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        raise MissingExtraError(
            "eval", "the BFCL data (package bfcl-eval: pip install --no-deps bfcl-eval==2026.3.23)"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def parse_categories(text: str) -> tuple[str, ...]:
    """``"simple,multiple"`` -> canonical category names; ``all`` -> the four headline ones."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if names == ["all"]:
        return ("simple_python", "multiple", "parallel", "irrelevance")
    out: list[str] = []
    for name in names:
        canonical = _ALIASES.get(name, name)
        if canonical not in CATEGORIES:
            raise UsageError(f"unknown BFCL category {name!r}; known: {', '.join(CATEGORIES)}")
        if canonical not in out:
            out.append(canonical)
    if not out:
        raise UsageError("no BFCL category given")
    return tuple(out)


def _map_type(value: dict[str, Any]) -> None:
    """BFCL type names -> JSON Schema, in place, recursively (properties, items)."""
    gorilla = value.get("type")
    value["type"] = _GORILLA_TO_OPENAPI.get(gorilla, "string") if isinstance(gorilla, str) else "string"
    props = value.get("properties")
    if isinstance(props, dict):
        for sub in props.values():
            if isinstance(sub, dict):
                _map_type(sub)
    items = value.get("items")
    if isinstance(items, dict):
        _map_type(items)


def gorilla_to_json_schema(parameters: dict[str, Any]) -> dict[str, Any]:
    """A BFCL ``parameters`` object (``{"type": "dict", ...}``) as a JSON Schema object."""
    schema = copy.deepcopy(parameters)
    _map_type(schema)
    schema["type"] = "object"
    schema.setdefault("properties", {})
    return schema


def tool_specs(functions: tuple[dict[str, Any], ...] | list[dict[str, Any]]) -> tuple[ToolSpec, ...]:
    """The BFCL function docs as the runtime's tool specs (names kept verbatim, dots included)."""
    return tuple(
        ToolSpec(
            name=f["name"],
            description=f.get("description", ""),
            parameters=gorilla_to_json_schema(f.get("parameters", {"type": "dict", "properties": {}})),
        )
        for f in functions
    )


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                rows.append(json.loads(line))
    return rows


def _with_hint(functions: list[dict[str, Any]], language: str) -> tuple[dict[str, Any], ...]:
    out = copy.deepcopy(functions)
    for item in out:
        item["description"] = item.get("description", "") + HINTS[language]
    return tuple(out)


def load_cases(category: str, limit: int | None = None, data_dir: Path | None = None) -> list[BfclCase]:
    """The first ``limit`` cases of ``category`` (all when ``None``), in file order."""
    category = _ALIASES.get(category, category)
    if category not in CATEGORIES:
        raise UsageError(f"unknown BFCL category {category!r}")
    root = data_dir or bfcl_data_dir()
    path = root / f"BFCL_v4_{category}.json"
    if not path.is_file():
        raise UsageError(f"BFCL data file not found: {path}")
    entries = _read_jsonl(path)
    if limit is not None:
        entries = entries[:limit]
    answers: dict[str, list[dict[str, Any]]] = {}
    if category in AST_CATEGORIES:
        answer_path = root / "possible_answer" / f"BFCL_v4_{category}.json"
        answers = {row["id"]: row["ground_truth"] for row in _read_jsonl(answer_path)}
    cases: list[BfclCase] = []
    language = language_of(category)
    for entry in entries:
        functions = _with_hint(entry["function"], language)
        shown = tuple(prompt_functions(list(functions), language)) if language != "python" else ()
        truth = answers.get(entry["id"]) if category in AST_CATEGORIES else None
        if category in AST_CATEGORIES and truth is None:
            raise UsageError(f"no possible answer for BFCL case {entry['id']}")
        cases.append(
            BfclCase(
                id=entry["id"],
                category=category,
                messages=tuple({"role": m["role"], "content": m["content"]} for m in entry["question"][0]),
                functions=functions,
                ground_truth=tuple(truth) if truth is not None else None,
                tools=tool_specs(shown or functions),
                prompt_functions=shown,
            )
        )
    return cases
