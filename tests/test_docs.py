"""The user docs (README.md, docs/*.md) against the code they describe.

- Every ``agentfsm COMMAND ... --flag`` they show, in a code block or an inline code span,
  names an option that command has (read from the click command typer builds: no model,
  no subprocess); a flag shown on its own (``--max-corrections``) is an option of some
  command; a flag of another program (``claude``, ``codex``, ``make``) is left to it.
- The docs' Python snippets run as written. A snippet whose code holds ``[...]`` (a
  placeholder for the reader to fill in) is an illustration and is not run; the rest run
  with the embedded model swapped for a scripted one, and a line ``expr  # value`` checks
  that ``expr`` shows as ``value`` (``...`` matching anything, as in doctest).
- The models file the docs show is one ``serve --models`` reads.
- Each agentfsm error the docs name can be imported from ``agentfsm``.
- Each ``AGENTFSM_*`` variable they name is read (an option's, or one the code names), and
  the run-settings tables give each ``RunConfig`` field its default, option and variable.
- Every relative link they hold (a file, a file's heading, a heading of their own) resolves.
- The README's figures from the quality table are the table's.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import agentfsm.runtime.agent as agent_module
from agentfsm.backends import Backend, ScriptedBackend
from agentfsm.core.backend import Capabilities
from agentfsm.core.messages import PromptMessage
from agentfsm.core.profile import ModelProfile, Profile
from agentfsm.server.models_file import ModelEntry, load_models_file

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = (README, *sorted((ROOT / "docs").glob("*.md")))

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
_SPAN = re.compile(r"`([^`\n]+(?:\n[^`\n]+)*)`")
_FLAG = re.compile(r"(?<![\w-])--[A-Za-z][\w-]*")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


# -- the command line's options --------------------------------------------------------


def _options() -> dict[str, frozenset[str]]:
    """Each command path (``run``, ``eval bfcl``) and the option names it accepts."""
    import typer.main

    from agentfsm.cli import app

    found: dict[str, frozenset[str]] = {}

    def walk(command: Any, path: tuple[str, ...]) -> None:
        if hasattr(command, "list_commands"):
            ctx = command.context_class(command)
            for name in command.list_commands(ctx):
                walk(command.get_command(ctx, name), (*path, name))
            return
        names = {"--help"}
        for param in command.params:
            if param.param_type_name == "option":
                names.update(param.opts, param.secondary_opts)
        found[" ".join(path)] = frozenset(names)

    walk(typer.main.get_command(app), ())
    return found


OPTIONS = _options()
ANY_OPTION = frozenset().union(*OPTIONS.values())


# -- command usages in the docs --------------------------------------------------------


@dataclass(frozen=True)
class Usage:
    """One shell command the docs show: its program, its words, and where it is."""

    where: str
    words: tuple[str, ...]

    @property
    def program(self) -> str:
        return self.words[0] if self.words else ""

    @property
    def flags(self) -> list[str]:
        return [m for word in self.words for m in _FLAG.findall(word)]

    def command(self) -> str | None:
        """The agentfsm command path the words name (``eval bfcl``), or None."""
        rest = [w for w in self.words[1:] if not w.startswith("-")][:2]
        for size in (2, 1):
            if " ".join(rest[:size]) in OPTIONS:
                return " ".join(rest[:size])
        return None


def _segments(text: str) -> Iterator[list[str]]:
    """``text`` as shell commands: split at ``&&``, ``|``, ``;``, ``&`` and redirections,
    leading ``VAR=value`` assignments dropped."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars="&|;<>")
    lexer.whitespace_split = True
    lexer.commenters = ""
    words: list[str] = []
    try:
        tokens = list(lexer)
    except ValueError:  # an unclosed quote in prose: read it word by word
        tokens = text.split()
    for token in [*tokens, ";"]:
        if token and set(token) <= set("&|;<>"):
            while words and _ASSIGNMENT.match(words[0]):
                words.pop(0)
            if words:
                yield words
            words = []
        else:
            words.append(token)


def _spans(text: str, where: str) -> list[Usage]:
    """The commands of prose: its code spans."""
    return [Usage(f"{where}: `{span}`", tuple(w)) for span in _SPAN.findall(text)
            for w in _segments(span.replace("\n", " "))]


def _comment(text: str, where: str) -> list[Usage]:
    """The commands of a code block's comment: its code spans, and an ``agentfsm ...``
    written there (``# models.toml: agentfsm serve --models models.toml``), to its end."""
    rest = re.search(r"(?<![\w.])agentfsm .*", _SPAN.sub("", text))
    return _spans(text, where) + ([Usage(f"{where}: {rest[0]}", tuple(w)) for w in _segments(rest[0])] if rest else [])


