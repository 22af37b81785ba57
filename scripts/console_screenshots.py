"""Screenshots of the web console's main screens, for docs/console.md.

Starts the app in-process (uvicorn on a free loopback port) over a throwaway schema `bench_<hex>`
(dropped at the end), seeds two users through the public API (an English one, a Chinese one),
and drives Debian's /usr/bin/chromium with Playwright, exactly as the browser tests do, at 1280 and
390 px in English and Chinese (`<screen>-<lang>-<width>.png`), measuring each screen's layout as
the tests do before saving it:

    PYTHONPATH=$PWD .venv/bin/python scripts/console_screenshots.py [--out docs/screenshots]

Without --database-url: MEMLEDGER_DATABASE_URL, else an embedded server in .memledger/.
The Chinese screenshots need a CJK font (Debian: fonts-noto-cjk).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx2
from _schemas import drop_schema, new_schema
from playwright.sync_api import Page, sync_playwright

from api.app import create_app
from api.bootstrap import build_ledger, build_services, build_worker, resolve_database_url
from api.console import console_link
from api.settings import Settings
from api.tokens import mint_token
from domain.ledger.keyring import generate_master_key
from tests.e2e.console_harness import launch_chromium, serving
from tests.e2e.console_pages import LAYOUT_PROBLEMS

WIDTHS = (1280, 390)
LANGS = ("en", "zh")
# (name, languages, widths): the journey's screens at both widths in both languages, the rest once.
SCREENS = (
    ("list", LANGS, WIDTHS),
    ("search", LANGS, WIDTHS),
    ("memory", LANGS, WIDTHS),
    ("history", LANGS, WIDTHS),
    ("candidates", LANGS, WIDTHS),
    ("forget-confirm", ("en",), WIDTHS),
    ("edit-conflict", ("en",), (1280,)),
    ("settings", ("zh",), (390,)),
)
HEIGHT = {1280: 800, 390: 844}
LOCALES = {"en": "en-GB", "zh": "zh-CN"}

ENGLISH = [
    ("explanation_style", "Worked examples first, then the definition", "preference", "learning"),
    ("answer_language", "Answer in English; keep code comments in English too", "preference", None),
    ("thesis_deadline", "Thesis draft due 30 June", "goal", "research"),
    ("allergies", "Allergic to peanuts", "constraint", None),
    ("class_size", "Teaches a class of 24 first-year students", "background", "teaching"),
    ("editor", "Uses Neovim with a dark theme", "fact", None),
]
CHINESE = [
    ("explanation_style", "我更喜欢先看例子再看定义。", "preference", "learning"),
    ("answer_language", "请用简体中文回答，代码注释用英文。", "preference", None),  # noqa: RUF001
    ("study_goal", "今年通过 N2 日语考试。", "goal", "learning"),
    ("schedule", "工作日晚上八点以后才有空。", "constraint", None),
    ("research_topic", "研究方向是检索增强生成的评测。", "background", "research"),
]
PROPOSALS = {
    "en": [
        ("explanation_style", "Definitions first, then one short example", "preference"),
        ("timezone", "Lives in Berlin (CET)", "background"),
    ],
    "zh": [
        ("explanation_style", "先看定义，再看一个简短的例子。", "preference"),  # noqa: RUF001
        ("timezone", "住在上海，使用北京时间。", "background"),  # noqa: RUF001
    ],
}
SEARCHES = {"en": "peanuts", "zh": "日语考试"}
CONVERSATION = "conv-2026-12-03-tutoring"


class User:
    """One user's management and agent clients on the running server."""

    def __init__(self, url: str, secret: str, user: str) -> None:
        self.token = mint_token(secret, user)
        self.me = _client(url, self.token)
        self.agent = _client(url, mint_token(secret, user, workspace="learning"))

    def remember(self, rows: list[tuple[str, str, str, str | None]]) -> dict[str, str]:
        ids = {}
        for key, content, category, workspace in rows:
            scope = {"scope_type": "workspace", "workspace_type": workspace} if workspace else {}
            body = {"memory_key": key, "content": content, "category": category}
            answer = self.me.post(
                "/me/core-memories", json=body | (scope or {"scope_type": "global"})
            )
            answer.raise_for_status()
            ids[key] = answer.json()["memory_id"]
        return ids

    def patch(self, memory_id: str, revision: int, content: str) -> None:
        body = {"expected_revision": revision, "content": content}
        self.me.patch(f"/me/core-memories/{memory_id}", json=body).raise_for_status()


def _client(url: str, token: str) -> httpx2.Client:
    return httpx2.Client(
        base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=20, trust_env=False
    )


@contextmanager
def app_server(database_url: str) -> Iterator[tuple[str, str]]:
    """The app over a throwaway schema; yields (base URL, JWT secret); drops the schema after."""
    secret = secrets.token_urlsafe(32)
    settings = Settings(
        database_url=database_url,
        db_schema=new_schema(),
        master_key=generate_master_key(),
        jwt_secret=secret,
    )
    ledger = build_ledger(settings, database_url)
    worker = build_worker(settings, ledger, database_url)
    try:
        worker.start()
        with serving(create_app(build_services(settings, ledger, worker))) as url:
            yield url, secret
    finally:
        worker.stop()
        worker.pool.close()
        ledger.close()
        drop_schema(database_url, settings.db_schema)


