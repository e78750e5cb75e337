"""The upstream's key, in whatever form an upstream echoes it, reaches no client, transcript or log.

Defect (issue 29, item 3): when an upstream answered 200 with HTML, bad JSON, an error
object or an SSE error event, excerpts of its body went into the error message
unredacted (480 of 864 responses); and escaped forms of the key (``\\/``, ``\\u...``,
URL-encoded) passed redaction even on a 401.
"""

from __future__ import annotations

import html
import json
import urllib.parse
from pathlib import Path

import httpx
import pytest

from agentfsm.backends import OpenAICompatBackend, Timeouts
from agentfsm.cli._logging import redact, register_secret
from agentfsm.core.redaction import Redactor
from agentfsm.testing import FakeReply, FakeUpstream, raw_body, status
from agentfsm.testing.key_forms import KEY_FORMS
from tests._proxy import TOOLS_ANTHROPIC, TOOLS_OPENAI, proxy

KEY = "sk-live/9f+Xq-0123456789abcdef"

FORMS = KEY_FORMS


def _decoded(text: str) -> list[str]:
    """``text`` as a reader might decode it: as is, URL-, HTML- and JSON-unescaped."""
    views = [text, urllib.parse.unquote(text), html.unescape(text)]
    try:
        views.append(text.replace("\\/", "/").encode("latin-1", "backslashreplace").decode("unicode_escape"))
    except UnicodeDecodeError:
        pass
    return views


def _leaks(text: str) -> bool:
    return any(KEY in view for view in _decoded(text))


#: the response paths that quote upstream bytes: (name, reply for a whole request, for a streamed one)
def _paths(form: str) -> dict[str, FakeReply]:
    k = FORMS[form](KEY)
    return {
        "200 html": raw_body(f"<html><body>Invalid key {k}</body></html>", "text/html"),
        "200 bad json": raw_body('{"choices": [{"message": "' + k),
        "200 error object": raw_body(json.dumps({"error": {"message": "bad key " + k}}).replace(json.dumps(k)[1:-1], k)),
        "200 not an object": raw_body(json.dumps(["key", "K"]).replace("K", k)),
        "sse error event": raw_body('data: {"error": {"message": "bad key ' + k + '"}}\n\n', "text/event-stream"),
        "sse bad json": raw_body("data: {" + k + "\n\n", "text/event-stream"),
        "401": status(401, body='{"error": {"message": "Incorrect API key provided: ' + k + '"}}'),
        "400 long body, key past the excerpt": status(400, body="x" * 190 + k),
    }


@pytest.mark.parametrize("form", list(FORMS))
def test_the_redactor_replaces_every_form(form: str) -> None:
    text = "before " + FORMS[form](KEY) + " after"
    assert _leaks(text)  # the reader can decode it back
    redacted = Redactor([KEY])(text)
    assert redacted == "before *** after" and not _leaks(redacted)


def test_registered_secrets_are_redacted_from_logs_in_every_form() -> None:
    register_secret(KEY)
    for form in FORMS.values():
        assert not _leaks(redact("upstream said: " + form(KEY)))



@pytest.mark.parametrize("form", list(FORMS))
def test_no_form_of_the_key_reaches_a_client_transcript_or_log(form: str, tmp_path: Path, agentfsm_log: list[str]) -> None:
    paths = _paths(form)
    # each path is asked 6 ways: two protocols x whole/streamed, plus the Responses API
    asks = [(p, stream) for p in ("/v1/chat/completions", "/v1/messages", "/v1/responses") for stream in (False, True)]
    script = [reply for reply in paths.values() for _ in asks]
    texts: list[str] = []
    with FakeUpstream(script) as fake:
        backend = OpenAICompatBackend(fake.base_url, "m", api_key=KEY, timeout=Timeouts(2, 2, 5), max_retries=0,
                                      json_schema_mode="off")
        with proxy(backend, transcripts_dir=tmp_path) as url:
            for name in paths:
                for path, stream in asks:
                    tools = TOOLS_ANTHROPIC if path == "/v1/messages" else TOOLS_OPENAI
                    if path == "/v1/responses":
                        tools = [{"type": "function", **t["function"]} for t in TOOLS_OPENAI]
                    body = {"model": "m", "max_tokens": 50, "tools": tools, "stream": stream}
                    body["input" if path == "/v1/responses" else "messages"] = [{"role": "user", "content": name}]
                    response = httpx.post(url + path, json=body, timeout=30)
                    assert response.status_code >= 400 or "error" in response.text, (name, path, response.text)
                    texts.append(response.text + repr(dict(response.headers)))
        assert {r.headers["authorization"] for r in fake.chat_requests} == {f"Bearer {KEY}"}
    texts += [p.read_text() for p in tmp_path.glob("*.jsonl")] + agentfsm_log
    assert len(texts) > len(paths) * len(asks)
    assert [t for t in texts if _leaks(t)] == []
    assert any("***" in t for t in texts)  # the key was there, and was redacted