def _usages(path: Path) -> list[Usage]:
    text = path.read_text(encoding="utf-8")
    usages: list[Usage] = []
    for lang, body in _FENCE.findall(text):
        for line in body.replace("\\\n", " ").splitlines():
            code, _, comment = line.partition("#") if line.lstrip().startswith("#") else line.partition(" #")
            if lang in ("", "bash", "sh"):
                usages += [Usage(f"{path.name} code block", tuple(w)) for w in _segments(code)]
            usages += _comment(comment, f"{path.name} code block comment")
    return usages + _spans(_FENCE.sub("", text), path.name)


USAGES = [u for path in DOCS for u in _usages(path)]

#: the commands shown: ``agentfsm`` and a word (alone, ``agentfsm`` is the package's name)
COMMANDS = [u for u in USAGES if u.program == "agentfsm" and len(u.words) > 1]


def test_the_docs_show_the_commands_and_flags_they_describe() -> None:
    # the extraction reads what it should: each command, and every flag the docs write
    shown = {u.command() for u in COMMANDS}
    assert shown >= {"run", "chat", "tools", "serve", "batch", "replay", "diagram", "report", "calibrate",
                     "eval bfcl", "eval quality"}
    in_docs = sorted(m for path in DOCS for m in _FLAG.findall(path.read_text(encoding="utf-8")))
    read = sorted(f for u in USAGES for f in u.flags)
    assert read == in_docs, "a flag written outside a code span or block, which this test does not read"


@pytest.mark.parametrize("usage", COMMANDS, ids=lambda u: " ".join(u.words)[:60])
def test_each_agentfsm_usage_names_a_command_and_its_options(usage: Usage) -> None:
    command = usage.command()
    assert command is not None, f"{usage.where}: no agentfsm command in {usage.words}"
    unknown = [f for f in usage.flags if f not in OPTIONS[command]]
    assert unknown == [], f"{usage.where}: agentfsm {command} has no option {unknown}"


def test_each_flag_shown_on_its_own_is_an_option_of_a_command() -> None:
    alone = [u for u in USAGES if u.program.startswith("--")]
    assert len(alone) > 20
    unknown = [(u.where, f) for u in alone for f in u.flags if f not in ANY_OPTION]
    assert unknown == []


# -- the docs' Python snippets --------------------------------------------------------


def _blocks(language: str) -> list[str]:
    """The code blocks in ``language`` of every doc, in order."""
    return [body for path in DOCS for lang, body in _FENCE.findall(path.read_text(encoding="utf-8"))
            if lang == language]


def _python_snippets() -> list[str]:
    return _blocks("python")


def _illustrative(snippet: str) -> bool:
    return "[...]" in snippet


def _scripted(messages: Sequence[PromptMessage]) -> str:
    """A model that calls the snippet's tool once for ``a + b`` and then states the result."""
    last = messages[-1].content or ""
    if messages[-1].role == "user" and "2 + 40" in last:
        return '```json action\n{"tool": "add", "args": {"a": 2, "b": 40}}\n```'
    return "2 + 40 is 42."


def _shown(value: Any, expected: str) -> bool:
    pattern = ".*".join(re.escape(part) for part in expected.split("..."))
    return re.fullmatch(pattern, repr(value), re.S) is not None


def _run_snippet(snippet: str) -> dict[str, Any]:
    """Run ``snippet``; each ``expr  # value`` line must show ``value``."""
    import ast

    namespace: dict[str, Any] = {"__name__": "readme_snippet"}
    lines = snippet.splitlines()
    for node in ast.parse(snippet).body:
        exec(compile(ast.Module(body=[node], type_ignores=[]), "<docs>", "exec"), namespace)
        line = lines[node.lineno - 1]
        if isinstance(node, ast.Expr) and "#" in line and node.end_lineno == node.lineno:
            expected = line[node.end_col_offset:].split("#", 1)[1].strip()
            value = eval(compile(ast.Expression(node.value), "<docs>", "eval"), namespace)
            assert _shown(value, expected), f"{ast.unparse(node)} is {value!r}, the docs say {expected}"
            namespace["_checked"] = namespace.get("_checked", 0) + 1
    return namespace


def test_the_docs_have_the_python_snippets_this_test_reads() -> None:
    snippets = _python_snippets()
    assert sum(not _illustrative(s) for s in snippets) == 2
    assert sum(_illustrative(s) for s in snippets) == 1


