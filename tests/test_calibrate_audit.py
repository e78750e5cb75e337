"""``agentfsm calibrate`` and ``serve --models`` as a demanding user meets them: the real CLI
in a subprocess against a scripted upstream on 127.0.0.1, a profile written and then served
by a real ``agentfsm serve --models``, and the official SDKs in front of it.

What is held here: a key given to calibrate never lands in the profile, its table or the
console; an output path that cannot be written is refused before any model call, and a
profile is replaced whole or not at all; Ctrl-C says what it interrupted and leaves the
profile as it was; an entry whose settings its backend cannot run stops serve at start-up;
a mistake in a profile names the profile.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from agentfsm.core.profile import Profile
from agentfsm.eval.calibrate import load_items
from agentfsm.testing import FakeUpstream, ReceivedRequest
from agentfsm.testing.fake_script import FakeReply
from tests._followers import follower, item_answers
from tests._proxy import TOOLS_ANTHROPIC, TOOLS_OPENAI, free_port, wait_until_serving

ITEMS = load_items()
KEY = "sk-calib-audit-secret-0042"
URL_KEY = "url-query-secret-9931"


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    """A model that follows the command dialect only."""
    with FakeUpstream(follower("command", item_answers(ITEMS)), keep_requests=False) as fake:
        yield fake


def _calibrate(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentfsm", "calibrate", *args], capture_output=True, text=True, timeout=timeout
    )


def _upstream_args(fake: FakeUpstream, model: str = "cmd") -> list[str]:
    return ["--backend", "openai", "--base-url", fake.base_url, "--model", model]


def test_a_key_given_to_calibrate_is_in_no_file_it_writes_nor_on_the_console(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    output = tmp_path / "p.json"
    base_url = f"{upstream.base_url}?api-version=1&key={URL_KEY}"
    done = _calibrate("--backend", "openai", "--base-url", base_url, "--model", "cmd",
                      "--upstream-api-key", KEY, "-o", str(output))
    assert done.returncode == 0, done.stderr
    entry = Profile.from_json(json.loads(output.read_text())).for_model("openai:cmd")
    # the command is still there to read and rerun, with each key replaced
    assert "--upstream-api-key '***'" in entry.command and "key=***" in entry.command
    for text in (output.read_text(), output.with_suffix(".md").read_text(), done.stdout, done.stderr):
        assert KEY not in text and URL_KEY not in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-o", "taken"], "-o {d}/taken: {d}/taken is a folder"),
        (["-o", "p.json"], "-o {d}/p.json: {d}/p.md is a folder"),
        (["-o", "file.txt/p.json"],
         "-o {d}/file.txt/p.json: cannot write in {d}/file.txt: {d}/file.txt exists and is not a directory"),
        (["-o", "table.md"], "-o {d}/table.md: the table is written to the profile's path with .md; name the profile .json"),
        (["-o", "new.json", "--transcripts", "file.txt"],
         "cannot write transcripts into directory {d}/file.txt: {d}/file.txt exists and is not a directory"),
    ],
)
def test_an_output_that_cannot_be_written_is_refused_before_any_model_call(
    tmp_path: Path, args: list[str], message: str
) -> None:
    (tmp_path / "taken").mkdir()
    (tmp_path / "p.md").mkdir()
    (tmp_path / "file.txt").write_text("not a folder")
    paths = [a if a.startswith("-") else str(tmp_path / a) for a in args]
    with FakeUpstream(follower("command", item_answers(ITEMS))) as fake:
        done = _calibrate(*_upstream_args(fake), *paths)
        assert fake.chat_requests == []  # refused up front, not after the whole calibration
    assert done.returncode == 2
    assert done.stderr.strip() == "agentfsm: error: " + message.format(d=tmp_path)


def _limit_file_size() -> None:  # the child may write no file past 2 KiB (a full disk, a quota)
    import resource

    resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))


def test_a_profile_is_replaced_whole_or_not_at_all(upstream: FakeUpstream, tmp_path: Path) -> None:
    output = tmp_path / "p.json"
    for model in ("a", "b"):
        assert _calibrate(*_upstream_args(upstream, model), "-o", str(output)).returncode == 0
    before = output.read_bytes()
    assert len(before) > 2048
    done = subprocess.run(
        [sys.executable, "-m", "agentfsm", "calibrate", *_upstream_args(upstream, "c"), "-o", str(output)],
        capture_output=True, text=True, timeout=300, preexec_fn=_limit_file_size,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == f"agentfsm: error: cannot write {output}: File too large"
    # the models a and b are still there, and no temporary file is left behind
    assert output.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["p.json", "p.md"]
    assert "| command | prompt | 10 | 100 (72-100) |" in done.stdout  # what was measured was shown


def _default_sigint() -> None:  # a shell's background job may start with Ctrl-C ignored
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_says_what_it_interrupted_and_leaves_the_profile(tmp_path: Path) -> None:
    output = tmp_path / "p.json"
    output.write_text(json.dumps(Profile().to_json()))
    before = output.read_bytes()
    answer = follower("command", item_answers(ITEMS))

    def slow(request: ReceivedRequest) -> FakeReply:
        return FakeReply(text=answer(request), latency=0.5)

    with FakeUpstream(slow) as fake:
        child = subprocess.Popen(
            [sys.executable, "-m", "agentfsm", "calibrate", *_upstream_args(fake), "-o", str(output)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint,
        )
        deadline = time.monotonic() + 60
        while not fake.chat_requests and time.monotonic() < deadline:
            time.sleep(0.05)
        assert fake.chat_requests, "calibrate never called the model"
        child.send_signal(signal.SIGINT)
        _, stderr = child.communicate(timeout=60)
    assert child.returncode == 130
    assert stderr.strip().endswith(  # stopped in its first item: no partial profile to keep
        f"agentfsm: interrupted: 0 of {len(ITEMS)} items were done; {output} was not written (one there is as it was)"
    )
    assert "Traceback" not in stderr
    assert output.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["p.json"]


# -- the profile, served -----------------------------------------------------------------


@pytest.fixture(scope="module")
def calibrated(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A profile the real CLI wrote for the command follower (as ``openai:cmd``)."""
    output = tmp_path_factory.mktemp("calibrated") / "profiles" / "upstreams.json"
    done = _calibrate(*_upstream_args(upstream), "-o", str(output))
    assert done.returncode == 0, done.stderr
    return output


