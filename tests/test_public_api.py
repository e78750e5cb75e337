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

    # the core packages: the edges (backends, protocols, server, runtime, batch, cli) and
    # the HTTP/server libraries are off limits to them
    edges = ("agentfsm.server", "agentfsm.cli", "agentfsm.runtime", "agentfsm.batch", "agentfsm.backends",
             "agentfsm.protocols", "agentfsm.eval", "httpx", "tenacity", "fastapi", "uvicorn", "starlette")
    root = Path(agentfsm.__file__).parent
    files = [f for pkg in ("core", "prompt", "dialects", "guards") for f in (root / pkg).glob("*.py")]
    assert len(files) > 30
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


def test_every_public_name_has_one_lazy_home() -> None:
    assert sorted(agentfsm._EXPORTS) == sorted(agentfsm.__all__)
    for name, module in agentfsm._EXPORTS.items():
        assert getattr(importlib.import_module(module), name) is getattr(agentfsm, name)


def test_import_agentfsm_loads_no_http_server_cli_or_rendering_library() -> None:
    import subprocess
    import sys

    heavy = ["httpx", "fastapi", "starlette", "uvicorn", "typer", "rich", "jsonschema", "tenacity",
             "agentfsm.backends.openai_compat", "agentfsm.server", "agentfsm.cli", "llama_cpp"]
    code = "import sys, agentfsm; print(' '.join(m for m in %r if m in sys.modules))" % (heavy,)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_the_seams_of_release_4_are_public() -> None:
    """The tool_choice value, the language policies and the run recorder."""
    from agentfsm import Policy, Recorder, ToolChoice, get_policy

    assert ToolChoice.parse("required").requires_call
    assert isinstance(get_policy("grounding"), Policy)
    assert not Recorder().recording
