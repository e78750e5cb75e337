"""The Ray adapter on a local Ray instance: same per-task function, same exactly-once output."""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray

from agentfsm.backends.openai_compat import OpenAICompatBackend
from agentfsm.batch.on_ray import run_batch_ray
from agentfsm.core.errors import UsageError
from agentfsm.testing import FakeUpstream
from fixtures.batch.upstream import TOOLS_MODULE, make_script, task_lines


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


def _ids(path: Path) -> list[str]:
    return [json.loads(line)["id"] for line in path.read_text(encoding="utf-8").splitlines()]


def test_ray_batch_is_exactly_once_across_a_torn_restart(tmp_path: Path, local_ray: None) -> None:
    n = 20
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("\n".join(task_lines(n)) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    with FakeUpstream(make_script()) as fake:
        factory = functools.partial(OpenAICompatBackend, fake.base_url, model="fake", api_key="sk-test")
        first = run_batch_ray(tasks, output=out, backend_factory=factory, tools_module=TOOLS_MODULE, concurrency=4)
        for i, _ in enumerate(first):
            if i == 6:
                break  # the driver stops (as if killed) after 7 results
        first.close()
        with out.open("ab") as fh:
            fh.write(b'{"id": "t19", "ok": tru')  # and its last write was torn
        rest = list(run_batch_ray(tasks, output=out, backend_factory=factory, tools_module=TOOLS_MODULE, concurrency=4))
        again = list(run_batch_ray(tasks, output=out, backend_factory=factory, tools_module=TOOLS_MODULE))
    ids = _ids(out)
    assert len(ids) == len(set(ids)) == n and set(ids) == {f"t{i}" for i in range(n)}
    assert len(rest) == n - 7 and again == []
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    for row in rows:
        k = int(row["id"][1:])
        assert row["ok"] and row["content"] == f"{k} + 1 = {k + 1}"


def test_conversations_share_a_few_actors_each_with_one_backend(tmp_path: Path, local_ray: None) -> None:
    built = tmp_path / "built"
    built.mkdir()
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("\n".join(task_lines(12)) + "\n", encoding="utf-8")
    transcripts = tmp_path / "runs"
    with FakeUpstream(make_script(latency=0.05)) as fake:
        base, where = fake.base_url, str(built)

        def factory() -> OpenAICompatBackend:  # pickled by value; runs in an actor
            import os
            import uuid

            open(os.path.join(where, f"{os.getpid()}-{uuid.uuid4().hex}"), "w").close()
            return OpenAICompatBackend(base, model="fake", api_key="sk-test")

        results = list(run_batch_ray(tasks, output=tmp_path / "out.jsonl", backend_factory=factory,
                                     tools_module=TOOLS_MODULE, concurrency=6, actors=2, transcripts_dir=transcripts))
    assert sorted(r.id for r in results) == sorted(f"t{i}" for i in range(12)) and all(r.ok for r in results)
    assert len(list(transcripts.glob("*.jsonl"))) == 12
    # one backend (one connection pool) per actor, in two worker processes, not one per conversation
    made = [name.split("-")[0] for name in os.listdir(built)]
    assert len(made) == 2 and len(set(made)) == 2


@pytest.mark.parametrize(
    ("settings", "message"),
    [({"concurrency": 0}, "concurrency must be at least 1"), ({"actors": 0}, "actors must be at least 1"),
     ({"num_cpus": 0}, "num_cpus must be a positive number")],
)
def test_bad_ray_settings_are_refused_before_ray_starts(tmp_path: Path, settings: dict[str, float], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        run_batch_ray([{"id": "t", "prompt": "x"}], output=tmp_path / "out.jsonl",
                      backend_factory=functools.partial(OpenAICompatBackend, "http://127.0.0.1:9/v1", model="m"),
                      **settings)  # type: ignore[arg-type]
    assert not (tmp_path / "out.jsonl").exists()