def _serve(models: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``agentfsm serve --models`` that is expected to stop at start-up."""
    return subprocess.run(
        [sys.executable, "-m", "agentfsm", "serve", "--models", str(models), "--port", "0", *args],
        capture_output=True, text=True, timeout=120, env=env,
    )


def _edited(calibrated: Path, folder: Path, **chosen: object) -> Path:
    """A copy of the calibrated profile with its choice edited by hand."""
    data = json.loads(calibrated.read_text())
    data["models"]["openai:cmd"]["chosen"].update(chosen)
    path = folder / "edited.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(
    ("chosen", "message"),
    [
        ({"dialect": "xml"}, "dialect must be one of json-action, json-protocol, command, smiley; got 'xml'"),
        ({"max_corrections": "2"}, "max_corrections must be an integer; got '2'"),
        # the models file refuses these; a profile that sets them is refused the same way
        ({"tool_choice": "required"}, "tool_choice: each request brings its own tool_choice and parallel, and runs "
                                      "one deciding turn and no tools (not a setting of a served model)"),
    ],
)
def test_a_profile_edited_by_hand_is_named_where_the_mistake_is(
    upstream: FakeUpstream, calibrated: Path, tmp_path: Path, chosen: dict[str, object], message: str
) -> None:
    profile = _edited(calibrated, tmp_path, **chosen)
    models = tmp_path / "models.toml"
    models.write_text(f'[models.cmd]\nbase_url = "{upstream.base_url}"\nprofile = "edited.json"\n')
    done = _serve(models)
    assert done.returncode == 2
    assert done.stderr.strip() == f"agentfsm: error: {models}: models.cmd: {profile}: models.openai:cmd.chosen: {message}"


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        # calibrated where the upstream took a JSON schema, served where it is told not to
        ('json_schema_mode = "off"\nprofile = "edited.json"\n',
         "enforcement constrained (from profile edited.json): this backend cannot constrain decoding to a JSON schema"),
        ('enforcement = "prefill"\n',
         "enforcement prefill (from models file): this backend cannot prefill the assistant turn"),
    ],
)
def test_an_enforcement_the_upstream_cannot_do_stops_serve_at_start_up(
    upstream: FakeUpstream, calibrated: Path, tmp_path: Path, entry: str, message: str
) -> None:
    _edited(calibrated, tmp_path, enforcement="constrained")
    models = tmp_path / "models.toml"
    models.write_text(f'[models.cmd]\nbase_url = "{upstream.base_url}"\n{entry}')
    done = _serve(models)
    assert done.returncode == 2
    assert done.stderr.strip() == f"agentfsm: error: {models}: models.cmd: {message}"


def test_an_enforcement_the_upstream_cannot_do_stops_the_single_backend_serve(upstream: FakeUpstream) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agentfsm", "serve", "--port", "0", *_upstream_args(upstream), "--enforcement", "prefill"],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == "agentfsm: error: enforcement prefill (from flags): this backend cannot prefill the assistant turn"


def _ask_each(oa: openai.OpenAI, an: anthropic.Anthropic) -> list[str]:
    """Each entry's answers through both SDKs, whole and streamed, checked for its settings; the
    listings in both shapes; a name differing by case. The texts read, to search for the key."""
    user: list[Any] = [{"role": "user", "content": "What is the weather in Paris?"}]
    expected = {"cmd": "dialect=command; enforcement=prompt", "plain": "dialect=smiley; enforcement=auto"}
    seen: list[str] = []
    for name, settings in expected.items():
        for stream in (False, True):
            a = oa.chat.completions.with_raw_response.create(model=name, messages=user, tools=TOOLS_OPENAI, stream=stream)
            b = an.messages.with_raw_response.create(
                model=name, max_tokens=256, messages=user, tools=TOOLS_ANTHROPIC, stream=stream
            )
            for raw in (a, b):
                assert (raw.headers["x-agentfsm-model"], raw.headers["x-agentfsm-settings"]) == (name, settings)
                seen.append(raw.http_response.read().decode())
    base = str(oa.base_url).rstrip("/")
    seen += [httpx.get(f"{base}/models").text,
             httpx.get(f"{base}/models", headers={"anthropic-version": "2023-06-01"}).text]
    assert [m.id for m in oa.models.list()] == [m.id for m in an.models.list()] == ["cmd", "plain"]
    with pytest.raises(openai.NotFoundError) as missing:
        oa.responses.create(model="CMD", input="hi")  # names differ by case: not the same model
    assert missing.value.code == "model_not_found"
    return seen


def test_a_calibrated_profile_served_through_the_sdks(
    upstream: FakeUpstream, calibrated: Path, tmp_path: Path
) -> None:
    """calibrate's profile, named from a models file in another folder, served by the real CLI:
    each name's requests run with its settings (headers, run_start), whole and streamed, and
    the key the entry names is in no answer, listing or transcript."""
    models = tmp_path / "conf" / "models.toml"
    models.parent.mkdir()
    profile = os.path.relpath(calibrated, models.parent)  # relative to the models file, not to cwd
    models.write_text(
        f'[models.cmd]\nbase_url = "{upstream.base_url}"\nmodel = "cmd"\napi_key_env = "AUDIT_KEY"\n'
        f'profile = "{profile}"\n\n'
        f'[models.plain]\nbase_url = "{upstream.base_url}"\nmodel = "cmd"\ndialect = "smiley"\n'
    )
    transcripts, port = tmp_path / "transcripts", free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "agentfsm", "serve", "--models", str(models), "--port", str(port),
         "--transcripts", str(transcripts)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "AUDIT_KEY": KEY},
    )
    url = f"http://127.0.0.1:{port}"
    seen: list[str] = []
    try:
        wait_until_serving(url, server)
        with (openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0) as oa,
              anthropic.Anthropic(base_url=url, api_key="unused", max_retries=0) as an):
            seen += _ask_each(oa, an)
    finally:
        server.terminate()
        _, log = server.communicate(timeout=20)
    starts = [json.loads(p.read_text().splitlines()[0])["config"] for p in transcripts.glob("*.jsonl")]
    assert sorted((c["model_entry"], c["settings_from"], c["dialect"], c["enforcement"]) for c in starts) == sorted(
        [("cmd", f"profile {profile}", "command", "prompt")] * 4 + [("plain", "models file", "smiley", "auto")] * 4
    )
    for text in [*seen, log, *(p.read_text() for p in transcripts.glob("*.jsonl"))]:
        assert KEY not in text