def test_the_agent_snippet_runs(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    scripted: list[Backend] = []

    def default_backend() -> Backend:
        scripted.append(ScriptedBackend(_scripted))
        return scripted[-1]

    monkeypatch.setattr(agent_module, "_default_backend", default_backend)
    (snippet,) = [s for s in _python_snippets() if not _illustrative(s) and "Agent(" in s]
    namespace = _run_snippet(snippet)
    assert len(scripted) == 1  # it ran on the default backend, which the test swapped
    result = namespace["result"]
    assert [c["result"]["content"] for c in result.tool_calls] == ["42"]
    assert capsys.readouterr().out.startswith("2 + 40 is 42. ['first-decision', 'tool-emitted'")


def test_the_parser_snippet_shows_what_it_says() -> None:
    (snippet,) = [s for s in _python_snippets() if not _illustrative(s) and "parse_reply(" in s]
    namespace = _run_snippet(snippet)
    assert namespace["_checked"] == 1


# -- the docs' models file -------------------------------------------------------------


def test_the_docs_models_file_is_one_serve_reads(tmp_path: Path) -> None:
    (models_file,) = [body for body in _blocks("toml") if "[models." in body]
    (tmp_path / "models.toml").write_text(models_file, encoding="utf-8")
    # the profile it names, as agentfsm calibrate writes one for the entry's backend
    (tmp_path / "profiles").mkdir()
    chosen = ModelProfile(model="openai:qwen2.5:7b-instruct", chosen={"dialect": "command"}, table=(), rule="",
                          date="", versions={}, items=(), seconds=0.0)
    (tmp_path / "profiles" / "upstreams.json").write_text(json.dumps(Profile().with_model(chosen).to_json()))
    entries: dict[str, ModelEntry] = {}

    def backend(name: str, entry: ModelEntry, key: str | None) -> Backend:
        entries[name] = entry
        # the embedded model constrains decoding (serve checks an entry's enforcement against it)
        can = Capabilities(prefill=True, json_schema=True) if entry.backend == "local" else None
        return ScriptedBackend([], capabilities=can, name=f"{entry.backend}:{entry.model or name}")

    table = load_models_file(tmp_path / "models.toml", environ={"VLLM_API_KEY": "k"}, make_backend=backend)
    assert sorted(entries) == ["llama", "org/llama:8b", "qwen", "small"]
    assert entries["llama"].timeout == 300 and entries["small"].backend == "local"
    served = {m.name: m for m in table.models}
    assert served["qwen"].run.dialect == "command" and served["qwen"].settings_from == "profile profiles/upstreams.json"
    assert served["llama"].run.max_corrections == 2 and served["llama"].settings_from == "models file"
    assert table.fallback == "small"


# -- the errors the docs name ----------------------------------------------------------


def test_each_agentfsm_error_the_docs_name_is_importable_from_agentfsm() -> None:
    import agentfsm
    import agentfsm.core.errors as errors

    named = {name for path in DOCS for name in re.findall(r"`([A-Z]\w+)`", path.read_text(encoding="utf-8"))}
    ours = sorted(name for name in named if isinstance(getattr(errors, name, None), type))
    assert {"RetryBudgetExceeded", "UsageError", "ToolSpecError", "TranscriptError"} <= set(ours)
    assert [name for name in ours if name not in agentfsm.__all__] == []


# -- links -----------------------------------------------------------------------------

_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*$", re.M)


def _anchors(path: Path) -> set[str]:
    """The anchors GitHub gives ``path``'s headings: lower case, punctuation dropped, spaces
    as hyphens, a repeated one numbered."""
    seen: dict[str, int] = {}
    anchors = set()
    for heading in _HEADING.findall(_FENCE.sub("", path.read_text(encoding="utf-8"))):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        anchors.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
        seen[slug] = seen.get(slug, 0) + 1
    return anchors


def _links() -> list[tuple[Path, str]]:
    """Each relative link of the docs (outside code), with the doc that holds it."""
    found = []
    for path in DOCS:
        prose = _SPAN.sub("", _FENCE.sub("", path.read_text(encoding="utf-8")))
        found += [(path, target) for target in _LINK.findall(prose) if not re.match(r"[a-z]+:", target)]
    return found


def test_the_link_checker_reads_links_and_headings() -> None:
    assert {"set-up", "the-proxy"} <= _anchors(README)
    assert any(target.startswith("docs/") for path, target in _links() if path == README)
    assert any("#" in target for _, target in _links())


@pytest.mark.parametrize(("doc", "target"), _links(), ids=lambda x: x.name if isinstance(x, Path) else x)
def test_each_relative_link_resolves(doc: Path, target: str) -> None:
    file, _, anchor = target.partition("#")
    resolved = (doc.parent / file).resolve() if file else doc
    assert resolved.is_file() or (resolved.is_dir() and not anchor), f"{doc.name}: {target} names no file"
    if anchor:
        assert resolved.suffix == ".md", f"{doc.name}: {target} is an anchor in a file without headings"
        assert anchor in _anchors(resolved), f"{doc.name}: {target}: {resolved.name} has no heading #{anchor}"


# -- run settings and environment variables ------------------------------------------

_VARIABLE = re.compile(r"\bAGENTFSM_[A-Z][A-Z_]*[A-Z]\b")
#: variables the docs name that a reader sets for another program: the README's Codex
#: provider reads its key from a variable the config names (``env_key``)
_FOR_OTHERS = {"AGENTFSM_CLIENT_KEY"}


def _option_variables() -> dict[str, str]:
    """Each environment variable a command's option reads, with the option."""
    import typer.main

    from agentfsm.cli import app

    found: dict[str, str] = {}

    def walk(command: Any) -> None:
        if hasattr(command, "list_commands"):
            ctx = command.context_class(command)
            for name in command.list_commands(ctx):
                walk(command.get_command(ctx, name))
            return
        for param in command.params:
            if isinstance(param.envvar, str):
                found[param.envvar] = param.opts[0]

    walk(typer.main.get_command(app))
    return found


def test_each_agentfsm_variable_the_docs_name_is_read() -> None:
    named = {v for path in DOCS for v in _VARIABLE.findall(path.read_text(encoding="utf-8"))}
    assert {"AGENTFSM_MAX_CORRECTIONS", "AGENTFSM_THREADS", "AGENTFSM_LOG_LEVEL"} <= named
    source = "\n".join(p.read_text(encoding="utf-8") for d in ("agentfsm", "bench") for p in (ROOT / d).rglob("*.py"))
    # an option's variable, or a variable the code names as a string (os.environ.get("AGENTFSM_THREADS"))
    read = set(_option_variables()) | {v for v in named if re.search(rf"[\"']{v}[\"']", source)}
    assert sorted(named - read - _FOR_OTHERS) == []


def _table_rows(path: Path) -> list[list[str]]:
    """The rows of ``path``'s tables whose first cell is a RunConfig field in backticks."""
    from agentfsm.core.config import DEFAULTS

    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")]
            for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("| `")]
    return [row for row in rows if row[0].strip("`") in DEFAULTS.as_dict()]


