"""/docs and /redoc render in headless Chromium with nothing fetched from another origin.

Skipped without /usr/bin/chromium, except in CI (`CI` set), where a missing browser fails.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from playwright.sync_api import Browser

from tests.e2e.console_harness import chromium_available

if not chromium_available() and not os.environ.get("CI"):
    pytest.skip("no /usr/bin/chromium (apt-get install chromium)", allow_module_level=True)

pytestmark = pytest.mark.integration


def visit(browser: Browser, base_url: str, path: str, ready: str) -> tuple[Any, list[str]]:
    """Open the page, wait for the `ready` selector; the URLs of every request that reached
    the network bound for another origin (each is aborted, so nothing leaves the machine)."""
    page = browser.new_page()
    local = (base_url + "/", f"blob:{base_url}/", "data:")
    left: list[str] = []

    def outside(route: Any) -> None:
        left.append(route.request.url)
        route.abort()

    page.route(lambda url: not url.startswith(local), outside)
    page.goto(base_url + path)
    page.wait_for_selector(ready, timeout=20_000)
    page.wait_for_load_state("networkidle")
    return page, left


def test_swagger_ui_renders_offline_and_can_authorise(browser: Browser, base_url: str) -> None:
    page, left = visit(browser, base_url, "/docs", ".opblock")
    assert page.locator("#operations-memories-createMemory").count() == 1  # operationId
    assert page.locator("button.authorize").count() == 1  # the bearer scheme
    page.locator("button.authorize").click()
    assert page.locator(".auth-container input").count() >= 1
    assert not left, left
    page.close()


def test_redoc_renders_offline(browser: Browser, base_url: str) -> None:
    page, left = visit(browser, base_url, "/redoc", "[data-section-id]")
    assert page.locator("[data-section-id='operation/createMemory']").count() == 1
    assert not left, left  # ReDoc's vendor logo is refused by the page's policy, unsent
    page.close()
