"""The chaos run's edges: the upstream, the server's limits, batch files, transcripts.

Sections (a function of ``n`` and the run's evidence each, returning counts; a count in
``_chaos_attacks.MUST_BE_ZERO`` should be 0):

- ``schema_stall``: probe latency while a 250 KB ``uniqueItems`` reply is validated;
- ``stream_stall``: probe latency while a long reply of openers' first characters streams;
- ``upstream_size``: gzip bombs and endless replies, whole and streamed, both protocols;
- ``slow_headers``: header-trickling connections, a connection flood, one client's share;
- ``two_batches``: two batch processes on one results file;
- ``base_url``: credentials and a query in the upstream's URL;
- ``tampered_transcripts``: transcripts tampered with seven ways, replayed;
- ``transcript_keys``: a password passed as a call argument, in the whole transcript file.
"""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Callable
from typing import Any

import httpx

from _chaos_attacks import ROOT, SEED, TOOLS, USER, Counts
from _chaos_proxy import CLIENT_KEY, Evidence, rss_kib, serve
from agentfsm.testing import FakeUpstream, ReceivedRequest, flood, latency, raw_body

__all__ = ["SECTIONS"]

PROBE_LIMIT_MS = 100
_PLAIN = {"model": "m", "messages": [{"role": "user", "content": "probe"}]}
#: the probe: a request the proxy answers itself (body read and checked, the prompt built
#: and counted), so that its latency is the proxy's alone, not the fake upstream's as well
_PROBE_PATH = "/v1/messages/count_tokens"
_PROBE = {"model": "m", "messages": [{"role": "user", "content": "probe"}], "tools": [
    {"name": "get_weather", "description": "Weather.", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]}


def _probe_while(url: str, headers: dict[str, str], busy: Callable[[], Any]) -> tuple[list[float], Any]:
    """Run ``busy`` in a thread; meanwhile send plain requests one after another: their latencies (ms)."""
    result: list[Any] = []
    worker = threading.Thread(target=lambda: result.append(busy()))
    latencies: list[float] = []
    with httpx.Client(timeout=60, headers={**headers, "x-api-key": CLIENT_KEY, "anthropic-version": "2023-06-01"}) as client:
        worker.start()
        time.sleep(0.05)
        while worker.is_alive():
            started = time.perf_counter()
            client.post(url + _PROBE_PATH, json=_PROBE)
            latencies.append((time.perf_counter() - started) * 1000)
            time.sleep(0.01)
        worker.join()
    return latencies, result[0] if result else None


def _baseline(url: str, headers: dict[str, str], count: int = 30) -> list[float]:
    """Latencies (ms) of plain requests to an idle proxy: what the machine itself adds."""
    out = []
    with httpx.Client(timeout=60, headers={**headers, "x-api-key": CLIENT_KEY, "anthropic-version": "2023-06-01"}) as client:
        client.post(url + "/v1/chat/completions", json=_PLAIN)  # warm: pools, imports
        for _ in range(count):
            started = time.perf_counter()
            client.post(url + _PROBE_PATH, json=_PROBE)
            out.append((time.perf_counter() - started) * 1000)
            time.sleep(0.01)
    return out


def _latency_counts(baseline: list[float], during: list[float]) -> Counts:
    """Median, 95th percentile and max of the probes, beside the idle baseline's; the
    median is what must stay under :data:`PROBE_LIMIT_MS` (a loaded machine's scheduling
    shows in the baseline's max as much as in the probes')."""
    def pct(values: list[float], q: float) -> int:
        ordered = sorted(values) or [0.0]
        return int(ordered[min(len(ordered) - 1, int(q * len(ordered)))])

    return {
        "baseline_p50_ms": pct(baseline, 0.5), "baseline_max_ms": pct(baseline, 1.0),
        "probes": len(during), "probe_p50_ms": pct(during, 0.5), "probe_p95_ms": pct(during, 0.95),
        "probe_max_ms": pct(during, 1.0), "probes_over_100ms": sum(ms > PROBE_LIMIT_MS for ms in during),
        "probe_median_over_100ms": int(pct(during, 0.5) > PROBE_LIMIT_MS),
    }


# -- 5: a 250 KB uniqueItems reply, validated while others wait -------------------------

_UNIQUE_SCHEMA = {"type": "object", "properties": {"rows": {"type": "array", "uniqueItems": True,
                  "items": {"type": "object"}}}, "required": ["rows"]}
_UNIQUE_TOOLS = [{"type": "function", "function": {"name": "save_rows", "description": "Save rows.", "parameters": _UNIQUE_SCHEMA}}]


def _unique_reply(kib: int) -> str:
    rows, size, i = [], 0, 0
    while size < kib * 1024:
        row = {"id": i, "tags": [i, str(i)], "note": "row"}
        rows.append(row)
        size += len(json.dumps(row)) + 2
        i += 1
    return "```json action\n" + json.dumps({"tool": "save_rows", "parameters": {"rows": rows}}) + "\n```"


def schema_stall(n: int, evidence: Evidence) -> Counts:
    """Probe latency while the model's 250 KB uniqueItems reply (objects: unsortable) is
    parsed and validated, ``n / 100`` times (at least 2); transcripts off (writing a 250 KB
    call's events costs ~60 ms each, linear, and is not what is measured here)."""
    big = _unique_reply(250)

    def script(request: ReceivedRequest) -> Any:
        text = str(request.messages[-1].get("content", "")) if request.messages else ""
        return latency(0.0, "pong") if text == "probe" else big

    count = {"reply_kib": len(big) // 1024, "replies": 0}
    during: list[float] = []
    with FakeUpstream(script) as fake, serve(evidence, "schema_stall", fake.base_url, transcripts=False) as proxy:
        headers = proxy.openai_headers
        baseline = _baseline(proxy.url, headers)
        for _ in range(max(2, n // 100)):
            body = {"model": "m", "messages": [{"role": "user", "content": "save these rows"}], "tools": _UNIQUE_TOOLS}
            latencies, response = _probe_while(proxy.url, headers, lambda b=body: httpx.post(proxy.url + "/v1/chat/completions", json=b, headers=headers, timeout=300))
            count["replies"] += response is not None and response.status_code == 200
            during += latencies
    return {**count, **_latency_counts(baseline, during)}


# -- 14: a long streamed reply of openers' first characters -----------------------------


def stream_stall(n: int, evidence: Evidence) -> Counts:
    """Probe latency while a streamed reply of ``[{<`@`` characters (1 MB at n=400) is
    parsed (and, no call in it, corrected and streamed again); transcripts off."""
    size = max(64, n * 2560)
    rnd = random.Random(SEED)
    text = "".join(rnd.choice("[{<`@") for _ in range(size))

    def script(request: ReceivedRequest) -> Any:
        asked = str(request.messages[-1].get("content", "")) if request.messages else ""
        return latency(0.0, "pong") if asked == "probe" else text

    count = {"reply_kib": size // 1024, "seed": SEED}
    with FakeUpstream(script) as fake, serve(evidence, "stream_stall", fake.base_url, transcripts=False) as proxy:
        headers = proxy.openai_headers
        baseline = _baseline(proxy.url, headers)
        body = {"model": "m", "max_tokens": 2_000_000, "messages": USER, "tools": TOOLS, "stream": True}
        latencies, _ = _probe_while(proxy.url, headers, lambda: httpx.post(proxy.url + "/v1/chat/completions", json=body, headers=headers, timeout=600).text)
    return {**count, **_latency_counts(baseline, latencies)}


# -- 6: gzip bombs and endless replies --------------------------------------------------


def _bomb(mib: int) -> bytes:
    z = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    parts = [z.compress(b'{"choices": [{"message": {"content": "')]
    parts += [z.compress(b" " * (1 << 20)) for _ in range(mib)]
    return b"".join(parts) + z.compress(b'"}}]}') + z.flush()


def upstream_size(n: int, evidence: Evidence) -> Counts:
    """A 1 GiB gzip bomb (1 MB on the wire) and an endless reply, whole and streamed, both
    protocols, ``n / 100`` rounds (at least 1): answers that are not an upstream error, and
    the proxy's RSS growth."""
    bomb = raw_body(_bomb(1024), headers={"content-encoding": "gzip"})
    count = {"bomb_wire_kib": 0, "bomb_mib": 1024, "requests": 0, "not_an_upstream_error": 0,
             "rss_before_kib": 0, "rss_after_kib": 0, "rss_growth_over_100mb": 0}
    count["bomb_wire_kib"] = len(bomb.raw) // 1024

    def script(request: ReceivedRequest) -> Any:
        return bomb if "bomb" in str(request.messages[-1].get("content", "")) else flood()

    with FakeUpstream(script) as fake, serve(evidence, "upstream_size", fake.base_url, "--request-timeout", "60") as proxy:
        count["rss_before_kib"] = rss_kib(proxy.process.pid)
        for _ in range(max(1, n // 100)):
            for what in ("bomb", "flood"):
                for path in ("/v1/chat/completions", "/v1/messages"):
                    for stream in (False, True):
                        headers = proxy.openai_headers if path.endswith("completions") else proxy.anthropic_headers
                        body = {"model": "m", "max_tokens": 256, "stream": stream, "messages": [{"role": "user", "content": what}]}
                        response = httpx.post(proxy.url + path, json=body, headers=headers, timeout=120)
                        evidence.keep(response)
                        count["requests"] += 1
                        upstream_error = response.status_code == 502 or (stream and response.status_code == 200 and "larger than" in response.text)
                        count["not_an_upstream_error"] += not upstream_error
        count["rss_after_kib"] = rss_kib(proxy.process.pid)
    count["rss_growth_over_100mb"] = int(count["rss_after_kib"] - count["rss_before_kib"] > 100 * 1024)
    return count


# -- 7: slow headers, a connection flood, one client's share -----------------------------


def _connect(url: str) -> socket.socket:
    host, _, port = url.removeprefix("http://").partition(":")
    return socket.create_connection((host, int(port)), timeout=10)


def _closed_within(sock: socket.socket, seconds: float) -> bytes | None:
    sock.settimeout(seconds)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except TimeoutError:
        return None
    except OSError:
        pass
    return data


def slow_headers(n: int, evidence: Evidence) -> Counts:
    """Trickled headers past a 1 s deadline, connections past a limit of 40, and one
    client's 12 slow calls beside another's fast one (a share of 4)."""
    count = {"trickled": 0, "held_after_timeout": 0, "flood": 0, "over_limit_not_refused": 0,
             "other_client_waited": 0}

    def script(request: ReceivedRequest) -> Any:
        return latency(3.0, "slow") if "slow" in str(request.messages[-1].get("content", "")) else latency(0.0, "fast")

    options = ("--header-timeout", "1", "--max-connections", "40", "--client-share", "4")
    with FakeUpstream(script) as fake, serve(evidence, "slow_headers", fake.base_url, *options) as proxy:
        socks = [_connect(proxy.url) for _ in range(min(30, max(4, n // 10)))]
        line = b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\n"
        for i in range(10):  # a byte every 0.2 s for 2 s
            for sock in socks:
                try:
                    sock.sendall(line[i : i + 1])
                except OSError:
                    pass
            time.sleep(0.2)
        count["trickled"] = len(socks)
        count["held_after_timeout"] = sum(_closed_within(s, 3) is None for s in socks)
        for sock in socks:
            sock.close()
        time.sleep(0.5)
        held = [_connect(proxy.url) for _ in range(40)]
        time.sleep(0.2)
        extra = [_connect(proxy.url) for _ in range(10)]
        count["flood"] = len(held) + len(extra)
        count["over_limit_not_refused"] = sum(not (a or b"").startswith(b"HTTP/1.1 503") for a in (_closed_within(s, 0.7) for s in extra))
        for sock in held + extra:
            sock.close()
        time.sleep(1.5)  # the held ones' header deadline passes
        hog = httpx.Client(timeout=60, headers=proxy.openai_headers, transport=httpx.HTTPTransport(local_address="127.0.0.1"))
        slow = {"model": "m", "messages": [{"role": "user", "content": "slow"}]}
        threads = [threading.Thread(target=lambda: hog.post(proxy.url + "/v1/chat/completions", json=slow)) for _ in range(12)]
        for t in threads:
            t.start()
        time.sleep(1.0)
        other = httpx.Client(timeout=60, headers=proxy.openai_headers, transport=httpx.HTTPTransport(local_address="127.0.0.2"))
        started = time.monotonic()
        other.post(proxy.url + "/v1/chat/completions", json=_PLAIN)
        count["other_client_waited"] = int(time.monotonic() - started > 1.0)
        for t in threads:
            t.join(60)
        hog.close()
        other.close()
    return count


# -- 8: two batches on one results file ------------------------------------------------


def two_batches(n: int, evidence: Evidence) -> Counts:
    """A second ``agentfsm batch`` started on the results file of a running one, ``n / 100``
    times (at least 1): ids written twice, and second runs not refused."""
    from fixtures.batch.upstream import TOOLS_MODULE, make_script, task_lines

    count = {"pairs": 0, "tasks": 0, "ids_written_twice": 0, "second_not_refused": 0}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for round_ in range(max(1, n // 100)):
        folder = evidence.root / f"two_batches_{round_}"
        folder.mkdir(parents=True, exist_ok=True)
        tasks, out = folder / "tasks.jsonl", folder / "out.jsonl"
        tasks.write_text("\n".join(task_lines(60)) + "\n")
        inner, gate = make_script(latency=0.01), threading.Event()

        def held(request: ReceivedRequest) -> Any:
            gate.wait(120)
            return inner(request)

        with FakeUpstream(held) as fake:
            cmd = [sys.executable, "-m", "agentfsm", "batch", str(tasks), "-o", str(out), "--concurrency", "8",
                   "--backend", "openai", "--base-url", fake.base_url, "--model", "fake",
                   "--tools-module", TOOLS_MODULE, "--no-progress", "--json"]
            first = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            deadline = time.monotonic() + 120
            while not fake.requests and first.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
            second = subprocess.run(cmd, env=env, capture_output=True, timeout=300)
            gate.set()
            first.communicate(timeout=300)
        ids = [json.loads(line)["id"] for line in out.read_text().splitlines()]
        count["pairs"] += 1
        count["tasks"] += 60
        count["ids_written_twice"] += len(ids) - len(set(ids))
        count["second_not_refused"] += second.returncode != 2
    return count


# -- 12: credentials and a query in the upstream's URL ----------------------------------


def base_url(n: int, evidence: Evidence) -> Counts:
    """``serve`` with a user and password in ``--base-url`` (it must refuse to start, without
    showing the password), and with ``?api-version=`` (every request must carry it)."""
    secret = "pw-chaos-53b2"
    count = {"starts": 0, "started_with_credentials": 0, "password_shown": 0, "requests": 0, "query_dropped": 0}
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AGENTFSM_LOG_LEVEL": "DEBUG"}
    for user in ("user", "u%40x", ""):
        cmd = [sys.executable, "-m", "agentfsm", "serve", "--port", "0", "--backend", "openai", "--model", "m",
               "--base-url", f"http://{user}:{secret}@127.0.0.1:9/v1", "--upstream-api-key", "sk-x"]
        done = subprocess.run(cmd, env=env, capture_output=True, timeout=120)
        count["starts"] += 1
        count["started_with_credentials"] += done.returncode != 2
        count["password_shown"] += secret.encode() in done.stderr + done.stdout
    with FakeUpstream(lambda r: "pong") as fake, serve(evidence, "base_url", fake.base_url + "?api-version=2024-10-21") as proxy:
        for stream in [False, True] * max(1, n // 100):
            httpx.post(proxy.url + "/v1/chat/completions", json={**_PLAIN, "stream": stream}, headers=proxy.openai_headers, timeout=30)
        count["requests"] = len(fake.chat_requests)
        count["query_dropped"] = sum(r.query != "api-version=2024-10-21" for r in fake.chat_requests)
    return count


# -- 10: tampered transcripts ------------------------------------------------------------


def _tamper(rnd: random.Random, good: str) -> bytes:
    kind = rnd.choice(["integer", "deep", "surrogate", "nan", "bytes", "cut", "not an event"])
    raw = {
        "integer": "7" * rnd.randint(4301, 20000),
        "deep": "[" * rnd.randint(200, 200_000) + "]" * 0,
        "surrogate": '"\\ud' + rnd.choice("89ab") + '00"',
        "nan": rnd.choice(["NaN", "Infinity", "-Infinity", "1e999"]),
    }.get(kind)
    if raw is not None:
        line = good.replace('"content": "a"', f'"content": {raw}')
        return (line + "\n" + good + "\n").encode()
    if kind == "bytes":
        return good.encode()[:20] + bytes(rnd.randint(128, 255) for _ in range(8)) + b"\n" + good.encode() + b"\n"
    if kind == "cut":
        return (good[: rnd.randint(1, len(good) - 1)] + "\n" + good + "\n").encode()
    return (json.dumps([1, 2, 3]) + "\n").encode()


def tampered_transcripts(n: int, evidence: Evidence) -> Counts:
    """``n / 20`` transcripts (at least 7) tampered in one of seven ways, each replayed with
    ``agentfsm replay``: tracebacks, and exits other than 2 (an unreadable transcript)."""
    from agentfsm.core.events import FinalEvent
    from agentfsm.runtime.transcript import TranscriptWriter

    rnd = random.Random(SEED)
    count = {"files": 0, "seed": SEED, "tracebacks": 0, "exit_not_2": 0}
    folder = evidence.root / "tampered"
    folder.mkdir(parents=True, exist_ok=True)
    seed_file = folder / "good.jsonl"
    with TranscriptWriter(seed_file) as writer:
        writer.write(FinalEvent(content="a"))
    good = seed_file.read_text().splitlines()[0]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for i in range(max(7, n // 20)):
        path = folder / f"t{i}.jsonl"
        path.write_bytes(_tamper(rnd, good))
        done = subprocess.run([sys.executable, "-m", "agentfsm", "replay", str(path)], capture_output=True, env=env, timeout=300)
        count["files"] += 1
        count["tracebacks"] += b"Traceback" in done.stderr
        count["exit_not_2"] += done.returncode != 2
    return count


# -- 15: a password passed as an argument, in the raw text of the file -------------------

PASSWORD = "hunter2-chaos-7d1"


def transcript_keys(n: int, evidence: Evidence) -> Counts:
    """Agent runs whose model passes a password to a tool, in four formats: the password's
    occurrences anywhere in the transcript file (call events hide it; the raw text must too)."""
    from agentfsm import Agent
    from agentfsm.backends.scripted import ScriptedBackend

    def login(user: str, password: str) -> str:
        """Log in."""
        return f"ok {user}"

    written = [
        '```json action\n{"tool": "login", "parameters": {"user": "bob", "password": "PW"}}\n```',
        "<tool_call>\n<function=login>\n<parameter=user>\nbob\n</parameter>\n<parameter=password>\nPW\n</parameter>\n</function>\n</tool_call>",
        "[login(user='bob', password='PW')]",
        '@tool login {"user": "bob", "password": "PW"}',
    ]
    count = {"runs": 0, "password_in_file": 0}
    folder = evidence.root / "transcript_keys"
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(max(4, n // 50)):
        path = folder / f"run{i}.jsonl"
        reply_text = written[i % len(written)].replace("PW", PASSWORD)
        backend = ScriptedBackend([reply_text, f"Logged in (with {PASSWORD})."])
        Agent(backend, [login], transcript=path).run("log me in as bob")
        count["runs"] += 1
        count["password_in_file"] += path.read_text().count(PASSWORD)
    return count




SECTIONS: dict[str, Callable[[int, Evidence], Counts]] = {
    "schema_stall": schema_stall,
    "stream_stall": stream_stall,
    "upstream_size": upstream_size,
    "slow_headers": slow_headers,
    "two_batches": two_batches,
    "base_url": base_url,
    "tampered_transcripts": tampered_transcripts,
    "transcript_keys": transcript_keys,
}
