"""What the console's browser tests share: the UI's strings, one user's page beside the API, and
the layout measurement (boxes measured in the page itself).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx2
from playwright.sync_api import Browser, Page

from api.console import ASSETS
from api.tokens import mint_token
from tests.conftest import JWT_SECRET

LOCALES = {"en": "en-US", "zh": "zh-CN"}
UNLABELLED = """() => [...document.querySelectorAll('input, select, textarea, button')]
    .filter((el) => el.getClientRects().length > 0)
    .filter((el) => !(el.labels && el.labels.length) && !el.getAttribute('aria-label')
        && !(el.tagName === 'BUTTON' && el.textContent.trim()))
    .map((el) => el.outerHTML.slice(0, 120))"""

# Every visible box and every line of text, measured in the page (layout_problems.js).
LAYOUT_PROBLEMS = (Path(__file__).with_name("layout_problems.js")).read_text(encoding="utf-8")


def dictionary(lang: str) -> dict[str, str]:
    return json.loads((ASSETS / "i18n" / f"{lang}.json").read_text(encoding="utf-8"))


class Text:
    """The UI's strings in one language: text("memories.count", loaded=2); counted ones through
    text.n("candidates.count", 1) (English plural rules; Chinese has one form)."""

    def __init__(self, lang: str) -> None:
        self.lang = lang
        self.strings = dictionary(lang)

    def __call__(self, name: str, /, **params: Any) -> str:
        return re.sub(r"\{(\w+)\}", lambda m: str(params[m.group(1)]), self.strings[name])

    def n(self, name: str, count: int, /, **params: Any) -> str:
        form = "one" if count == 1 and self.lang == "en" else "other"
        return self(f"{name}.{form}", count=count, **params)


class Journey:
    """One browser page on the console, the API beside it, and what the page did wrong."""

    def __init__(
        self,
        browser: Browser,
        base_url: str,
        lang: str,
        user: str,
        width: int = 1200,
        height: int = 900,
    ) -> None:
        self.base_url = base_url
        self.t = Text(lang)
        self.token = mint_token(JWT_SECRET, user)
        self.api = _client(base_url, self.token)
        self.agent = _client(base_url, mint_token(JWT_SECRET, user, workspace="learning"))
        self.context = browser.new_context(
            locale=LOCALES[lang], viewport={"width": width, "height": height}
        )
        self.page: Page = self.context.new_page()
        self.problems: list[str] = []
        self.page.on("pageerror", lambda error: self.problems.append(f"page error: {error}"))
        self.page.on(
            "console",
            lambda m: (
                self.problems.append(f"console {m.type}: {m.text}")
                if m.type == "error" and "Failed to load resource" not in m.text
                else None
            ),
        )
        self.page.on(
            "request",
            lambda r: (
                None
                if r.url.startswith(base_url) or r.url.startswith("data:")
                else self.problems.append(f"off-origin request: {r.url}")
            ),
        )

    def close(self) -> None:
        self.context.close()
        self.api.close()
        self.agent.close()

    def status(self) -> Any:
        return self.page.locator("#status")

    def button(self, name: str, /, **params: Any) -> Any:
        return self.page.get_by_role("button", name=self.t(name, **params), exact=True)

    def link(self, name: str, /, **params: Any) -> Any:
        return self.page.get_by_role("link", name=self.t(name, **params), exact=True)

    def assert_labelled(self) -> None:
        """Every visible control has an accessible name (a label, aria-label or its own text)."""
        assert self.page.evaluate(UNLABELLED) == []

    def layout_problems(self) -> list[str]:
        return list(self.page.evaluate(LAYOUT_PROBLEMS))

    def focused(self, attribute: str = "data-focus-key") -> str | None:
        return self.page.evaluate(
            f"document.activeElement && document.activeElement.getAttribute({attribute!r})"
        )


def _client(base_url: str, token: str) -> Any:
    return httpx2.Client(
        base_url=base_url,
        headers={"Authorization": f"Bearer {token}"},
        timeout=60.0,
        trust_env=False,
    )
