"""Fixtures of the browser tests: one headless Chromium per module, the app on a real port."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from api.app import create_app
from api.services import Services
from tests.e2e.console_harness import launch_chromium, serving


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """Debian's Chromium, headless (the modules skip themselves when it is missing)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = launch_chromium(playwright)
        yield chromium
        chromium.close()


@pytest.fixture
def base_url(services: Services) -> Iterator[str]:
    """The app over this test's services, served by uvicorn on a free loopback port."""
    with serving(create_app(services)) as url:
        yield url
