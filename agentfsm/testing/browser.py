"""A headless system Chromium driven by Playwright, for checking pages such as ``agentfsm report``'s.

Playwright for Python (the ``test`` extra) drives the Chromium of the machine
(Debian: ``apt-get install chromium``, at ``/usr/bin/chromium``); nothing is
downloaded: ``playwright install`` is never needed. Each use starts the browser
with a fresh user-data directory and no network of its own (no sync, updates,
QUIC or background requests)::

    with chromium_page() as page:
        page.goto(report.as_uri())

When Playwright or Chromium is missing, :class:`BrowserMissing` says what to install.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from agentfsm.core.errors import UsageError

if TYPE_CHECKING:
    from playwright.sync_api import Page

__all__ = ["CHROMIUM", "CHROMIUM_ARGS", "BrowserMissing", "chromium_page", "find_chromium"]

#: where Debian's ``chromium`` package puts the browser
CHROMIUM = "/usr/bin/chromium"
#: headless, sandbox-free (containers run as root), and quiet on the network
CHROMIUM_ARGS: tuple[str, ...] = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


class BrowserMissing(UsageError):
    """Playwright or a system Chromium is not installed; the message says how to install it."""


def find_chromium() -> str:
    """The Chromium to drive: ``$AGENTFSM_CHROMIUM``, else :data:`CHROMIUM`."""
    path = os.environ.get("AGENTFSM_CHROMIUM", CHROMIUM)
    if not (Path(path).is_file() and os.access(path, os.X_OK)):
        found = shutil.which("chromium")
        hint = f" (one is on PATH at {found}: set AGENTFSM_CHROMIUM={found})" if found else ""
        raise BrowserMissing(
            f"no Chromium at {path}{hint}: install Debian's package (apt-get install -y chromium "
            "chromium-driver; `make test` does it) or point AGENTFSM_CHROMIUM at a Chromium binary"
        )
    return path


@contextmanager
def chromium_page(width: int = 1280, height: int = 900) -> Iterator[Page]:
    """A page of a freshly started headless Chromium, closed (with its profile) on exit."""
    executable = find_chromium()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        raise BrowserMissing("Playwright is not installed: pip install 'agentfsm[test]' (or playwright)") from exc
    with tempfile.TemporaryDirectory(prefix="agentfsm-chromium-") as profile, sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            profile,
            executable_path=executable,
            headless=True,
            args=list(CHROMIUM_ARGS),
            viewport={"width": width, "height": height},
        )
        try:
            yield context.pages[0] if context.pages else context.new_page()
        finally:
            context.close()
