"""Headless Chromium from Debian's ``chromium`` package, driven by Playwright (never a browser
download). Missing chromium skips the browser tests locally and fails them on CI (CI=true)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, Page, sync_playwright

CHROMIUM = os.environ.get("LEDGER_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Where screenshots go (a person looks at them; never committed). Default: the test's tmp dir.
SCREENSHOTS_ENV = "LEDGER_VIEWER_SCREENSHOTS"


def require_chromium() -> str:
    if Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK):
        return CHROMIUM
    message = (
        f"headless Chromium not found at {CHROMIUM}: install Debian's packages "
        "(apt-get install -y chromium) or set LEDGER_TEST_CHROMIUM"
    )
    if os.environ.get("CI") == "true":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@contextmanager
def launched(user_data_dir: Path) -> Iterator[BrowserContext]:
    """A persistent context on a fresh profile dir (the brief's flags), 1280 x 800."""
    executable = require_chromium()
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(user_data_dir),
            executable_path=executable,
            args=CHROMIUM_ARGS,
            headless=True,
            viewport={"width": 1280, "height": 800},
        )
        try:
            yield context
        finally:
            context.close()


def screenshots_dir(fallback: Path) -> Path:
    chosen = os.environ.get(SCREENSHOTS_ENV)
    path = Path(chosen) if chosen else fallback
    path.mkdir(parents=True, exist_ok=True)
    return path


def watched(page: Page) -> list[str]:
    """The page's script errors and console errors, as they happen (a CSP violation is one)."""
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    return errors


def follow(page: Page, selector: str) -> None:
    """Click a link or a submit button and wait until the page it leads to has loaded: a click
    returns once the navigation is committed, before the new page's rows are parsed."""
    with page.expect_navigation(wait_until="load"):
        page.click(selector)


def rollout_ids(page: Page) -> list[str]:
    """The overview's rollout rows, in the order shown."""
    found = page.locator("#rollouts tbody tr[data-rollout]").evaluate_all(
        "rows => rows.map(r => r.dataset.rollout)"
    )
    return [str(rollout_id) for rollout_id in found]
