import importlib
import pkgutil

import agentfsm


def test_all_is_sorted_and_complete() -> None:
    assert agentfsm.__all__ == sorted(agentfsm.__all__, key=str.casefold) or agentfsm.__all__ == sorted(agentfsm.__all__)
    for name in agentfsm.__all__:
        assert getattr(agentfsm, name) is not None, name


def test_issue_names_are_importable() -> None:
    from agentfsm import (  # noqa: F401
        Agent,
        StreamParser,
        ToolCall,
        ToolResult,
        ToolSpec,
        derive_state,
        parse_reply,
        read_transcript,
        render_contract,
        replay,
        run_batch,
    )


def test_every_module_declares_its_public_names() -> None:
    missing = []
    for info in pkgutil.walk_packages(agentfsm.__path__, "agentfsm."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        leaf = info.name.rsplit(".", 1)[-1]
        if not leaf.startswith("_") and not hasattr(module, "__all__"):
            missing.append(info.name)
    assert missing == []


def test_core_never_imports_an_edge() -> None:
    """Pure core modules must not import IO edges (backends' implementations, server, cli, transcript files)."""
    import ast
    from pathlib import Path

    core = ["messages", "states", "machine", "contract", "engine", "parser", "stream", "projection",
            "enforcement", "continuation", "_types", "errors"]
    edges = ("agentfsm.server", "agentfsm.cli", "agentfsm.runtime", "agentfsm.batch", "agentfsm.transcript",
             "agentfsm.backends.openai_compat", "agentfsm.backends.local", "httpx", "fastapi", "uvicorn")
    root = Path(agentfsm.__file__).parent
    files = [root / f"{m}.py" for m in core] + list((root / "dialects").glob("*.py")) + list((root / "guards").glob("*.py"))
    offenders = []
    for f in files:
        tree = ast.parse(f.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{f.name}: {n}" for n in names if n.startswith(edges)]
    assert offenders == []
