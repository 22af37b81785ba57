"""Screenshots of the web console's main screens, for docs/console.md.

Starts the app in-process (uvicorn on a free loopback port) over a throwaway schema `bench_<hex>`
(dropped at the end), seeds two users through the public API (an English one, a Chinese one),
and drives Debian's /usr/bin/chromium with Playwright, exactly as the browser tests do:

    PYTHONPATH=$PWD .venv/bin/python scripts/console_screenshots.py [--out docs/screenshots]

Without --database-url: MEMLEDGER_DATABASE_URL, else an embedded server in .memledger/.
The Chinese screenshot needs a CJK font (Debian: fonts-noto-cjk).
"""

from __future__ import annotations

import argparse
import os
import pathlib
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

SCREENS = (
    "list",
    "detail-history",
    "edit-conflict",
    "forget-confirm",
    "candidates",
    "settings",
    "list-zh",
)
VIEWPORT = {"width": 1200, "height": 760}

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
PROPOSALS = [
    ("pace", "Prefers 20-minute lessons with a short quiz at the end", "preference"),
    ("timezone", "Lives in Berlin (CET)", "background"),
    ("nickname", "Likes to be called Sam", "fact"),
]


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
    page.wait_for_timeout(150)  # let the status region and focus settle
    path = out / f"{name}.png"
    page.screenshot(path=str(path), full_page=full)
    print(f"{path} {path.stat().st_size // 1024} KiB")


def english_screens(browser: Any, url: str, secret: str, out: pathlib.Path) -> None:
    sam = User(url, secret, "sam")
    ids = sam.remember(ENGLISH)
    sam.patch(ids["explanation_style"], 1, "Examples first, please")
    sam.patch(ids["explanation_style"], 2, "Worked examples first, then the definition")
    for key, content, category in PROPOSALS:
        body = {"memory_key": key, "content": content, "category": category, "scope_type": "global"}
        sam.agent.post("/tools/propose_core_memory", json=body).raise_for_status()

    context = browser.new_context(locale="en-GB", viewport=VIEWPORT)
    page = context.new_page()
    page.goto(console_link(url, sam.token))
    page.wait_for_selector("table.memories")
    shoot(page, out, "list")

    page.get_by_role("button", name="Open explanation_style", exact=True).click()
    page.wait_for_selector("ol.versions")
    shoot(page, out, "detail-history", full=True)

    page.get_by_role("button", name="Edit", exact=True).click()
    page.get_by_label("Content").fill("Worked examples first; skip the proofs")
    sam.patch(ids["explanation_style"], 3, "Examples first, and a summary at the end")
    page.get_by_role("button", name="Save changes").click()
    page.wait_for_selector("section.conflict")
    page.locator("section.conflict").scroll_into_view_if_needed()
    shoot(page, out, "edit-conflict", full=True)
    page.get_by_role("button", name="Discard my edit").click()

    page.get_by_role("button", name="Forget…").click()
    page.wait_for_selector("dialog[open]")
    shoot(page, out, "forget-confirm")
    page.keyboard.press("Escape")

    page.get_by_role("button", name="Candidates", exact=True).click()
    page.wait_for_selector("li.candidate")
    shoot(page, out, "candidates", full=True)

    page.get_by_role("button", name="Settings", exact=True).click()
    page.wait_for_selector("form fieldset")
    shoot(page, out, "settings")
    context.close()


def chinese_screens(browser: Any, url: str, secret: str, out: pathlib.Path) -> None:
    li = User(url, secret, "li")
    li.remember(CHINESE)
    context = browser.new_context(locale="zh-CN", viewport=VIEWPORT)
    page = context.new_page()
    page.goto(console_link(url, li.token))
    page.wait_for_selector("table.memories")
    shoot(page, out, "list-zh")
    context.close()


def optimise(out: pathlib.Path) -> None:
    """Shrink the PNGs losslessly when optipng is installed."""
    if shutil.which("optipng"):
        pngs = [str(out / f"{name}.png") for name in SCREENS]
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
            english_screens(browser, url, secret, args.out)
            chinese_screens(browser, url, secret, args.out)
        finally:
            browser.close()
    optimise(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
