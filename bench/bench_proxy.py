"""Benchmark: what the proxy adds, against an instant fake upstream on 127.0.0.1, beside its peer.

The reference is the same client calling the fake upstream directly, in the same run.
Through the proxy (``agentfsm serve`` in its own process) each request with tools is
normalized, projected with the contract, sent upstream, its reply parsed and guarded,
and encoded back as ``tool_calls``; agentfsm runs once with one worker and once with
``--workers N`` (``AGENTFSM_BENCH_PROXY_WORKERS``, default the machine's cores, at least
2), each its own row. The peer is LiteLLM's proxy (one worker) against
the same fake, when ``.venv-peers/`` holds it (``make bench-peers`` installs it there,
away from the project's pins). The fake upstream, each proxy and the load generator
each run in their own process. Latency p50 and throughput at concurrency 1, 10 and 50,
non-streaming and streaming, each proxy's CPU time per request (from /proc: stable where
throughput is not, since everything shares the machine's cores), and each proxy's RSS before
and after.

Sizes: ``AGENTFSM_BENCH_PROXY_REQUESTS`` scales the request counts (default 1.0).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

__all__ = ["run"]

_SCALE = float(os.environ.get("AGENTFSM_BENCH_PROXY_REQUESTS", "1.0"))
#: worker processes of the second agentfsm target
WORKERS = int(os.environ.get("AGENTFSM_BENCH_PROXY_WORKERS") or max(2, len(os.sched_getaffinity(0))))
#: concurrency -> requests per measurement
LOADS = {c: max(10, int(n * _SCALE)) for c, n in {1: 300, 10: 600, 50: 600}.items()}
#: concurrency -> rounds per point: the targets are measured in turn, round after round, and
#: each figure is the median over the rounds (the c=1 latency is a fraction of a millisecond
#: that a slow spell of a shared machine, hitting one target and not the next, would swamp)
ROUNDS = {1: 5, 10: 3}
#: requests agentfsm has served when its memory is read (the soak tops the points up)
SOAK = max(1000, int(25_000 * _SCALE))
#: requests per measurement sent first and not timed: enough to open every connection
WARMUP = 50
_ROOT = Path(__file__).resolve().parent.parent
_LITELLM = _ROOT / ".venv-peers" / "bin" / "litellm"
_ACTION = '```json action\n{"tool": "get_weather", "parameters": {"city": "Paris"}}\n```'
_TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}]
_MESSAGES = [{"role": "user", "content": "What is the weather in Paris?"}]
#: the name of the agentfsm target with several workers
_MANY = "agentfsm-workers"
_UPSTREAM = """
import sys, time
from agentfsm.testing import FakeUpstream
with FakeUpstream(lambda _r: sys.argv[2], port=int(sys.argv[1]), keep_requests=False):
    time.sleep(3600)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(url: str, proc: subprocess.Popen[bytes], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"{what} did not start in {seconds:.0f} s")


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("AGENTFSM_API_KEY", "OPENAI_API_KEY")}


def _start_upstream() -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-c", _UPSTREAM, str(port), _ACTION], env=_env(), cwd=_ROOT)
    url = f"http://127.0.0.1:{port}/v1"
    _wait(f"{url}/models", proc, 30, "the fake upstream")
    return proc, url


def _start_proxy(upstream: str, workers: int = 1) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentfsm", "serve", "--port", str(port), "--backend", "openai",
         "--base-url", upstream, "--model", "fake-model", "--workers", str(workers)],
        env=_env(), cwd=_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    _wait(f"{url}/health", proc, 60, "agentfsm serve")
    return proc, f"{url}/v1/chat/completions"


