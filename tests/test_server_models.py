"""Several models behind one proxy: a models file of three entries, routed by ``model``.

Two scripted upstreams on 127.0.0.1, one following only the command dialect, one only
json-protocol (its settings from a profile that calibrate wrote for it), and a fake of
the embedded model (its capabilities, following only smiley). Each client-visible name
reaches its own upstream with its own dialect, through the official OpenAI and
Anthropic SDKs, whole and streamed; the captured upstream bodies show it.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from agentfsm.backends import OpenAICompatBackend
from agentfsm.backends.scripted import ScriptedBackend
from agentfsm.core.backend import Backend, Capabilities
from agentfsm.core.config import DEFAULTS
from agentfsm.core.errors import UsageError
from agentfsm.core.profile import ModelProfile, Profile
from agentfsm.eval.calibrate import RULE, choose, run_calibration, settings_grid, table
from agentfsm.server.models import ModelTable, ServedModel, settings_text
from agentfsm.server.models_file import ModelEntry, build_backend, load_models_file
from agentfsm.testing import FakeUpstream
from tests._followers import MARKERS, Answer, follower, item_answers, prompt_follower
from tests._proxy import TOOLS_ANTHROPIC, TOOLS_OPENAI, proxy

QUESTION = "What is the weather in Paris?"
USER = [{"role": "user", "content": QUESTION}]
ANSWERS = {QUESTION: Answer(((("get_weather", {"city": "Paris"}),),), "It is 18 C in Paris.")}
KEY = "sk-jp-upstream-secret-0042"
#: each client-visible name, the dialect its upstream follows
DIALECTS = {"cmd": "command", "jp": "json-protocol", "small": "smiley"}


@pytest.fixture(scope="module")
def upstreams() -> Iterator[dict[str, FakeUpstream]]:
    with FakeUpstream(follower("command", ANSWERS)) as a, FakeUpstream(follower("json-protocol", ANSWERS)) as b:
        yield {"cmd": a, "jp": b}


def _calibrated_profile(fake: FakeUpstream, path: Path) -> None:
    """Calibrate the json-protocol follower (as ``agentfsm calibrate`` does) and write its profile."""
    from agentfsm.eval.calibrate import load_items

    items = load_items()
    answers = {**item_answers(items), **ANSWERS}

    async def measure() -> ModelProfile:
        with FakeUpstream(follower("json-protocol", answers)) as twin:
            backend = OpenAICompatBackend(twin.base_url, model="upstream-b", api_key="", max_retries=0,
                                          json_schema_mode="off")
            grid = settings_grid(backend.capabilities)
            try:
                rows = table(await run_calibration(backend, items, grid), grid)
            finally:
                await backend.aclose()
        return ModelProfile(model=backend.name, chosen=choose(rows).settings, table=tuple(rows), rule=RULE,
                            date="2026-01-01T00:00:00+00:00", versions={}, items=tuple(i.name for i in items),
                            seconds=1.0)

    path.write_text(json.dumps(Profile().with_model(asyncio.run(measure())).to_json()))


@pytest.fixture(scope="module")
def small() -> ScriptedBackend:
    """A fake of the embedded model: its capabilities, and a model that follows only smiley."""
    caps = Capabilities(prefill=True, json_schema=True, list_continuation=True, context_tokens=8192, small_model=True)
    return ScriptedBackend(prompt_follower("smiley", ANSWERS), capabilities=caps, name="local:fake-smollm2")


def _models_file(folder: Path, upstreams: dict[str, FakeUpstream]) -> Path:
    _calibrated_profile(upstreams["jp"], folder / "profile.json")
    path = folder / "models.toml"
    path.write_text(f"""
[models.cmd]
base_url = "{upstreams["cmd"].base_url}"
model = "upstream-a"
json_schema_mode = "off"
max_retries = 0
dialect = "command"

[models.jp]
base_url = "{upstreams["jp"].base_url}"
model = "upstream-b"
api_key_env = "TEST_JP_KEY"
json_schema_mode = "off"
max_retries = 0
profile = "profile.json"

