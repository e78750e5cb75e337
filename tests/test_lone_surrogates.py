"""A lone UTF-16 surrogate in a request is read as U+FFFD and named, not refused.

A JavaScript client that cuts a text by UTF-16 units cuts an emoji in half, and
``JSON.stringify`` writes the half left as an escape (``"\\ud83d"``). Claude Code's
truncated tool output is a known case: its provider answers 400 ("no low surrogate in
string"), and since the history is sent again every turn, every later request of the
session fails the same way. The proxy reads the half character as U+FFFD, answers, and
names ``lone_surrogate`` in ``x-agentfsm-ignored``. The bodies are written by Node's own
``JSON.stringify`` (a real client's encoder) and sent raw to a real proxy.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from urllib.parse import unquote

import httpx
import pytest

from agentfsm.core.client_json import LONE_SURROGATE, load_client_json
from agentfsm.core.errors import RequestError
from agentfsm.testing import FakeUpstream
from tests._proxy import proxy, upstream_backend

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="needs Node (make test's client suite has it)")

PATHS = {"openai": "/v1/chat/completions", "responses": "/v1/responses", "anthropic": "/v1/messages"}

#: a tool's output cut after three UTF-16 units: the fire emoji whole, then half of the next
CUT = "'build log: \\u{1F525}\\u{1F525} done'.slice(0, 14)"

#: Node builds each protocol's body around the cut text, with JSON.stringify
BODIES = """
const [protocol, stream] = [process.argv[1], process.argv[2] === "1"];
const cut = %s + "...";
const tool = {type: "function", function: {name: "read_log", parameters: {type: "object", properties: {}}}};
let body;
if (protocol === "openai") {
  body = {model: "m", stream, tools: [tool], messages: [
    {role: "user", content: "What does the log say?"},
    {role: "assistant", content: null, tool_calls: [{id: "c1", type: "function", function: {name: "read_log", arguments: "{}"}}]},
    {role: "tool", tool_call_id: "c1", content: cut}]};
} else if (protocol === "responses") {
  body = {model: "m", stream, tools: [{type: "function", name: "read_log", parameters: {type: "object", properties: {}}}],
    input: [{role: "user", content: "What does the log say?"},
      {type: "function_call", call_id: "c1", name: "read_log", arguments: "{}"},
      {type: "function_call_output", call_id: "c1", output: cut}]};
} else {
  body = {model: "m", max_tokens: 64, stream, tools: [{name: "read_log", input_schema: {type: "object", properties: {}}}],
    messages: [{role: "user", content: "What does the log say?"},
      {role: "assistant", content: [{type: "tool_use", id: "t1", name: "read_log", input: {}}]},
      {role: "user", content: [{type: "tool_result", tool_use_id: "t1", content: cut}]}]};
}
process.stdout.write(JSON.stringify(body));
""" % CUT


def _body(protocol: str, stream: bool) -> bytes:
    done = subprocess.run(["node", "-e", BODIES, protocol, "1" if stream else "0"], capture_output=True, check=True)
    return done.stdout


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, FakeUpstream]]:
    transcripts = tmp_path_factory.mktemp("transcripts")
    with FakeUpstream(lambda request: "The log says the build is done.") as fake, proxy(
        upstream_backend(fake), transcripts_dir=transcripts
    ) as url:
        yield url, fake


def test_node_writes_the_half_emoji_as_an_escape() -> None:
    raw = _body("openai", False)
    assert b"\\ud83d..." in raw  # what a JS client sends: valid JSON, not valid Unicode
    with pytest.raises(RequestError, match="lone surrogate"):
        load_client_json(raw)  # read strictly (transcripts, arguments), it is still refused


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("protocol", sorted(PATHS))
def test_a_tool_output_cut_mid_emoji_is_answered_and_named(
    served: tuple[str, FakeUpstream], protocol: str, stream: bool
) -> None:
    url, fake = served
    before = len(fake.chat_requests)
    response = httpx.post(url + PATHS[protocol], content=_body(protocol, stream),
                          headers={"content-type": "application/json"}, timeout=60)
    assert response.status_code == 200, response.text  # before: 400 "holds a lone surrogate"
    assert "The log says the build is done." in response.text
    ignored = [unquote(name) for name in response.headers["x-agentfsm-ignored"].split(",")]
    assert LONE_SURROGATE in ignored
    sent = json.dumps(fake.chat_requests[before].body, ensure_ascii=False)
    assert "build log: \U0001F525\ufffd..." in sent  # the whole emoji kept, the half one read as U+FFFD


def test_a_lone_surrogate_in_a_key_is_read_alike(served: tuple[str, FakeUpstream]) -> None:
    url, _ = served
    body = '{"model": "m", "messages": [{"role": "user", "content": "hi"}], "metadata": {"\\udfff": "x"}}'
    response = httpx.post(url + PATHS["openai"], content=body, headers={"content-type": "application/json"})
    assert response.status_code == 200, response.text
    assert LONE_SURROGATE in response.headers["x-agentfsm-ignored"].split(",")


def test_whole_pairs_are_not_named(served: tuple[str, FakeUpstream]) -> None:
    url, _ = served
    body = '{"model": "m", "messages": [{"role": "user", "content": "fire \\ud83d\\udd25"}]}'
    response = httpx.post(url + PATHS["openai"], content=body, headers={"content-type": "application/json"})
    assert response.status_code == 200, response.text
    assert LONE_SURROGATE not in response.headers.get("x-agentfsm-ignored", "").split(",")


def test_mending_reads_every_string_and_key_and_leaves_the_rest_as_it_is() -> None:
    mended: list[str] = []
    value = load_client_json('{"a": ["x \\ud83d", {"\\udfff": "ok", "b": "\\ud83d\\ude00"}], "n": [1, 2.5, null]}',
                             mended=mended)
    assert value == {"a": ["x \ufffd", {"\ufffd": "ok", "b": "\U0001F600"}], "n": [1, 2.5, None]}
    assert mended == ["the request body"]
    clean: list[str] = []
    assert load_client_json('{"a": "\\ud83d\\ude00"}', mended=clean) == {"a": "\U0001F600"} and clean == []
