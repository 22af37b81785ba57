"""The web console: its serving, sign-in link and assets (the browser journey is in tests/e2e)."""

from __future__ import annotations

import json
import re

import pytest
from fastapi.testclient import TestClient

from api.console import ASSETS, console_link

LANGUAGES = ("en", "zh")


def dictionary(lang: str) -> dict[str, str]:
    return json.loads((ASSETS / "i18n" / f"{lang}.json").read_text(encoding="utf-8"))


def scripts() -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(ASSETS.glob("*.js"))}


def test_console_link_carries_the_token_in_the_fragment_only() -> None:
    link = console_link("http://127.0.0.1:8000/", "aaa.bbb-c_d.eee")
    assert link == "http://127.0.0.1:8000/console/#token=aaa.bbb-c_d.eee"
    assert console_link("http://h", "a+b/c=") == "http://h/console/#token=a%2Bb%2Fc%3D"


def test_console_redirects_to_its_folder_and_serves_the_page_with_a_strict_policy(
    client: TestClient,
) -> None:
    moved = client.get("/console", follow_redirects=False)
    assert moved.status_code == 308 and moved.headers["location"] == "/console/"
    page = client.get("/console/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "script-src 'self'" in policy
    assert "frame-ancestors 'none'" in policy and "connect-src 'self'" in policy
    assert page.headers["referrer-policy"] == "no-referrer"
    assert '<script type="module" src="app.js">' in page.text


@pytest.mark.parametrize("name", sorted(p.name for p in ASSETS.glob("*.js")))
def test_every_module_is_served_as_javascript(client: TestClient, name: str) -> None:
    response = client.get(f"/console/{name}")
    assert response.status_code == 200
    assert "javascript" in response.headers["content-type"]
    assert response.headers["x-content-type-options"] == "nosniff"


def test_a_missing_asset_is_404_and_the_console_is_not_in_the_openapi(client: TestClient) -> None:
    assert client.get("/console/nope.js").status_code == 404
    assert not any(
        path.startswith("/console") for path in client.get("/openapi.json").json()["paths"]
    )


def test_assets_load_nothing_from_elsewhere() -> None:
    for path in ASSETS.rglob("*"):
        if path.is_file() and path.suffix in {".html", ".js", ".css"}:
            text = path.read_text(encoding="utf-8")
            assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}/", text, re.I), path.name
            assert "innerHTML" not in text and "insertAdjacentHTML" not in text, path.name


def test_both_languages_have_the_same_strings_and_every_literal_key_used_exists() -> None:
    en, zh = (dictionary(lang) for lang in LANGUAGES)
    assert set(en) == set(zh)
    for key in en:
        placeholders = [set(re.findall(r"\{\w+\}", text[key])) for text in (en, zh)]
        if key.endswith(".one"):  # "1 candidate" needs no {count}
            placeholders = [names - {"{count}"} for names in placeholders]
        assert placeholders[0] == placeholders[1], key
        assert en[key] and zh[key], key
    used = {
        key for source in scripts().values() for key in re.findall(r'\bt\(\s*"([\w.]+)"', source)
    }
    assert used and used <= set(en), used - set(en)
    counted = {
        key for source in scripts().values() for key in re.findall(r'\btn\(\s*"([\w.]+)"', source)
    }
    assert counted and {f"{key}.other" for key in counted} <= set(en)
    assert {f"{key}.one" for key in counted} <= set(en)


# ASCII punctuation in Chinese text, full-width punctuation in English (placeholders, `code` and
# the "HTTP 404" kind of literal aside).
HALF_WIDTH = re.compile(r"[,;:?!()]")
FULL_WIDTH = re.compile(r"[\uff0c\u3002\uff1b\uff1a\uff1f\uff01\uff08\uff09\u3001]")


def test_each_language_keeps_to_its_own_punctuation() -> None:
    en, zh = (dictionary(lang) for lang in LANGUAGES)
    for key, text in zh.items():
        prose = re.sub(r"\{\w+\}|`[^`]*`", "", text)
        assert not HALF_WIDTH.search(prose), (key, text)
    for key, text in en.items():
        assert not FULL_WIDTH.search(text), (key, text)


def test_every_change_of_a_version_has_its_own_wording() -> None:
    """A created revision must not read "edited by you": each change_type x changed_via pair of
    API_CONTRACT.md has a phrase, and no two read the same."""
    for lang in LANGUAGES:
        text = dictionary(lang)
        phrases = [
            text[f"history.change.{change}.{via}"]
            for change in ("create", "update", "replace", "restore")
            for via in ("user_api", "agent_tool", "candidate", "migration")
        ]
        assert len(set(phrases)) == len(phrases), lang
    assert dictionary("zh")["history.change.create.user_api"] == "由你创建"