[models.small]
backend = "local"
dialect = "smiley"
enforcement = "prompt"
""")
    return path


@pytest.fixture(scope="module")
def served(
    upstreams: dict[str, FakeUpstream], small: ScriptedBackend, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path]]:
    folder = tmp_path_factory.mktemp("models")
    secrets: list[str] = []

    def make(name: str, entry: ModelEntry, key: str | None) -> Backend:
        return small if entry.backend == "local" else build_backend(name, entry, key)

    table = load_models_file(_models_file(folder, upstreams), environ={"TEST_JP_KEY": KEY}, make_backend=make,
                             on_secret=secrets.append)
    assert secrets == [KEY]
    transcripts = folder / "transcripts"
    with proxy(table, transcripts_dir=transcripts) as url:
        yield url, transcripts


def _upstream_system(name: str, upstreams: dict[str, FakeUpstream], small: ScriptedBackend) -> str:
    """The system message the model of ``name`` received last."""
    if name == "small":
        return str(small.requests[-1].messages[0].content)
    messages = upstreams[name].chat_requests[-1].messages
    assert upstreams[name].chat_requests[-1].body["model"] == {"cmd": "upstream-a", "jp": "upstream-b"}[name]
    return str(messages[0]["content"])


def _openai(url: str, name: str, stream: bool) -> tuple[tuple[str, dict[str, Any]], dict[str, str]]:
    with openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=30) as client:
        raw = client.chat.completions.with_raw_response.create(
            model=name, messages=USER, tools=TOOLS_OPENAI, stream=stream  # type: ignore[arg-type]
        )
        headers = dict(raw.headers)
        if not stream:
            (call,) = raw.parse().choices[0].message.tool_calls
            return (call.function.name, json.loads(call.function.arguments)), headers
        deltas = [tc for c in raw.parse() if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
        arguments = "".join(d.function.arguments or "" for d in deltas)
        return (deltas[0].function.name, json.loads(arguments)), headers


def _anthropic(url: str, name: str, stream: bool) -> tuple[tuple[str, dict[str, Any]], dict[str, str]]:
    with anthropic.Anthropic(base_url=url, api_key="unused", max_retries=0, timeout=30) as client:
        if stream:
            with client.messages.stream(model=name, max_tokens=256, messages=USER, tools=TOOLS_ANTHROPIC) as s:
                message = s.get_final_message()
                headers = dict(s.response.headers)
        else:
            raw = client.messages.with_raw_response.create(model=name, max_tokens=256, messages=USER,
                                                           tools=TOOLS_ANTHROPIC)  # type: ignore[arg-type]
            message, headers = raw.parse(), dict(raw.headers)
    (use,) = [b for b in message.content if b.type == "tool_use"]
    return (use.name, dict(use.input)), headers


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("sdk", [_openai, _anthropic], ids=["openai", "anthropic"])
@pytest.mark.parametrize("name", list(DIALECTS))
def test_each_name_reaches_its_upstream_with_its_dialect(
    served: tuple[str, Path], upstreams: dict[str, FakeUpstream], small: ScriptedBackend,
    name: str, sdk: Any, stream: bool,
) -> None:
    url, _ = served
    call, headers = sdk(url, name, stream)
    assert call == ("get_weather", {"city": "Paris"})
    system = _upstream_system(name, upstreams, small)
    assert [d for d, marker in MARKERS.items() if marker in system] == [DIALECTS[name]]
    assert headers["x-agentfsm-model"] == name
    enforcement = "prompt" if name == "small" else "auto"
    assert headers["x-agentfsm-settings"] == f"dialect={DIALECTS[name]}; enforcement={enforcement}"


def test_only_the_upstream_that_names_a_key_gets_it(
    served: tuple[str, Path], upstreams: dict[str, FakeUpstream]
) -> None:
    _openai(served[0], "jp", False)
    _openai(served[0], "cmd", False)
    assert upstreams["jp"].chat_requests[-1].headers["authorization"] == f"Bearer {KEY}"
    assert "authorization" not in upstreams["cmd"].chat_requests[-1].headers


def test_models_lists_every_name_and_no_key(served: tuple[str, Path]) -> None:
    url, _ = served
    listed = httpx.get(f"{url}/v1/models")
    assert [m["id"] for m in listed.json()["data"]] == ["cmd", "jp", "small"]
    with anthropic.Anthropic(base_url=url, api_key="unused", max_retries=0) as client:
        assert [m.id for m in client.models.list()] == ["cmd", "jp", "small"]
    with openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0) as oai:
        assert [m.id for m in oai.models.list()] == ["cmd", "jp", "small"]
    assert KEY not in listed.text and "upstream-b" not in listed.text


def test_an_unknown_name_is_the_providers_404(served: tuple[str, Path]) -> None:
    url, _ = served
    with openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0) as client:
        for stream in (False, True):
            with pytest.raises(openai.NotFoundError) as caught:
                client.chat.completions.create(model="gpt-4o", messages=USER, tools=TOOLS_OPENAI,  # type: ignore[arg-type]
                                               stream=stream)
            body: Any = caught.value.body
            assert body["code"] == "model_not_found" and body["type"] == "invalid_request_error"
            assert body["param"] == "model" and "`gpt-4o`" in body["message"] and "cmd, jp, small" in body["message"]
        with pytest.raises(openai.NotFoundError):
            client.responses.create(model="gpt-4o", input="hi")
    with anthropic.Anthropic(base_url=url, api_key="unused", max_retries=0) as claude:
        with pytest.raises(anthropic.NotFoundError) as found:
            claude.messages.create(model="claude-x", max_tokens=64, messages=USER)  # type: ignore[arg-type]
        error: Any = found.value.body
        assert error["type"] == "error" and error["error"]["type"] == "not_found_error"
        with pytest.raises(anthropic.NotFoundError):
            claude.messages.count_tokens(model="claude-x", messages=USER)  # type: ignore[arg-type]
    nameless = httpx.post(f"{url}/v1/chat/completions", json={"messages": USER})
    assert nameless.status_code == 400 and nameless.json()["error"]["param"] == "model"


def test_transcripts_name_the_entry_and_its_settings_and_never_the_key(served: tuple[str, Path]) -> None:
    url, transcripts = served
    for name in DIALECTS:
        _openai(url, name, False)
    starts = {}
    for path in transcripts.glob("*.jsonl"):
        text = path.read_text()
        assert KEY not in text
        start = json.loads(text.splitlines()[0])["config"]
        starts[start["model_entry"]] = (start["dialect"], start["enforcement"], start["settings_from"])
    assert starts == {
        "cmd": ("command", "auto", "models file"),
        "jp": ("json-protocol", "auto", "profile profile.json"),
        "small": ("smiley", "prompt", "models file"),
    }


def test_a_table_routes_unknown_names_to_its_fallback() -> None:
    backend = ScriptedBackend(["hello"])
    table = ModelTable([ServedModel("a", backend), ServedModel("b", backend)], fallback="b")
    assert table.route("a").name == "a" and table.route("anything").name == "b" and table.route(None).name == "b"
    assert table.backends() == [backend]
    with pytest.raises(UsageError, match="listed twice"):
        ModelTable([ServedModel("a", backend), ServedModel("a", backend)])
    with pytest.raises(UsageError, match="fallback 'c'"):
        ModelTable([ServedModel("a", backend)], fallback="c")


def test_settings_header_names_dialect_enforcement_and_what_differs() -> None:
    assert settings_text(DEFAULTS) == "dialect=json-action; enforcement=auto"
    changed = DEFAULTS.replace(dialect="command", max_corrections=1, max_steps=3)  # max_steps: not the proxy's
    assert settings_text(changed) == "dialect=command; enforcement=auto; max_corrections=1"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[models.a]\nbase_url = 'http://x/v1'\ncolour = 'red'\n", "models.a: colour: Extra inputs are not permitted"),
        ("[models.a]\nbase_url = 'http://x/v1'\ntool_choice = 'required'\n", "tool_choice: each request brings its own"),
        ("[models.a]\nbase_url = 'http://x/v1'\ndialect = 'yaml'\n", "models.a: dialect must be one of"),
        ("[models.a]\nbase_url = 'http://x/v1'\napi_key_env = 'NOT_SET_ANYWHERE'\n", "NOT_SET_ANYWHERE (api_key_env) is not set, or empty"),
        ("[models.a]\nmodel = 'm'\n", "models.a: an openai entry needs base_url"),
        ("[models.a]\nbackend = 'local'\nbase_url = 'http://x/v1'\n", "a local entry takes no base_url"),
        ("[models.a]\nbase_url = 'http://x/v1'\nprofile = 'missing.json'\n", "cannot read the profile"),
        ("[models.a]\nbase_url = 'http://x/v1'\ncontext_tokens = 0\n", "context_tokens: Input should be greater than or equal to 1"),
        ("fallback = 'b'\n[models.a]\nbase_url = 'http://x/v1'\n", "the fallback 'b' is not one of the models"),
        ("model = 'a'\n", "unknown top-level key(s) model"),
        ("[models]\n", "no models"),
        ("[models.a\n", "is not valid TOML"),
        # Ollama's and LiteLLM's names, unquoted: the quoting rule is named, not a stray key "5"
        ("[models.qwen2.5]\nbase_url = 'http://x/v1'\n", 'models.qwen2: 5 is a table inside this entry, as [models.qwen2.5] reads; a model name holding anything but letters, digits, "-" and "_" is quoted: [models."org/model:tag"]'),
        ("# models\n[models.org/model:tag]\nbase_url = 'http://x/v1'\n", '(at line 2, column 12); a model name holding anything but letters, digits, "-" and "_" is quoted'),
        ("[models.' qwen']\nbase_url = 'http://x/v1'\n", "the model name ' qwen' begins or ends with a space, or holds a character that is not printable"),
        ('[models."a\\tb"]\nbase_url = \'http://x/v1\'\n', "the model name 'a\\tb' begins or ends with a space, or holds a character"),
    ],
)
def test_models_file_mistakes_are_named(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "models.toml"
    path.write_text(text)
    with pytest.raises(UsageError) as caught:
        load_models_file(path, environ={})
    assert message in str(caught.value) and str(path) in str(caught.value)


def test_a_toml_error_elsewhere_gets_no_naming_hint(tmp_path: Path) -> None:
    path = tmp_path / "models.toml"
    path.write_text("[models.a]\nbase_url = http://x/v1\n")
    with pytest.raises(UsageError) as caught:
        load_models_file(path, environ={})
    assert "is not valid TOML" in str(caught.value) and "quoted" not in str(caught.value)


def test_quoted_names_are_served_as_written(tmp_path: Path) -> None:
    path = tmp_path / "models.toml"
    path.write_text("[models.\"org/model:tag\"]\nbase_url = 'http://x/v1'\n[models.\"qwen2.5:7b\"]\nbase_url = 'http://x/v1'\n"
                    "[models.\"modèle a\"]\nbase_url = 'http://x/v1'\n", encoding="utf-8")
    table = load_models_file(path, environ={})
    assert table.names == ("org/model:tag", "qwen2.5:7b", "modèle a")
    assert table.route("qwen2.5:7b").backend.name == "openai:qwen2.5:7b"


def test_a_profile_without_the_model_is_named(tmp_path: Path) -> None:
    (tmp_path / "p.json").write_text(json.dumps(Profile().to_json()))
    path = tmp_path / "models.toml"
    path.write_text("[models.a]\nbase_url = 'http://x/v1'\nmodel = 'm'\nprofile = 'p.json'\n")
    with pytest.raises(UsageError, match=r"models.a: the profile has no model 'openai:m' \(it has: none\)"):
        load_models_file(path, environ={})


def test_serve_refuses_models_beside_the_single_backend_flags(tmp_path: Path) -> None:
    path = tmp_path / "models.toml"
    path.write_text("[models.a]\nbase_url = 'http://127.0.0.1:9/v1'\n")
    done = subprocess.run(
        [sys.executable, "-m", "agentfsm", "serve", "--models", str(path), "--base-url", "http://127.0.0.1:9/v1"],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 2 and "--models replaces --backend, --base-url" in done.stderr
    assert done.stderr.rstrip().endswith("(given: --base-url)")
    # a variable left in the environment is named as such: the operator typed only --models
    env = {**os.environ, "AGENTFSM_BASE_URL": "http://127.0.0.1:9/v1", "AGENTFSM_UPSTREAM_API_KEY": "sk-left-9"}
    done = subprocess.run([sys.executable, "-m", "agentfsm", "serve", "--models", str(path)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 2 and "sk-left-9" not in done.stderr
    assert done.stderr.rstrip().endswith("(given: --base-url from $AGENTFSM_BASE_URL, --upstream-api-key from "
                                         "$AGENTFSM_UPSTREAM_API_KEY)")


def test_the_server_package_exports_the_table() -> None:
    import agentfsm.server as server

    assert server.__all__ == sorted(server.__all__)
    assert server.ModelTable is ModelTable and server.load_models_file is load_models_file
    assert all(getattr(server, name) is not None for name in server.__all__)


def test_a_hung_upstream_holds_none_of_a_clients_share_of_another(tmp_path: Path) -> None:
    """--client-share bounds one client's requests at each upstream: before, it was one
    share across every model, and a client's calls stuck at a model whose upstream hung
    held its places, so that its requests for a healthy model waited behind them."""
    import threading

    from tests._fake import Held

    hangs = Held("late")
    started, release = hangs.started, hangs.release
    with FakeUpstream(hangs) as hung, FakeUpstream() as healthy:
        path = tmp_path / "models.toml"
        path.write_text(f"[models.hung]\nbase_url = '{hung.base_url}'\nmax_retries = 0\n"
                        f"[models.ok]\nbase_url = '{healthy.base_url}'\nmax_retries = 0\n")
        stuck: list[str] = []
        with proxy(load_models_file(path, environ={}), client_share=1) as url:
            client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=60)

            def ask_hung() -> None:
                stuck.append(client.chat.completions.create(model="hung", messages=USER).choices[0].message.content or "")

            waiting = threading.Thread(target=ask_hung)
            waiting.start()
            try:
                assert started.wait(60)
                quick = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=20)
                answer = quick.chat.completions.create(model="ok", messages=USER)  # while the other still hangs
                assert answer.choices[0].message.content == f"echo: {QUESTION}"
                assert not release.is_set() and not stuck
            finally:
                release.set()
                waiting.join(60)
            assert stuck == ["late"]
