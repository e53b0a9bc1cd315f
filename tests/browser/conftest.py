"""One Playwright and one headless Chromium per browser test module.

Playwright's sync API runs its own event loop: a second ``sync_playwright()`` while
another is open (two module-scoped fixtures of one module) fails with "using
Playwright Sync API inside the asyncio loop". And while one is open, the main thread
has a running asyncio loop, which other tests must not see (widgets schedule their
redraws on a running loop): so it closes with its module, not the session."""
from __future__ import annotations

import pytest

from _lab import CHROMIUM, CHROMIUM_ARGS, missing


@pytest.fixture(scope="module")
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
