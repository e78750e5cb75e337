"""The report in a real browser: headless system Chromium (Debian's ``chromium``) driven by Playwright.

Nothing is skipped: without Chromium or Playwright the tests fail, saying what to
install (``make test`` installs both).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from agentfsm.report import write_report
from agentfsm.runtime.agent import Agent
from agentfsm.replays.compare import replay
from agentfsm.testing import ScriptedBackend
from agentfsm.testing.browser import chromium_page
from agentfsm.testing.sample_batch import write_sample_batch

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def batch_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("report")
    write_sample_batch(root / "batch", 40)
    out = root / "report.html"
    write_report([root / "batch"], out)
    return out


@pytest.fixture
def page() -> Iterator[Page]:
    with chromium_page() as page:
        yield page


def _open(page: Page, report: Path) -> list[str]:
    """Open the report; returns the list that collects script errors and non-file requests."""
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(f"script error: {exc}"))
    page.on("console", lambda msg: problems.append(f"console: {msg.text}") if msg.type == "error" else None)
    page.on("request", lambda req: None if req.url.startswith("file:") else problems.append(f"request: {req.url}"))
    page.goto(report.as_uri())
    page.wait_for_selector("body[data-ready=true]", timeout=10_000)
    return problems


def _rows(page: Page) -> list[str]:
    return page.locator("#runs tbody tr").evaluate_all("rows => rows.map(r => r.getAttribute('data-outcome'))")


def test_diagram_renders_filter_to_failed_open_one_and_read_its_correction(page: Page, batch_report: Path) -> None:
    problems = _open(page, batch_report)
    # the diagram: five states, drawn with a real size, edges labelled with counts
    assert page.locator("#diagram .node").count() == 5
    box = page.locator("#diagram").bounding_box()
    assert box is not None and box["width"] > 600 and box["height"] > 300
    assert page.locator("#diagram .edge.taken").count() >= 5
    assert page.locator("#diagram .edge.unused").count() >= 1
    assert "emit ×" in page.locator("#diagram").text_content()  # type: ignore[operator]
    assert len(_rows(page)) == 40
    # filter to the failed runs
    page.select_option("#filter-outcome", "failed")
    outcomes = _rows(page)
    assert outcomes == ["failed"] * 5
    assert page.text_content("#shown") == "5 of 40 runs"
    # open one: its timeline shows the correction and its reason
    page.locator("#runs tbody tr").first.click()
    page.wait_for_selector("#run-detail:not([hidden])")
    retry = page.locator("#timeline li.retry").first
    assert retry.is_visible()
    assert retry.locator(".reason-code").text_content() == "refusal"
    assert "You do have tools" in (retry.text_content() or "")
    assert page.locator("#timeline li.guard.correct .reason-code").first.text_content() == "refusal"
    assert page.locator("#timeline li.error").text_content().count("RetryBudgetExceeded") == 1  # type: ignore[union-attr]
    assert problems == []


def test_filter_by_guard_reason_sort_and_edge(page: Page, batch_report: Path) -> None:
    problems = _open(page, batch_report)
    page.select_option("#filter-reason", "schema_mismatch")
    assert len(_rows(page)) == 5
    page.select_option("#filter-reason", "")
    # sort by corrections: the largest first
    page.click("#runs th[data-key=corrections]")
    first = page.locator("#runs tbody tr").first.locator("td").nth(5).text_content()
    assert first == "3"
    # an edge of the diagram lists the runs that took it: the loop of corrections
    page.locator('#diagram .edge[data-edge="first-decision|first-decision|correct"]').click()
    assert page.locator("#filter-edge").is_visible()
    assert len(_rows(page)) == 15  # corrected, failed and exhausted runs: 5 each
    page.locator("#filter-edge button").click()
    assert len(_rows(page)) == 40
    # the failure summary's links open a run
    page.locator("#failures .group[data-reason=RetryBudgetExceeded] .links a").first.click()
    page.wait_for_selector("#run-detail:not([hidden])")
    assert "task-" in (page.text_content("#run-title") or "")
    assert problems == []


def test_a_replay_divergence_is_highlighted(tmp_path: Path) -> None:
    def add(a: float, b: float) -> float:
        """Add two numbers."""
        return a + b

    transcript = tmp_path / "run.jsonl"
    call = '```json action\n{"tool": "add", "args": {"a": 1, "b": 2}}\n```'
    Agent(ScriptedBackend([call, "It is 3."]), [add], transcript=transcript).run("Add 1 and 2")
    lines = [json.loads(line) for line in transcript.read_text().splitlines()]
    final = next(e for e in lines if e["type"] == "final")
    final["content"] = "It is 4."
    transcript.write_text("".join(json.dumps(e) + "\n" for e in lines))
    replayed = tmp_path / "replay.jsonl"
    replayed.write_text(replay(transcript).model_dump_json() + "\n")
    out = tmp_path / "report.html"
    write_report([replayed], out)
    with chromium_page() as page:  # after the runs: Playwright's sync API holds the thread's event loop
        problems = _open(page, out)
        assert page.locator("#runs tbody .badge.diverged").count() == 1
        page.locator("#runs tbody tr").first.click()
        diverged = page.locator("#timeline li.diverged")
        assert diverged.count() == 1 and "It is 4." in (diverged.text_content() or "")
        assert "It is 3." in (diverged.locator(".divergence").text_content() or "")
        assert problems == []
