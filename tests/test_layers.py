"""The packages are layers: each imports only from the layers below it.

core < dialects, guards, prompt, policy < engine < runtime < the edges (backends,
protocols, diagram < server, batch < replays < report, testing < eval < cli). Read from the
source with ``ast``: module-level imports, imports inside functions (lazy ones), and
module names written as strings (lazy exports, registries) all count.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from functools import cache
from pathlib import Path

import agentfsm

ROOT = Path(agentfsm.__file__).parent

#: each package's layer; a package may import from its own layer and those below
LAYERS: dict[str, int] = {
    "core": 0,
    "dialects": 1, "guards": 1, "prompt": 1, "policy": 1,
    "engine": 2,
    "runtime": 3,
    "backends": 4, "protocols": 4, "diagram": 4,
    "server": 5, "batch": 5,
    "replays": 6,
    "report": 7, "testing": 7,
    "eval": 8,
    "cli": 9,
}
#: the imports that go up a layer, each lazy (inside a function), and why
UPWARD = {
    # Agent() without a backend runs the embedded model
    ("agentfsm.runtime.agent", "agentfsm.backends.local"),
    # create_backend("replay"): the replay backend lives with replay, above its producers
    ("agentfsm.backends", "agentfsm.replays.backend"),
}
#: the protocol guards: they decide by the protocol, never by reading words
PROTOCOL_GUARDS = ("json_valid", "unknown_tool", "schema", "tool_choice", "repeated_call", "loops", "budget",
                   "injection", "placeholder", "refusal")


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def _modules() -> dict[str, Path]:
    return {_module(p): p for p in ROOT.rglob("*.py")}


def _resolve(name: str) -> str | None:
    """The module ``name`` names (a module, or a name inside one)."""
    modules = _modules()
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _package(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and (ROOT / parts[1]).is_dir() else None


@cache
def _imports() -> list[tuple[str, str, bool]]:
    """Every ``(importer, imported, lazy)`` between agentfsm modules; lazy: inside a
    function, or a module name written as a string. Imports only for type checking are
    left out (they run nowhere)."""
    found: list[tuple[str, str, bool]] = []
    for module, path in _modules().items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        checking = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                    and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
                    for n in ast.walk(node)}
        lazy = {id(n) for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                for n in ast.walk(node)}
        for node in ast.walk(tree):
            if id(node) in checking:
                continue
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("agentfsm."):
                names = [node.value] if node.value in _modules() else []
            for name in names:
                target = _resolve(name) if name.startswith("agentfsm") else None
                if target is not None and target != module:
                    found.append((module, target, id(node) in lazy or isinstance(node, ast.Constant)))
    return found


def _between_packages() -> list[tuple[str, str, str, str, bool]]:
    out = []
    for src, dst, lazy in _imports():
        a, b = _package(src), _package(dst)
        if a is not None and b is not None and a != b:
            out.append((src, dst, a, b, lazy))
    return out


def test_every_package_has_a_layer() -> None:
    packages = {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()}
    assert packages == set(LAYERS)


def test_core_imports_nothing_above_it() -> None:
    assert [(src, dst) for src, dst, a, _, _ in _between_packages() if a == "core"] == []


def test_at_most_two_imports_go_up_a_layer_and_they_are_lazy() -> None:
    upward = {(src, dst, lazy) for src, dst, a, b, lazy in _between_packages() if LAYERS[a] < LAYERS[b]}
    assert {(src, dst) for src, dst, _ in upward} == UPWARD
    assert len(UPWARD) <= 2
    assert all(lazy for _, _, lazy in upward)


def test_no_package_cycles() -> None:
    """Less the documented upward imports, the packages import each other without a circle."""
    graph: dict[str, set[str]] = defaultdict(set)
    for src, dst, a, b, _ in _between_packages():
        if (src, dst) not in UPWARD:
            graph[a].add(b)
    visiting: list[str] = []
    done: set[str] = set()

    def visit(package: str) -> None:
        assert package not in visiting, f"package cycle: {' -> '.join([*visiting, package])}"
        if package in done:
            return
        visiting.append(package)
        for nxt in sorted(graph[package]):
            visit(nxt)
        visiting.pop()
        done.add(package)

    for package in sorted(LAYERS):
        visit(package)


def test_no_module_cycles_at_import_time() -> None:
    """Module-level imports form no circle (the one there was, in dialects/, is gone)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for src, dst, lazy in _imports():
        if not lazy and not dst.startswith(src + "."):  # a package may import its own modules
            graph[src].add(dst)
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        stack.append(module)
        for nxt in sorted(graph[module]):
            assert state.get(nxt) != 1, f"import cycle: {' -> '.join([*stack[stack.index(nxt):], nxt])}"
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[module] = 2

    for module in sorted(_modules()):
        if module not in state:
            visit(module)


def test_no_protocol_guard_reaches_a_language_policy() -> None:
    """The protocol guards import nothing from agentfsm.policy, directly or through another module."""
    graph: dict[str, set[str]] = defaultdict(set)
    for src, dst, _ in _imports():
        graph[src].add(dst)
    for guard in PROTOCOL_GUARDS:
        seen: set[str] = set()
        todo = [f"agentfsm.guards.{guard}"]
        while todo:
            module = todo.pop()
            if module in seen:
                continue
            seen.add(module)
            todo += graph[module]
        assert not [m for m in seen if m.startswith("agentfsm.policy")], guard