def shoot(page: Page, out: pathlib.Path, name: str, full: bool = False) -> None:
    """Save the screen, after measuring it as the browser tests do (fails on a broken layout)."""
    page.wait_for_timeout(150)  # let the status region and focus settle
    problems = page.evaluate(LAYOUT_PROBLEMS)
    if problems:
        raise SystemExit(f"{name}: broken layout: {problems}")
    path = out / f"{name}.png"
    page.screenshot(path=str(path), full_page=full)
    print(f"{path} {path.stat().st_size // 1024} KiB, layout measured: no problems")


def wanted(screen: str, lang: str, width: int) -> bool:
    return any(s == screen and lang in langs and width in widths for s, langs, widths in SCREENS)


def screens(browser: Any, url: str, secret: str, out: pathlib.Path, lang: str, width: int) -> None:
    """One user's console (a fresh one per language and width), screen by screen, by URL."""
    user = User(url, secret, f"{lang}-{width}")
    ids = user.remember(ENGLISH if lang == "en" else CHINESE)
    first = (ENGLISH if lang == "en" else CHINESE)[0][1]
    user.patch(
        ids["explanation_style"],
        1,
        "Examples first, please" if lang == "en" else "请先给我看例子。",
    )
    user.patch(ids["explanation_style"], 2, first)
    for key, content, category in PROPOSALS[lang]:
        # explanation_style is a learning memory: proposing it there makes a replacement
        scope = "workspace" if key == "explanation_style" else "global"
        body = {"memory_key": key, "content": content, "category": category, "scope_type": scope}
        body["source_conversation_id"] = CONVERSATION
        user.agent.post("/tools/propose_core_memory", json=body).raise_for_status()

    context = browser.new_context(
        locale=LOCALES[lang], viewport={"width": width, "height": HEIGHT[width]}
    )
    context.add_init_script(f"localStorage.setItem('memledger.console.lang', '{lang}')")
    page = context.new_page()
    suffix = f"{lang}-{width}"
    console = f"{url}/console/"
    page.goto(console_link(url, user.token))
    page.wait_for_selector("table.memories")
    if wanted("list", lang, width):
        shoot(page, out, f"list-{suffix}")
    page.locator("input[type=search]").fill(SEARCHES[lang])
    page.locator("form[role=search] button[type=submit]").click()
    page.wait_for_url(re.compile(r"q="))
    page.wait_for_selector("table.memories, #memories-empty")
    if wanted("search", lang, width):
        shoot(page, out, f"search-{suffix}")

    memory = f"{console}#/memories/{ids['explanation_style']}"
    page.goto(memory)
    page.wait_for_selector("dl.facts")
    if wanted("memory", lang, width):
        shoot(page, out, f"memory-{suffix}", full=True)
    page.goto(f"{memory}/history")
    page.wait_for_selector("ol.versions")
    if wanted("history", lang, width):
        shoot(page, out, f"history-{suffix}", full=True)
    page.goto(f"{console}#/candidates")
    page.wait_for_selector("li.candidate .version-box.current")
    if wanted("candidates", lang, width):
        shoot(page, out, f"candidates-{suffix}", full=True)

    page.goto(memory)
    page.wait_for_selector("dl.facts")
    if wanted("edit-conflict", lang, width):
        page.locator('[data-focus-key="edit"]').click()
        page.locator("#edit-content").fill("Worked examples first; skip the proofs")
        user.patch(ids["explanation_style"], 3, "Examples first, and a summary at the end")
        page.locator('[data-focus-key="save"]').click()
        page.wait_for_selector("section.conflict")
        shoot(page, out, f"edit-conflict-{suffix}", full=True)
        page.locator('[data-focus-key="discard"]').click()
    if wanted("forget-confirm", lang, width):
        page.locator('[data-focus-key="forget"]').click()
        page.wait_for_selector("dialog[open]")
        shoot(page, out, f"forget-confirm-{suffix}")
        page.keyboard.press("Escape")
    if wanted("settings", lang, width):
        page.goto(f"{console}#/settings")
        page.wait_for_selector("form fieldset")
        shoot(page, out, f"settings-{suffix}")
    context.close()


def optimise(out: pathlib.Path) -> None:
    """Shrink the PNGs losslessly when optipng is installed."""
    if shutil.which("optipng"):
        pngs = [str(path) for path in out.glob("*.png")]
        subprocess.run(["optipng", "-quiet", "-o2", *pngs], check=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("docs/screenshots"))
    parser.add_argument("--database-url", default=os.environ.get("MEMLEDGER_DATABASE_URL"))
    args = parser.parse_args(argv)
    database_url = args.database_url or resolve_database_url(Settings())
    args.out.mkdir(parents=True, exist_ok=True)
    with app_server(database_url) as (url, secret), sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            for lang in LANGS:
                for width in WIDTHS:
                    screens(browser, url, secret, args.out, lang, width)
        finally:
            browser.close()
    optimise(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