def _default_shown(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return ",".join(value) if isinstance(value, tuple) else str(value)


def test_the_run_settings_tables_give_each_field_its_default_option_and_variable() -> None:
    from agentfsm.core.config import DEFAULTS

    variables = _option_variables()
    defaults = DEFAULTS.as_dict()
    settings = _table_rows(ROOT / "docs" / "settings.md")
    assert sorted(row[0].strip("`") for row in settings) == sorted(defaults)  # every field, once
    for field_, _values, default, option, variable in settings:
        name = field_.strip("`")
        assert default.split(" (")[0].strip("`") == _default_shown(defaults[name]), f"settings.md: {name}'s default"
        assert option.split(" / ")[0].strip("`") == "--" + name.replace("_", "-"), f"settings.md: {name}'s option"
        assert variables.get(variable.strip("`")) == "--" + name.replace("_", "-"), f"settings.md: {name}'s variable"
    readme = _table_rows(README)
    assert len(readme) >= 5
    for field_, default, _what in readme:
        name = field_.strip("`")
        assert default.strip("`") == _default_shown(defaults[name]), f"README: {name}'s default"


# -- the figures the README quotes -----------------------------------------------------


def _row(table: str, group: str, row: str) -> list[str]:
    """The cells of ``table``'s row ``row`` in ``group`` (bold marks dropped)."""
    for line in table.splitlines():
        cells = [c.strip().strip("*") for c in line.strip().strip("|").split("|")]
        if cells[:2] == [group, row]:
            return cells
    raise AssertionError(f"bench/results/quality.md has no row {group} / {row}")


def test_the_readme_quotes_the_latest_quality_table() -> None:
    table = (ROOT / "bench" / "results" / "quality.md").read_text(encoding="utf-8")
    readme = " ".join(README.read_text(encoding="utf-8").split())
    quoted = re.search(r"quality\.md\), (\d{4}-\d\d-\d\d), `main` at (\w+), .*?: tasks ([\d.]+) % on the tuned "
                       r"split, ([\d.]+) % on the held-out one; ([\d.]+) model calls per one-call task", readme)
    assert quoted is not None, "the README's quote of the quality table has changed shape: update this test"
    date, commit, tuned, held_out, calls = quoted.groups()
    assert re.search(rf"^- date: {date}T", table, re.M) and f"`main` at {commit}" in table
    accuracy, calls_per_case = 3, 6  # the columns: group, row, cases, accuracy %, interval, valid %, calls/case
    assert _row(table, "tasks", "tuned")[accuracy] == tuned
    assert _row(table, "tasks", "held-out")[accuracy] == held_out
    assert _row(table, "cost", "one-call tasks")[calls_per_case] == calls
    total = re.search(r"\(of (\d+) tasks and cases\)", table)
    assert total is not None and f"({total[1]} tasks and cases)" in readme