def _start_litellm(upstream: str, tmp: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    config = tmp / "litellm.yaml"
    config.write_text(
        "model_list:\n  - model_name: fake-model\n    litellm_params:\n"
        f"      model: openai/fake-model\n      api_base: {upstream}\n      api_key: not-needed\n",
        encoding="utf-8",
    )
    env = _env() | {"LITELLM_LOG": "ERROR", "LITELLM_TELEMETRY": "False"}
    proc = subprocess.Popen(
        [str(_LITELLM), "--config", str(config), "--port", str(port), "--num_workers", "1"],
        env=env, cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    _wait(f"{url}/health/liveliness", proc, 180, "the LiteLLM proxy")
    return proc, f"{url}/chat/completions"


def _family(pid: int) -> list[int]:
    """``pid`` and its descendants (a server's worker processes), from /proc."""
    found, todo = [], [pid]
    while todo:
        each = todo.pop()
        found.append(each)
        try:
            for task in Path(f"/proc/{each}/task").iterdir():
                todo += [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def _cpu_s(pid: int) -> float:
    """CPU seconds (user and system) spent so far by ``pid`` and its living descendants."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for each in _family(pid):
        try:
            fields = Path(f"/proc/{each}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / tick


def _rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and its descendants, in MB (from /proc)."""
    total = 0
    for each in _family(pid):
        try:
            for line in Path(f"/proc/{each}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


async def _load(url: str, body: dict[str, Any], concurrency: int, requests: int) -> dict[str, float]:
    """Send ``requests`` requests, ``concurrency`` at a time; latency percentiles and throughput."""
    latencies: list[float] = []
    errors = 0
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    # aiohttp's pool under httpx's API: httpcore's own costs the generator ~9 ms CPU a request
    # at high concurrency, CPU the proxies under test would lose on a 2-core machine
    from httpx_aiohttp import AiohttpTransport

    transport = AiohttpTransport(limits=limits)
    async with httpx.AsyncClient(timeout=60, limits=limits, transport=transport) as client:
        queue = list(range(requests + WARMUP))
        timed = 0

        async def worker() -> None:
            nonlocal errors, timed
            while queue:
                i = queue.pop()
                start = time.perf_counter()
                try:
                    response = await client.post(url, json=body)  # reads the whole body (or stream)
                    response.raise_for_status()
                except httpx.HTTPError:
                    errors += 1
                    continue
                if i < requests:  # the first WARMUP popped are the highest numbers
                    latencies.append(time.perf_counter() - start)

        await asyncio.gather(*(worker() for _ in range(concurrency)))  # warm-up included
        queue = list(range(requests))
        latencies.clear()
        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - started
        timed = len(latencies)
    ordered = sorted(latencies) or [float("nan")]
    return {
        "p50": statistics.median(ordered) * 1000,
        "rps": timed / wall,
        "errors": errors,
    }


def _median_of(runs: list[dict[str, float]]) -> dict[str, float]:
    """Each figure's median over the rounds (errors summed)."""
    return {
        "p50": statistics.median(r["p50"] for r in runs),
        "rps": statistics.median(r["rps"] for r in runs),
        "cpu_ms": statistics.median(r.get("cpu_ms", float("nan")) for r in runs),
        "errors": sum(r["errors"] for r in runs),
    }


def _ratio(ours: list[dict[str, float]], theirs: list[dict[str, float]], key: str) -> str:
    """The median over the rounds of each round's ``ours / theirs`` figure, with its
    range where there were several rounds."""
    each = [o[key] / t[key] if t[key] else float("nan") for o, t in zip(ours, theirs, strict=True)]
    text = f"{statistics.median(each):.2f}x"
    return f"{text} ({min(each):.2f}-{max(each):.2f})" if len(each) > 1 else text


def _added(proxy: list[dict[str, float]], direct: list[dict[str, float]]) -> float:
    """The proxy's added p50: the median over the rounds of its p50 minus the direct p50
    measured beside it in the same round."""
    return statistics.median(p["p50"] - d["p50"] for p, d in zip(proxy, direct, strict=True))


def _measure(
    url: str, stream: bool, concurrency: int, requests: int, server: int | None = None
) -> dict[str, float]:
    """One measurement, by a load generator in its own process; with ``server`` (a proxy's
    pid) also that proxy's CPU milliseconds per request, warm-up included."""
    body = {"model": "fake-model", "messages": _MESSAGES, "tools": _TOOLS, "stream": stream}
    cpu_before = _cpu_s(server) if server is not None else 0.0
    proc = subprocess.run(
        [sys.executable, __file__, "--load", url, json.dumps(body), str(concurrency), str(requests)],
        capture_output=True, text=True, timeout=600, cwd=_ROOT,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"load generator failed: {proc.stderr.strip().splitlines()[-1:]}")
    result: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    if server is not None:
        result["cpu_ms"] = (_cpu_s(server) - cpu_before) * 1000 / (requests + WARMUP)
    return result


def run() -> list[dict[str, Any]]:
    """Two tables: direct vs agentfsm vs LiteLLM per point, and each proxy's RSS."""
    rows: list[list[Any]] = []
    rss: dict[str, list[float]] = {}
    sent: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        upstream, base = _start_upstream()
        procs: dict[str, subprocess.Popen[bytes]] = {}
        try:
            targets = {"direct": f"{base}/chat/completions"}
            procs["agentfsm"], targets["agentfsm"] = _start_proxy(base)
            procs[_MANY], targets[_MANY] = _start_proxy(base, WORKERS)
            peer_note = "LiteLLM not installed (`make bench-peers` installs it in .venv-peers/)."
            if _LITELLM.is_file():
                try:
                    procs["litellm"], targets["litellm"] = _start_litellm(base, Path(tmp))
                    version = subprocess.run(
                        [str(_LITELLM.parent / "python"), "-c",
                         "import importlib.metadata as m; print(m.version('litellm'))"],
                        capture_output=True, text=True, timeout=60,
                    ).stdout.strip()
                    peer_note = f"LiteLLM {version} proxy, one worker, in .venv-peers/."
                except RuntimeError as exc:
                    peer_note = f"LiteLLM did not start: {exc}"
            for name, proc in procs.items():
                rss[name] = [_rss_mb(proc.pid)]
                sent[name] = 0
            for stream in (False, True):
                for concurrency, requests in LOADS.items():
                    rounds: dict[str, list[dict[str, float]]] = {name: [] for name in targets}
                    for _ in range(ROUNDS.get(concurrency, 1)):
                        for name, url in targets.items():
                            pid = procs[name].pid if name in procs else None
                            rounds[name].append(_measure(url, stream, concurrency, requests, pid))
                            sent[name] = sent.get(name, 0) + requests + WARMUP
                    got = {name: _median_of(runs) for name, runs in rounds.items()}
                    direct = got["direct"]
                    peer = got.get("litellm")
                    for variant, workers in (("agentfsm", 1), (_MANY, WORKERS)):
                        ours = got[variant]
                        rows.append([
                            ("stream " if stream else "") + f"c={concurrency}",
                            workers,
                            requests * len(rounds["direct"]),
                            f"{direct['p50']:.2f}",
                            f"{ours['p50']:.2f} ({_added(rounds[variant], rounds['direct']):+.2f})",
                            f"{peer['p50']:.2f} ({_added(rounds['litellm'], rounds['direct']):+.2f})" if peer else "-",
                            f"{direct['rps']:.0f}",
                            f"{ours['rps']:.0f} ({_ratio(rounds[variant], rounds['direct'], 'rps')} direct)",
                            f"{peer['rps']:.0f} ({_ratio(rounds['litellm'], rounds['direct'], 'rps')} direct)" if peer else "-",
                            _ratio(rounds[variant], rounds["litellm"], "rps") if peer else "-",
                            f"{ours['cpu_ms']:.2f}",
                            f"{peer['cpu_ms']:.2f}" if peer else "-",
                            "/".join(f"{got[n]['errors']:.0f}" for n in ("direct", variant, "litellm") if n in got),
                        ])
            # agentfsm's memory is read after SOAK requests in all (more, non-streamed, at c=10);
            # the peer's after the points above (at its rate a soak would take minutes)
            more = SOAK - sent["agentfsm"] - WARMUP
            if more > 0:
                _measure(targets["agentfsm"], False, 10, more)
                sent["agentfsm"] += more + WARMUP
            for name, proc in procs.items():
                rss[name].append(_rss_mb(proc.pid))
        finally:
            for proc in [*procs.values(), upstream]:
                proc.terminate()
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
    return [{
        "title": "Proxy overhead beside its peer: tool-call requests, instant fake upstream on 127.0.0.1",
        "columns": [
            "point", "agentfsm workers", "requests", "direct p50 (ms)", "agentfsm p50 (added)", "LiteLLM p50 (added)",
            "direct req/s", "agentfsm req/s", "LiteLLM req/s", "agentfsm / LiteLLM req/s",
            "agentfsm CPU ms/request", "LiteLLM CPU ms/request", "errors direct/agentfsm/LiteLLM",
        ],
        "rows": rows,
        "notes": (
            "Direct: an httpx client (aiohttp's pool) posting to the fake upstream. Proxies: the same client posting the "
            "same body (with one tool) to `agentfsm serve` (adds the contract, calls the fake, parses and guards "
            f"its json-action reply, answers with tool_calls), one uvicorn worker and `--workers {WORKERS}` (each a "
            "row, against the same direct and peer figures of that point), and to the peer. "
            f"{peer_note} The fake upstream (FakeUpstream), each proxy and each load generator run in "
            f"their own processes. {WARMUP} warm-up requests per measurement are not timed; a streamed "
            f"request is timed to its last byte. c=1 points: {ROUNDS[1]} rounds of {LOADS[1]} requests per target, "
            f"c=10 points {ROUNDS[10]} rounds of {LOADS[10]}, c=50 one of {LOADS[50]}; "
            "the targets in turn each round; p50, req/s and CPU are medians over the rounds, the added p50 the median "
            "of each round's proxy p50 minus that round's direct p50, a ratio the median of each round's ratio "
            "with its range over the rounds in brackets (requests: all rounds). CPU ms/request: user and system "
            "time of the proxy's processes (its workers included) over a measurement, warm-up requests included, "
            "from /proc; it depends on the load far less than req/s does. "
            "Everything shares the machine's cores, so a proxy's "
            "cost is CPU time taken from the others; ratios are taken within this run."
        ),
    }, {
        "title": "Proxy memory: RSS before and after the load above",
        "columns": ["proxy", "requests served", "RSS before (MB)", "RSS after (MB)"],
        "rows": [[name, sent[name], f"{v[0]:.0f}", f"{v[-1]:.0f}"] for name, v in rss.items()],
        "notes": (
            "VmRSS of the proxy process and its descendants (its workers), from /proc, after start-up and after the "
            f"run; agentfsm's after {SOAK:,} requests in all (the points above, then non-streamed requests "
            "at c=10), the peer's after the points. Target: agentfsm <= 80 MB after 25,000 requests."
        ),
    }]


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--load":
        url, body_text, conc, count = sys.argv[2:6]
        print(json.dumps(asyncio.run(_load(url, json.loads(body_text), int(conc), int(count)))))
    else:
        from run import print_tables  # bench/run.py

        print_tables(run(), __file__)
