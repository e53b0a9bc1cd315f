"""One Playwright and one headless Chromium for every browser test of the session.

Playwright's sync API runs its own event loop: a second ``sync_playwright()`` while
another is open (two module-scoped fixtures, or two test modules in one run) fails
with "using Playwright Sync API inside the asyncio loop"."""
from __future__ import annotations

import pytest

from _lab import CHROMIUM, CHROMIUM_ARGS, missing


@pytest.fixture(scope="session")
def chromium():
    why = missing()
    if why:
        pytest.skip(f"browser test skipped: {why}")
    from playwright.sync_api import sync_playwright
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
