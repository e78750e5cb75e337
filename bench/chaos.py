"""``make chaos``: one table of counts of what went wrong under hostile input, faults and load.

Sections (each a function of ``n``, the size of the run, returning counts):

- ``parser``: fuzzed replies parsed whole and streamed (``bench/chaos_parser.py``);
- ``bad_input``: malformed client requests, both protocols: 5xx answers and error
  bodies not in the protocol's shape (or not 4xx);
- ``upstream_faults``: every FakeUpstream fault x the official openai and anthropic SDKs
  x stream and not: hangs (no answer in time) and bad endings (a clean end, a dropped
  connection or an untyped exception instead of the SDK's API error);
- ``slow_body``: clients that send half a body (held connections after the body
  timeout) and clients that leave mid-request (upstream requests still open after);
- ``load``: the proxy's RSS before and after ``10 n`` requests, and their failures;
- ``injection``: action text in tool results and user content, before a scripted model
  that obeys it: calls the model did not author;
- ``answers``: models that never give an acceptable reply (actions under
  ``tool_choice: none``, a tool that is not offered, empty replies) and ones that do after
  a correction, three protocols x stream and not: 200 answers with an empty assistant
  message (:func:`agentfsm.testing.empty_answer`), and ``final`` events with nothing in
  them in every transcript the run's proxies wrote so far;
- the sections of ``bench/_chaos_attacks.py`` (from clients and data: distinct tool
  lists vs RSS, injected actions by normalisation class, the key's forms in every
  response path, Host/Origin/Content-Type, big integers, XML closers and quoted
  commands) and ``bench/_chaos_edges.py`` (schema-validation and stream-parse stalls,
  upstream size, slow headers and connection limits, two batches, the base URL,
  tampered transcripts, passwords in transcripts), each with its size and seed;
- ``secrets``: the canary client and upstream keys searched in every log, transcript,
  error body and response the run produced (forced 500s and echoed keys included).

Every proxy is ``agentfsm serve`` in its own process (``bench/_chaos_proxy.py``). Counts
named in :data:`MUST_BE_ZERO` should be 0. ``python bench/chaos.py [--n N]`` prints the
table and writes ``bench/results/chaos.md``; ``tests/test_chaos.py`` runs it small.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import select
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
for folder in (str(ROOT), str(BENCH)):
    if folder not in sys.path:
        sys.path.insert(0, folder)

import anthropic  # noqa: E402
import httpx  # noqa: E402
import openai  # noqa: E402

from _chaos_proxy import CLIENT_KEY, EXPLODE, UPSTREAM_KEY, Evidence, ServedProxy, rss_kib, serve  # noqa: E402
from _chaos_inputs import BAD_INPUTS, FAULTS, shape_ok  # noqa: E402
import _chaos_attacks  # noqa: E402
import _chaos_edges  # noqa: E402
from agentfsm.testing import FakeUpstream, ReceivedRequest, drip, empty_answer, reply, status  # noqa: E402
from agentfsm.runtime.transcript import read_transcript  # noqa: E402
from fixtures.injections import INJECTED_TOOL, INJECTIONS, names_called, repeating_model, wrap  # noqa: E402

__all__ = ["MUST_BE_ZERO", "SECTIONS", "main", "render", "run"]

Counts = dict[str, int]
USER = [{"role": "user", "content": "weather in Paris?"}]
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather.", "parameters": WEATHER}}]
A_TOOLS = [{"name": "get_weather", "description": "Weather.", "input_schema": WEATHER}]
ACTION = '```json action\n{"tool": "get_weather", "parameters": {"city": "Paris"}}\n```'
#: the counts that must be 0 on working code
MUST_BE_ZERO = frozenset({
    "untyped_exceptions", "calls_from_cut_input", "calls_with_unwritten_arguments",
    "stream_vs_whole_differences", "5xx", "shape_violations", "hangs", "bad_endings",
    "held_connections", "leaked_upstream_requests", "failed_requests", "calls_not_authored",
    "canary_hits", "empty_200s", "empty_finals", "unexpected_outcomes",
}) | _chaos_attacks.MUST_BE_ZERO
_REQUEST_TIMEOUT = 2.0


def _pool(jobs: list[Callable[[], Any]], workers: int = 8) -> list[Any]:
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(lambda job: job(), jobs))


def parser(n: int, evidence: Evidence) -> Counts:
    """Fuzzed replies parsed whole and streamed (bench/chaos_parser.py)."""
    path = BENCH / "chaos_parser.py"
    if not path.exists():
        return {}
    spec = importlib.util.spec_from_file_location("chaos_parser", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    counts: Counts = module.run(n * 250, 15)  # the long form (n=400): 100,000 replies
    return counts


def bad_input(n: int, evidence: Evidence) -> Counts:
    """Malformed requests, both protocols: 5xx and error-shape violations."""
    counts = {"requests": 0, "5xx": 0, "shape_violations": 0}
    with FakeUpstream(lambda r: ACTION) as fake, serve(evidence, "bad_input", fake.base_url) as proxy:
        def one(protocol: str, body: bytes) -> tuple[bool, bool]:
            path = "/v1/chat/completions" if protocol == "openai" else "/v1/messages"
            headers = proxy.openai_headers if protocol == "openai" else proxy.anthropic_headers
            response = httpx.post(proxy.url + path, content=body, timeout=60,
                                  headers={**headers, "content-type": "application/json"})
            evidence.keep(response)
            return response.status_code >= 500, not shape_ok(protocol, response)

        jobs = [
            (lambda p=protocol, b=build(protocol): one(p, b))
            for _ in range(max(1, n // 10))
            for build in BAD_INPUTS.values()
            for protocol in ("openai", "anthropic")
        ]
        for server_error, bad_shape in _pool(jobs, workers=4):
            counts["requests"] += 1
            counts["5xx"] += server_error
            counts["shape_violations"] += bad_shape
    return counts


def _sdk_call(proxy: ServedProxy, protocol: str, stream: bool, fault: str) -> str:
    """One SDK request against a faulty upstream: 'ok' (an API error), 'hang' or 'bad'."""
    messages = [{"role": "user", "content": f"fault={fault}"}]
    limit = _REQUEST_TIMEOUT + 15
    try:
        if protocol == "openai":
            with openai.OpenAI(base_url=proxy.url + "/v1", api_key=CLIENT_KEY, max_retries=0, timeout=limit) as client:
                result: Any = client.chat.completions.create(model="m", messages=messages, tools=TOOLS, stream=stream)  # type: ignore[call-overload]
                if stream:
                    with result:
                        list(result)
        else:
            with anthropic.Anthropic(base_url=proxy.url, api_key=CLIENT_KEY, max_retries=0, timeout=limit) as aclient:
                result = aclient.messages.create(model="m", max_tokens=50, messages=messages, tools=A_TOOLS, stream=stream)  # type: ignore[call-overload]
                if stream:
                    with result:
                        list(result)
        return "bad"  # a faulty upstream, and the client saw a clean end
    except (openai.APITimeoutError, anthropic.APITimeoutError):
        return "hang"
    except (openai.APIConnectionError, anthropic.APIConnectionError):
        return "bad"  # the proxy dropped the connection instead of answering
    except (openai.APIError, anthropic.APIError):
        return "ok"
    except Exception:
        return "bad"


def upstream_faults(n: int, evidence: Evidence) -> Counts:
    """Every fault x both SDKs x stream and not: hangs and bad endings."""
    def script(request: ReceivedRequest) -> Any:
        text = str(request.messages[-1].get("content", "")) if request.messages else ""
        return FAULTS[text.partition("fault=")[2]]()

    counts = {"requests": 0, "hangs": 0, "bad_endings": 0}
    timeout = ("--request-timeout", str(_REQUEST_TIMEOUT))
    with FakeUpstream(script) as fake, serve(evidence, "upstream_faults", fake.base_url, *timeout) as proxy:
        jobs = [
            (lambda p=protocol, s=stream, f=fault: _sdk_call(proxy, p, s, f))
            for _ in range(max(1, n // 20))
            for fault in FAULTS
            for protocol in ("openai", "anthropic")
            for stream in (False, True)
        ]
        for outcome in _pool(jobs, workers=12):
            counts["requests"] += 1
            counts["hangs"] += outcome == "hang"
            counts["bad_endings"] += outcome == "bad"
    return counts


def _half_body(url: str) -> socket.socket:
    host, _, port = url.removeprefix("http://").partition(":")
    sock = socket.create_connection((host, int(port)))
    sock.sendall(
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        b"authorization: Bearer " + CLIENT_KEY.encode() + b"\r\ncontent-length: 4000\r\n\r\n"
        b'{"model": "m", "messages": [{"role": "user", "content": "hel'
    )
    return sock


def _still_open(sock: socket.socket) -> bool:
    """Whether the server kept the connection (it should have answered 408 and closed)."""
    sock.setblocking(False)
    try:
        while True:
            ready, _, _ = select.select([sock], [], [], 0)
            if not ready:
                return True
            if not sock.recv(65536):
                return False
    except OSError:
        return False
    finally:
        sock.close()


def slow_body(n: int, evidence: Evidence) -> Counts:
    """Half bodies (held after the body timeout) and clients leaving (leaked upstream calls)."""
    counts = {"half_bodies": 0, "held_connections": 0, "departures": 0, "leaked_upstream_requests": 0}
    with FakeUpstream(lambda r: drip(0.05, forever=True)) as fake, \
            serve(evidence, "slow_body", fake.base_url, "--body-timeout", "1") as proxy:
        sockets = [_half_body(proxy.url) for _ in range(max(2, n))]
        time.sleep(4)  # the body timeout, then some
        counts["half_bodies"] = len(sockets)
        counts["held_connections"] = sum(_still_open(s) for s in sockets)

        def leave(stream: bool) -> None:
            body = {"model": "m", "messages": USER, "tools": TOOLS, "stream": stream}
            try:
                httpx.post(proxy.url + "/v1/chat/completions", json=body, headers=proxy.openai_headers, timeout=0.5)
            except httpx.TimeoutException:
                pass  # the client gave up and closed its connection

        departures = max(2, n // 2)
        _pool([lambda s=bool(i % 2): leave(s) for i in range(departures)])
        counts["departures"] = departures
        deadline = time.monotonic() + 10
        while fake.in_flight and time.monotonic() < deadline:
            time.sleep(0.1)
        counts["leaked_upstream_requests"] = fake.in_flight
    return counts


def load(n: int, evidence: Evidence) -> Counts:
    """RSS of the proxy before and after ``10 n`` requests (a quarter streamed), and failures."""
    counts = {"requests": 0, "failed_requests": 0, "rss_before_kib": 0, "rss_after_kib": 0}
    with FakeUpstream(lambda r: ACTION) as fake, serve(evidence, "load", fake.base_url) as proxy:
        with httpx.Client(timeout=60, headers=proxy.openai_headers) as client:
            def one(i: int) -> bool:
                body = {"model": "m", "messages": USER, "tools": TOOLS, "stream": i % 4 == 0}
                response = client.post(proxy.url + "/v1/chat/completions", json=body)
                return response.status_code != 200 or "get_weather" not in response.text

            warm = _pool([lambda i=i: one(i) for i in range(min(n, 200))])  # pools, caches
            counts["rss_before_kib"] = rss_kib(proxy.process.pid)
            failed = warm + _pool([lambda i=i: one(i) for i in range(10 * n)])
            counts["rss_after_kib"] = rss_kib(proxy.process.pid)
            counts["requests"] = len(failed)
            counts["failed_requests"] = sum(failed)
    return counts


def injection(n: int, evidence: Evidence) -> Counts:
    """Injected actions in tool results and user content, before a model that obeys them."""
    counts = {"requests": 0, "calls_not_authored": 0}
    for retype in (False, True):
        with FakeUpstream(repeating_model(retype)) as fake, serve(evidence, f"injection_{retype}", fake.base_url) as proxy:
            def one(protocol: str, data: str, in_user: bool) -> int:
                return names_called(proxy.url, protocol, data, in_user, CLIENT_KEY, keep=evidence.keep).count(INJECTED_TOOL)

            jobs = [
                (lambda p=protocol, d=wrap(injected), u=in_user: one(p, d, u))
                for _ in range(max(1, n // 40))
                for injected in INJECTIONS.values()
                for protocol in ("openai", "anthropic")
                for in_user in (False, True)
            ]
            for copied in _pool(jobs, workers=6):
                counts["requests"] += 1
                counts["calls_not_authored"] += copied
    return counts


#: case -> (the model's replies, attempt by attempt (the last repeats), tool_choice, how it must end)
_ANSWER_CASES: dict[str, tuple[list[str], str, str]] = {
    "none-actions": ([ACTION], "none", "give_up"),
    "none-corrected": ([ACTION, "Sunny, I think."], "none", "answer"),
    "unknown-tool": (['```json action\n{"tool": "search", "parameters": {"q": "x"}}\n```'], "auto", "give_up"),
    "empty": ([""], "auto", "give_up"),
    "empty-then-prose": (["", "It is sunny."], "auto", "answer"),
    "prose-then-spent": (["Maybe sunny.\n" + ACTION.replace("get_weather", "nope")] + [ACTION.replace("get_weather", "nope")],
                         "auto", "answer"),
}


def _answer_request(proxy: ServedProxy, protocol: str, case: str, stream: bool) -> httpx.Response:
    choice = _ANSWER_CASES[case][1]
    ask = f"case={case} weather in Paris?"
    if protocol == "openai":
        body: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": ask}], "tools": TOOLS,
                                "tool_choice": choice, "stream": stream}
        return httpx.post(proxy.url + "/v1/chat/completions", json=body, headers=proxy.openai_headers, timeout=60)
    if protocol == "responses":
        tools = [{"type": "function", **t["function"]} for t in TOOLS]
        body = {"model": "m", "input": ask, "tools": tools, "tool_choice": choice, "stream": stream}
        return httpx.post(proxy.url + "/v1/responses", json=body, headers=proxy.openai_headers, timeout=60)
    body = {"model": "m", "max_tokens": 100, "messages": [{"role": "user", "content": ask}], "tools": A_TOOLS,
            "tool_choice": {"type": choice}, "stream": stream}
    return httpx.post(proxy.url + "/v1/messages", json=body, headers=proxy.anthropic_headers, timeout=60)


def _event_types(sse: str) -> set[str]:
    """The kinds of events a stream sent: ``type`` fields, and ``error`` for an error object."""
    kinds: set[str] = set()
    for line in sse.splitlines():
        if line.startswith("data: {"):
            data = json.loads(line[6:])
            kinds.add("error" if "error" in data or data.get("type") in ("error", "response.failed") else str(data.get("type")))
    return kinds


def answers(n: int, evidence: Evidence) -> Counts:
    """Models that never answer acceptably, and ones that do late: never an empty 200."""
    def script(request: ReceivedRequest) -> str:
        text = str(request.messages[-1].get("content", "")) if request.messages else ""
        asked = json.dumps(request.messages)
        case = next(c for c in _ANSWER_CASES if f"case={c} " in asked)
        replies = _ANSWER_CASES[case][0]
        turns = sum(1 for m in request.messages if m.get("role") == "assistant")
        return replies[min(turns, len(replies) - 1)] if text else ""

    counts = {"requests": 0, "answered": 0, "gave_up": 0, "unexpected_outcomes": 0, "empty_200s": 0, "empty_finals": 0}
    with FakeUpstream(script) as fake, serve(evidence, "answers", fake.base_url) as proxy:
        def one(protocol: str, case: str, stream: bool) -> tuple[str, bool]:
            response = _answer_request(proxy, protocol, case, stream)
            evidence.keep(response)
            path = {"openai": "/v1/chat/completions", "responses": "/v1/responses"}.get(protocol, "/v1/messages")
            empty = response.status_code == 200 and empty_answer(path, response.text) is not None
            # a give-up: the provider's server error, or a started stream's error event
            failed = response.status_code == 500 or (stream and "error" in _event_types(response.text))
            outcome = "give_up" if failed else "answer" if response.status_code == 200 else "other"
            if outcome != _ANSWER_CASES[case][2]:
                evidence.keep(f"answers: {protocol} {case} stream={stream}: {response.status_code} {response.text[:300]}")
            return outcome, empty

        jobs = [
            (lambda p=protocol, c=case, s=stream: (c, one(p, c, s)))
            for _ in range(max(1, n // 40))
            for case in _ANSWER_CASES
            for protocol in ("openai", "anthropic", "responses")
            for stream in (False, True)
        ]
        for case, (outcome, empty) in _pool(jobs, workers=6):
            counts["requests"] += 1
            counts["answered"] += outcome == "answer"
            counts["gave_up"] += outcome == "give_up"
            counts["unexpected_outcomes"] += outcome != _ANSWER_CASES[case][2]
            counts["empty_200s"] += empty
    for path in sorted(evidence.root.rglob("*.jsonl")):
        events = read_transcript(path)
        called = any(e["type"] == "tool_call" for e in events)
        counts["empty_finals"] += sum(
            1 for e in events if e["type"] == "final" and not str(e.get("content") or "").strip() and not called
        )
    return counts


def secrets(n: int, evidence: Evidence) -> Counts:
    """Forced 500s, wrong keys and an upstream echoing its key; then every text searched."""
    echo = status(401, body=f"invalid api key {UPSTREAM_KEY}")
    script = [reply(ACTION), echo] * max(1, n // 4)
    counts = {"forced_500s": 0, "refused_401s": 0, "texts_searched": 0, "canary_hits": 0}
    with FakeUpstream(script) as fake, serve(evidence, "secrets", fake.base_url) as proxy:
        for i in range(max(1, n // 4)):
            for messages in (USER, USER, [{"role": "user", "content": EXPLODE}]):
                for stream in (False, True):
                    body = {"model": "m", "messages": messages, "tools": TOOLS, "stream": stream}
                    if messages is USER and stream:
                        continue
                    response = httpx.post(proxy.url + "/v1/chat/completions", json=body, headers=proxy.openai_headers, timeout=30)
                    counts["forced_500s"] += response.status_code == 500
                    evidence.keep(response)
            bad = {"authorization": "Bearer sk-wrong"} if i % 2 else {"x-api-key": UPSTREAM_KEY, "anthropic-version": "2023-06-01"}
            response = httpx.post(proxy.url + "/v1/messages", json={"model": "m", "messages": USER, "max_tokens": 5}, headers=bad, timeout=30)
            counts["refused_401s"] += response.status_code == 401
            evidence.keep(response)
    for _, text in evidence.texts():
        counts["texts_searched"] += 1
        counts["canary_hits"] += text.count(CLIENT_KEY) + text.count(UPSTREAM_KEY)
    return counts


#: section name -> function(n, evidence); ``secrets`` last: it searches what the others left
SECTIONS: dict[str, Callable[[int, Evidence], Counts]] = {
    "parser": parser,
    "bad_input": bad_input,
    "upstream_faults": upstream_faults,
    "slow_body": slow_body,
    "load": load,
    "injection": injection,
    "answers": answers,
    **_chaos_attacks.SECTIONS,
    **_chaos_edges.SECTIONS,
    "secrets": secrets,
}


def run(n: int, only: set[str] | None = None) -> dict[str, Counts]:
    """Every section (or ``only`` those) at size ``n``; counts by section."""
    with tempfile.TemporaryDirectory(prefix="agentfsm-chaos-") as tmp:
        evidence = Evidence(Path(tmp))
        return {name: fn(n, evidence) for name, fn in SECTIONS.items() if only is None or name in only}


def render(results: dict[str, Counts], n: int, seconds: float) -> str:
    """The results as one markdown table; a count that should be 0 and is not is marked."""
    lines = [
        "# Chaos run", "",
        f"`python bench/chaos.py --n {n}`, {seconds:.0f} s. Counts marked * must be 0.", "",
        "| section | count | value |", "|---|---|---:|",
    ]
    for section, counts in results.items():
        for name, value in counts.items():
            star = "*" if name in MUST_BE_ZERO else ""
            flag = " **FAIL**" if star and value else ""
            lines.append(f"| {section} | {name}{star} | {value}{flag} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Run, print the table, write bench/results/chaos.md; exit 1 when a zero count is not 0."""
    parser_ = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser_.add_argument("--n", type=int, default=400, help="size of the run (requests per section, roughly)")
    parser_.add_argument("--only", default="", help="comma-separated sections")
    parser_.add_argument("--out", type=Path, default=BENCH / "results" / "chaos.md")
    args = parser_.parse_args(argv)
    started = time.monotonic()
    results = run(args.n, set(args.only.split(",")) if args.only else None)
    text = render(results, args.n, time.monotonic() - started)
    print(text)
    if not args.only:
        args.out.write_text(text, encoding="utf-8")
        args.out.with_suffix(".json").write_text(json.dumps(results, indent=1), encoding="utf-8")
    bad = [(s, k) for s, c in results.items() for k, v in c.items() if k in MUST_BE_ZERO and v]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
