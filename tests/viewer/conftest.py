"""The browser tests' shared fixtures: one Chromium per test module, a page per test that
fails the test on any script or console error, and where screenshots go (tests/viewer/browser.py).
Playwright is imported only when a browser test asks for these."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import BrowserContext, Page


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.viewer.browser import screenshots_dir

    path = screenshots_dir(tmp_path_factory.mktemp("screenshots"))
    print(f"viewer screenshots: {path}")
    return path


@pytest.fixture(scope="module")
def context(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserContext]:
    from tests.viewer.browser import launched

    with launched(tmp_path_factory.mktemp("chromium-profile")) as opened:
        yield opened


@pytest.fixture
def page(context: BrowserContext) -> Iterator[Page]:
    from tests.viewer.browser import watched

    opened = context.new_page()
    errors = watched(opened)
    yield opened
    opened.close()
    assert errors == []  # a CSP violation or a script error shows up here
