"""``make bench``: run every ``bench/bench_*.py``, print the tables, save them with the machine.

Each benchmark module exposes ``run() -> list[dict]``, each dict a table
``{"title", "columns", "rows", "notes"}`` whose figures are ratios against a reference
measured in the same run. Every module runs in its own child process with a time
limit, so one that fails, hangs or crashes is reported in the output and the others
still run. Results go to ``bench/results/latest.md`` and ``latest.json``, headed with
the date and a description of the machine (CPU model, cores, RAM, Python); a run of
some areas only (``--only``) writes ``partial-<areas>.md/json`` instead, so it never
replaces the full tables.

Usage: ``python bench/run.py [--only parser,states] [--timeout SECONDS] [--out DIR]``
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from agentfsm.eval.host import machine_description, now_iso  # noqa: E402

__all__ = ["discover", "main", "render_markdown", "run_module"]

#: modules run in this order when present; any other bench_*.py follows, by name
ORDER = ("parser", "states", "backends", "proxy", "batch")


def result_stem(only: set[str] | None) -> str:
    """``latest`` for a full run; ``partial-<areas>`` for a run of some areas only."""
    return "latest" if only is None else "partial-" + "-".join(sorted(only))


def discover(only: set[str] | None = None) -> list[Path]:
    """The benchmark modules to run, in :data:`ORDER` then by name."""
    found = sorted(BENCH_DIR.glob("bench_*.py"))

    def key(path: Path) -> tuple[int, str]:
        area = path.stem.removeprefix("bench_")
        return (ORDER.index(area) if area in ORDER else len(ORDER), area)

    found.sort(key=key)
    if only:
        found = [p for p in found if p.stem.removeprefix("bench_") in only]
    return found


def _child(path: Path, out: Path) -> None:
    """Child mode: import the module, call ``run()``, write its tables as JSON to ``out``."""
    sys.path[:0] = [str(BENCH_DIR)]
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    tables = module.run()
    out.write_text(json.dumps(tables, default=str), encoding="utf-8")


def _failure(path: Path, reason: str) -> dict[str, Any]:
    return {
        "title": f"{path.stem}: FAILED",
        "columns": ["module", "error"],
        "rows": [[path.name, reason]],
        "notes": "This benchmark did not complete; the others ran.",
        "failed": True,
    }


def _stop_group(proc: subprocess.Popen[str]) -> None:
    """End a timed-out module and every process it started (its process group)."""
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.communicate(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue


def run_module(path: Path, timeout: float) -> tuple[list[dict[str, Any]], float]:
    """Run one module in a child process; its tables (or one failure table) and seconds taken."""
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "tables.json"
        # its own process group: on a timeout the servers it started go with it
        proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--child", str(path), str(out)],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        )
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _stop_group(proc)
            return [_failure(path, f"timed out after {timeout:.0f} s")], time.perf_counter() - start
        seconds = time.perf_counter() - start
        if proc.returncode != 0 or not out.is_file():
            tail = (stderr or stdout or "").strip().splitlines()[-3:]
            return [_failure(path, f"exit {proc.returncode}: " + " | ".join(tail))], seconds
        try:
            tables = json.loads(out.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            return [_failure(path, f"unreadable result: {exc}")], seconds
    if not isinstance(tables, list) or not all(isinstance(t, dict) and "rows" in t for t in tables):
        return [_failure(path, "run() did not return a list of tables")], seconds
    return tables, seconds


def _cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def render_markdown(results: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    """All tables as Markdown under a header naming the date and the machine."""
    lines = [
        "# agentfsm benchmarks",
        "",
        f"- date: {meta['date']}",
        f"- machine: {meta['machine']}",
        f"- command: `{meta['command']}`",
        f"- total: {meta['seconds']:.0f} s",
        "",
        "Every figure is a ratio against a reference measured in the same run, on the same machine.",
        "",
    ]
    for entry in results:
        for table in entry["tables"]:
            columns = [str(c) for c in table.get("columns", [])]
            lines += [f"## {table.get('title', entry['module'])}", ""]
            if columns:
                lines.append("| " + " | ".join(_cell(c) for c in columns) + " |")
                lines.append("|" + "|".join("---" for _ in columns) + "|")
            for row in table.get("rows", []):
                lines.append("| " + " | ".join(_cell(c) for c in row) + " |")
            if table.get("notes"):
                lines += ["", str(table["notes"])]
            lines.append("")
        lines += [f"<sub>{entry['module']}: {entry['seconds']:.1f} s</sub>", ""]
    return "\n".join(lines)


def print_tables(tables: list[dict[str, Any]], module: str, seconds: float | None = None) -> None:
    """Print ``tables`` as rich tables (a bench module run as a script prints its own this way)."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not console.is_terminal:
        console = Console(width=160)  # logs get whole tables, not folded ones
    for t in tables:
        table = Table(title=str(t.get("title", module)), title_style="bold red" if t.get("failed") else "bold")
        for col in t.get("columns", []):
            table.add_column(str(col))
        for row in t.get("rows", []):
            table.add_row(*(str(c) for c in row))
        console.print(table)
        if t.get("notes"):
            console.print(f"[dim]{t['notes']}[/]")
    if seconds is not None:
        console.print(f"[dim]{module}: {seconds:.1f} s[/]\n")


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks and write the tables; a failed module is reported, not fatal (unless --strict)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--only", default="", help="comma list of areas (parser,states,...)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds allowed per module")
    parser.add_argument("--out", type=Path, default=BENCH_DIR / "results", help="where the result files go")
    parser.add_argument("--strict", action="store_true", help="exit 1 when any module failed")
    parser.add_argument("--child", nargs=2, metavar=("MODULE", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(Path(args.child[0]), Path(args.child[1]))
        return 0

    only = {s.strip() for s in args.only.split(",") if s.strip()} or None
    modules = discover(only)
    stem = result_stem(only)
    command = "make bench" if only is None else f"python bench/run.py --only {','.join(sorted(only))}"
    meta = {"date": now_iso(), "machine": machine_description(), "command": command, "seconds": 0.0}
    print(f"agentfsm benchmarks, {meta['date']}\n{meta['machine']}\n")
    start = time.perf_counter()
    results: list[dict[str, Any]] = []
    for path in modules:
        print(f"running {path.name} ...", flush=True)
        tables, seconds = run_module(path, args.timeout)
        print_tables(tables, path.name, seconds)
        results.append({"module": path.name, "seconds": round(seconds, 2), "tables": tables})
    meta["seconds"] = time.perf_counter() - start
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{stem}.md").write_text(render_markdown(results, meta), encoding="utf-8")
    (args.out / f"{stem}.json").write_text(
        json.dumps({"meta": meta, "results": results}, indent=2, default=str) + "\n", encoding="utf-8"
    )
    failed = [r["module"] for r in results if any(t.get("failed") for t in r["tables"])]
    print(f"wrote {args.out / stem}.md and {stem}.json in {meta['seconds']:.0f} s")
    if failed:
        print(f"FAILED: {', '.join(failed)} (see their tables above)", file=sys.stderr)
    return 1 if failed and args.strict else 0


if __name__ == "__main__":
    raise SystemExit(main())
