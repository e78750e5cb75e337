"""SIGHUP makes ``agentfsm serve --models FILE`` read its models file again, one process or
``--workers 2``: the edited file's models are served from then on, a request under way
ends on the models it began with, and a file that no longer loads changes nothing but a
line saying why. Real ``agentfsm serve`` subprocesses, scripted upstreams on 127.0.0.1,
the official OpenAI SDK.

Before, one process died of the signal (the requests under way cut off, their
transcripts never ended), while uvicorn's workers were replaced reading the file again,
and a file that no longer loaded was told as ``New child process [PID] was not ready in
time``, without why.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import openai

from agentfsm.testing import FakeUpstream
from tests._fake import Held
from tests._proxy import free_port, wait_until_serving

USER: Any = [{"role": "user", "content": "hi"}]


def _entry(name: str, upstream: FakeUpstream, dialect: str) -> str:
    return f'[models."{name}"]\nbase_url = "{upstream.base_url}"\nmax_retries = 0\ndialect = "{dialect}"\n'


class _Serve:
    """``agentfsm serve --models FILE`` in a subprocess, its stderr read as it comes."""

    def __init__(self, models: Path, *options: str) -> None:
        self.url = f"http://127.0.0.1:{free_port()}"
        env = {**os.environ, "AGENTFSM_LOG_LEVEL": "INFO"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "agentfsm", "serve", "--port", self.url.rsplit(":", 1)[1], "--models", str(models),
             *options],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        self.stderr = ""

    def wait_for(self, text: str, count: int = 1, timeout: float = 120) -> None:
        """Read stderr until ``text`` has appeared ``count`` times (AssertionError after ``timeout``)."""
        assert self.process.stderr is not None
        deadline = time.monotonic() + timeout
        while self.stderr.count(text) < count:
            assert time.monotonic() < deadline, f"{text!r} not said; stderr:\n{self.stderr}"
            ready, _, _ = select.select([self.process.stderr], [], [], 1.0)
            if ready:
                chunk = os.read(self.process.stderr.fileno(), 65536)
                assert chunk or self.process.poll() is None, f"serve ended; stderr:\n{self.stderr}"
                self.stderr += chunk.decode(errors="replace")

    def names(self) -> list[str]:
        with openai.OpenAI(base_url=f"{self.url}/v1", api_key="unused", max_retries=0, timeout=30) as client:
            return [m.id for m in client.models.list()]

    def settings(self, name: str) -> str:
        with openai.OpenAI(base_url=f"{self.url}/v1", api_key="unused", max_retries=0, timeout=30) as client:
            raw = client.chat.completions.with_raw_response.create(model=name, messages=USER)
            return raw.headers["x-agentfsm-settings"]

    def stop(self) -> str:
        self.process.terminate()
        _, rest = self.process.communicate(timeout=60)
        self.stderr += rest.decode(errors="replace")
        return self.stderr


def test_one_process_reads_the_models_file_again_on_sighup(tmp_path: Path) -> None:
    held = Held("from the models as they were")
    started, release = held.started, held.release
    with FakeUpstream(held) as old, FakeUpstream() as new:
        models = tmp_path / "models.toml"
        models.write_text(_entry("a", old, "command"), encoding="utf-8")
        served = _Serve(models)
        answer: list[str] = []
        try:
            wait_until_serving(served.url, served.process, timeout=120)

            def under_way() -> None:
                with openai.OpenAI(base_url=f"{served.url}/v1", api_key="unused", max_retries=0, timeout=60) as c:
                    answer.append(c.chat.completions.create(model="a", messages=USER).choices[0].message.content or "")

            request = threading.Thread(target=under_way)
            request.start()
            assert started.wait(60)
            models.write_text(_entry("a", new, "json-protocol") + _entry("org/b:7b", new, "smiley"), encoding="utf-8")
            served.process.send_signal(signal.SIGHUP)
            served.wait_for("SIGHUP: serving a, org/b:7b as built again")
            assert served.names() == ["a", "org/b:7b"]
            assert served.settings("a") == "dialect=json-protocol; enforcement=auto"
            assert served.settings("org/b:7b") == "dialect=smiley; enforcement=auto"
            release.set()
            request.join(60)
            assert answer == ["from the models as they were"]  # ended on the app it began on

            models.write_text("[models.a]\nbase_url = 'http://127.0.0.1:9/v1'\ncolour = 'red'\n", encoding="utf-8")
            served.process.send_signal(signal.SIGHUP)
            served.wait_for("SIGHUP: not built again, the models served stay as they were: ")
            assert served.names() == ["a", "org/b:7b"]
            assert served.settings("a") == "dialect=json-protocol; enforcement=auto"
            assert served.process.poll() is None
        finally:
            release.set()
            logs = served.stop()
    assert f"{models}: models.a: colour: Extra inputs are not permitted" in logs
    assert "Unclosed" not in logs and "Traceback" not in logs  # the replaced app's pools were closed
    assert served.process.returncode == -signal.SIGTERM


def _workers(pid: int) -> set[int]:
    """The worker processes uvicorn spawned (not multiprocessing's resource tracker)."""
    children = [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    return {c for c in children if b"spawn_main" in Path(f"/proc/{c}/cmdline").read_bytes()}


def test_workers_read_the_models_file_again_on_sighup_and_say_why_they_could_not(tmp_path: Path) -> None:
    with FakeUpstream() as upstream:
        models = tmp_path / "models.toml"
        models.write_text(_entry("a", upstream, "command"), encoding="utf-8")
        served = _Serve(models, "--workers", "2")
        try:
            served.wait_for("Application startup complete.", count=2)  # both workers read the first file
            first = _workers(served.process.pid)
            models.write_text(_entry("a", upstream, "json-protocol") + _entry("b", upstream, "smiley"), encoding="utf-8")
            served.process.send_signal(signal.SIGHUP)
            served.wait_for("Application startup complete.", count=4)
            assert re.search(r"WARNING: +SIGHUP: replacing the workers one at a time, each reading the models file again",
                             served.stderr)
            deadline = time.monotonic() + 120
            while _workers(served.process.pid) & first:  # each old worker is stopped once its new one serves
                assert time.monotonic() < deadline
                time.sleep(0.1)
            second = _workers(served.process.pid)
            for worker in second:  # as a terminal's hangup reaches them: the supervisor's to answer, not theirs
                os.kill(worker, signal.SIGHUP)
            for _ in range(6):  # either worker
                assert served.names() == ["a", "b"]
                assert served.settings("a") == "dialect=json-protocol; enforcement=auto"
            assert _workers(served.process.pid) == second

            models.write_text("[models.a]\nbase_url = 'http://127.0.0.1:9/v1'\ncolour = 'red'\n", encoding="utf-8")
            served.process.send_signal(signal.SIGHUP)
            served.wait_for("SIGHUP: the workers were not started again, they serve as they did: ")
            for _ in range(6):
                assert served.names() == ["a", "b"]
            assert served.process.poll() is None
        finally:
            logs = served.stop()
    assert f"{models}: models.a: colour: Extra inputs are not permitted" in logs
    assert "not ready in time" not in logs and "died" not in logs  # no worker died of the group's SIGHUP
