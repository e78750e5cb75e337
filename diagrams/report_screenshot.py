"""Regenerate diagrams/report.png (run by `make diagrams`): the report of a 40-run sample batch
(agentfsm.testing.sample_batch) in headless Chromium, filtered to the failed runs, one opened."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from agentfsm.report import write_report
from agentfsm.testing.browser import chromium_page
from agentfsm.testing.sample_batch import write_sample_batch

OUT = Path(__file__).resolve().parent / "report.png"


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_sample_batch(root / "batch", 40)
        html = root / "report.html"
        write_report([root / "batch"], html)
        with chromium_page(width=1280, height=1000) as page:
            page.goto(html.as_uri())
            page.wait_for_selector("body[data-ready=true]")
            page.select_option("#filter-outcome", "failed")
            page.locator("#runs tbody tr").first.click()
            page.wait_for_selector("#run-detail:not([hidden])")
            page.evaluate("window.scrollTo(0, 0)")
            height = page.evaluate("document.body.scrollHeight")
            page.screenshot(path=str(OUT), full_page=True, clip={"x": 0, "y": 0, "width": 1280, "height": min(height, 2400)})
    print(f"wrote {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
