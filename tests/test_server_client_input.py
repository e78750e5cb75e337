"""Bad client JSON is the client's typed 400 in its provider's shape, never a 500.

Each case is a body that Python's json module accepts or chokes on in a way that used
to surface as ``500 internal error in the proxy`` (issue 15, defect 5). Sent raw with
httpx to a real proxy (transcripts on, so the transcript writer sees what passes),
both protocols, streamed and not.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
from hypothesis import given, settings
from hypothesis import strategies as st
import pytest

from agentfsm.core.client_json import MAX_JSON_DEPTH, load_client_json
from agentfsm.core.errors import RequestError
from agentfsm.testing import FakeUpstream
from tests._proxy import proxy, upstream_backend

PATHS = {
    "openai": "/v1/chat/completions",
    "responses": "/v1/responses",
    "anthropic": "/v1/messages",
}
PROTOCOLS = sorted(PATHS)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    transcripts = tmp_path_factory.mktemp("transcripts")
    with FakeUpstream(lambda request: "fine") as fake, proxy(
        upstream_backend(fake), transcripts_dir=transcripts
    ) as url:
        yield url


def _head(protocol: str, stream: bool) -> str:
    """The opening of a valid body, up to where each case adds its own field."""
    return json.dumps({"model": "m", "max_tokens": 16, "stream": stream})[:-1]


def _ask(protocol: str, text: str = "hi") -> str:
    """The conversation field of a body, as raw JSON text (``text`` is inserted raw)."""
    key = "input" if protocol == "responses" else "messages"
    return f'"{key}": [{{"role": "user", "content": "{text}"}}]'


def _with(raw_field: str) -> Callable[[str, bool], str]:
    """A valid body with one extra top-level field written as raw JSON text."""
    return lambda protocol, stream: _head(protocol, stream) + ", " + _ask(protocol) + ", " + raw_field + "}"


def _deep_schema(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": {"leaf": {"type": "string"}}}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def _tools_body(levels: int) -> Callable[[str, bool], str]:
    def build(protocol: str, stream: bool) -> str:
        schema = _deep_schema(levels)
        tool: dict[str, Any] = {
            "openai": {"type": "function", "function": {"name": "f", "parameters": schema}},
            "responses": {"type": "function", "name": "f", "parameters": schema},
            "anthropic": {"name": "f", "input_schema": schema},
        }[protocol]
        return _head(protocol, stream) + ", " + _ask(protocol) + ', "tools": ' + json.dumps([tool]) + "}"
    return build


def _deep_arguments(protocol: str, stream: bool) -> str:
    """An assistant tool call whose arguments nest 100,000 levels deep."""
    deep = "[" * 100_000 + "]" * 100_000
    if protocol == "openai":
        call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": deep}}
        messages: list[Any] = [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "done"},
        ]
        return json.dumps({"model": "m", "stream": stream, "messages": messages})
    if protocol == "responses":
        items: list[Any] = [
            {"role": "user", "content": "hi"},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": deep},
            {"type": "function_call_output", "call_id": "c1", "output": "done"},
        ]
        return json.dumps({"model": "m", "stream": stream, "input": items})
    # Anthropic's input is an object in the body itself: the body's own depth limit
    use = '{"type": "tool_use", "id": "t1", "name": "f", "input": {"x": ' + deep + "}}"
    return (
        _head(protocol, stream) + ', "messages": [{"role": "user", "content": "hi"}, '
        '{"role": "assistant", "content": [' + use + "]}]}"
    )


BAD: dict[str, Callable[[str, bool], str]] = {
    "nesting-5000": _with('"x": ' + "[" * 5000 + "]" * 5000),
    "nesting-just-past-limit": _with('"x": ' + "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH),
    "integer-5000-digits": _with('"seed": ' + "7" * 5000),
    "nan": _with('"temperature": NaN'),
    "infinity": _with('"x": Infinity'),
    "minus-infinity": _with('"x": -Infinity'),
    "float-overflow": _with('"temperature": 1e999'),
    "arguments-100k-deep": _deep_arguments,
    "tool-schema-450-levels": _tools_body(450),
}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_client_json_is_a_typed_400(base: str, case: str, protocol: str, stream: bool) -> None:
    body = BAD[case](protocol, stream)
    response = httpx.post(
        base + PATHS[protocol], content=body.encode("utf-8"),
        headers={"content-type": "application/json"}, timeout=60,
    )
    assert response.status_code == 400, response.text
    error = response.json()
    if protocol != "anthropic":
        assert error["error"]["type"] == "invalid_request_error"
    else:
        assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert "internal" not in response.text


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_nesting_within_the_limit_is_served(base: str, protocol: str, stream: bool) -> None:
    """A tool schema nested as deep as the limit allows passes through everything, transcript too."""
    levels = (MAX_JSON_DEPTH - 8) // 2  # each schema level is two JSON levels (properties, name)
    response = httpx.post(
        base + PATHS[protocol], content=_tools_body(levels)(protocol, stream).encode(),
        headers={"content-type": "application/json"}, timeout=60,
    )
    assert response.status_code == 200, response.text


def test_limits_apply_to_text_and_to_every_encoding() -> None:
    assert load_client_json('{"a": [1, 2.5, "\\ud83d\\ude00"]}') == {"a": [1, 2.5, "\U0001f600"]}
    assert load_client_json('{"a": "\u00e9"}'.encode("utf-16")) == {"a": "\u00e9"}
    with pytest.raises(RequestError, match="lone surrogate"):
        load_client_json('{"a": "\\ud800"}'.encode("utf-16-le"))
    with pytest.raises(RequestError, match="not valid JSON"):
        load_client_json(b'{"a": "\xed\xa0\x80"}')  # a surrogate encoded raw in UTF-8
    with pytest.raises(RequestError, match="nests deeper than 128"):
        load_client_json("[" * 129 + "]" * 129)
    assert load_client_json("[" * 128 + "]" * 128) is not None


@settings(max_examples=300, deadline=None)
@given(
    value=st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
        max_leaves=20,
    ),
    ascii_only=st.booleans(),
)
def test_the_fast_reader_reads_what_the_strict_one_reads(value: Any, ascii_only: bool) -> None:
    """orjson (the fast path) and json with the limits' hooks give the same value, the same
    types included: an integer past 64 bits stays an exact int, never a float."""
    text = json.dumps(value, ensure_ascii=ascii_only)
    expected = json.loads(text)
    for data in (text, text.encode("utf-8")):
        got = load_client_json(data)
        assert got == expected
        assert json.dumps(got) == json.dumps(expected)  # same types (1 vs 1.0, int vs float)


def test_the_limits_hold_on_the_fast_path() -> None:
    huge = 10**40
    assert load_client_json(f'{{"n": {huge}, "m": -{huge}}}'.encode()) == {"n": huge, "m": -huge}
    assert load_client_json(b'{"n": 18446744073709551615}') == {"n": 18446744073709551615}
    # below -2**63 orjson reads a float: the strict reader keeps the exact int
    assert load_client_json(b"[-9223372036854775809]") == [-9223372036854775809]
    assert load_client_json("[-9223372036854775809]") == [-9223372036854775809]
    deep = b'{"a": ' * 129 + b"1" + b"}" * 129
    with pytest.raises(RequestError, match="nests deeper than 128"):
        load_client_json(deep)
    with pytest.raises(RequestError, match="nests deeper than 128"):
        load_client_json(deep.decode())
    wide = b"[" + b",".join([b"[[1]]"] * 200) + b"]"  # many brackets, shallow: walked and served
    assert len(load_client_json(wide)) == 200
    for bad, message in [(b"[NaN]", "not a JSON number"), (b"[1e400]", "out of range"),
                         (b'["\\udc00"]', "lone surrogate"), (b"[1,]", "not valid JSON")]:
        with pytest.raises(RequestError, match=message):
            load_client_json(bad)



@pytest.mark.parametrize(
    ("method", "path", "status", "shape"),
    [
        ("GET", "/v1/nothing-here", 404, "openai"),
        ("GET", "/v1/chat/completions", 405, "openai"),
        ("GET", "/v1/messages", 405, "anthropic"),
        ("DELETE", "/v1/responses", 405, "openai"),
    ],
)
def test_unknown_paths_and_wrong_methods_answer_in_the_paths_protocol(
    base: str, method: str, path: str, status: int, shape: str
) -> None:
    response = httpx.request(method, base + path)
    assert response.status_code == status
    body = response.json()
    message = body["error"]["message"]
    assert f"{method} {path}" in message
    if shape == "anthropic":
        assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    else:
        assert set(body["error"]) >= {"message", "type", "param", "code"}


@pytest.mark.parametrize(("method", "path"), [("GET", "/health"), ("HEAD", "/"), ("GET", "/"), ("HEAD", "/health")])
def test_liveness_answers_without_a_key(base: str, method: str, path: str) -> None:
    response = httpx.request(method, base + path)
    assert response.status_code == 200
    if method == "GET":
        assert response.json() == {"status": "ok"}
