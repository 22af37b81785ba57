"""The web console in headless Chromium against a real server: the user's whole journey, in both
languages, checking the page (text, state, focus) after every step.

Runs wherever /usr/bin/chromium exists; skipped without it, except in CI (`CI` set), where a
missing browser is a failure (.ci/run installs it).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator

import pytest
from playwright.sync_api import Browser, expect

from api.console import console_link
from tests.e2e.console_harness import chromium_available
from tests.e2e.console_pages import Journey, Text

if not chromium_available() and not os.environ.get("CI"):
    pytest.skip("no /usr/bin/chromium (apt-get install chromium)", allow_module_level=True)

pytestmark = pytest.mark.integration

LANGS = ["en", "zh"]


@pytest.fixture
def journey(browser: Browser, base_url: str) -> Iterator[Callable[..., Journey]]:
    made: list[Journey] = []

    def make(lang: str, user: str = "alice") -> Journey:
        made.append(Journey(browser, base_url, lang, user))
        return made[-1]

    yield make
    for j in made:
        j.close()


def seed(j: Journey) -> None:
    research = {"scope_type": "workspace", "workspace_type": "research"}
    for key, content, scope in [
        ("tea", "Green tea, no sugar", {"scope_type": "global"}),
        ("deadline", "Thesis due in June", research),
    ]:
        body = {"memory_key": key, "content": content, "category": "preference"} | scope
        assert j.api.post("/me/core-memories", json=body).status_code == 201


@pytest.mark.parametrize("lang", LANGS)
def test_full_journey(journey: Callable[..., Journey], lang: str) -> None:
    j = journey(lang)
    t, page = j.t, j.page
    seed(j)

    # Sign in: English through the dev link (token in the fragment), Chinese by pasting it.
    if lang == "en":
        page.goto(console_link(j.base_url, j.token))
    else:
        page.goto(f"{j.base_url}/console/")
        expect(page.get_by_role("heading", name=t("signin.title"))).to_be_visible()
        page.get_by_label(t("signin.token")).fill(j.token)
        j.button("signin.submit").click()
    expect(page.get_by_role("heading", name=t("memories.heading"), level=2)).to_be_focused()
    expect(page.get_by_text(t("account.signed_in_as", user="alice"))).to_be_visible()
    assert "#token" not in page.url
    assert page.evaluate("sessionStorage.getItem('memledger.console.token')") == j.token
    assert page.evaluate("document.documentElement.lang").startswith(lang)
    expect(page.locator("#memory-count")).to_have_text(t("memories.count", loaded=2))
    j.assert_labelled()

    # Create a workspace memory through the dialog; focus lands on its row.
    j.button("memories.new").click()
    dialog = page.get_by_role("dialog", name=t("create.title"))
    expect(dialog).to_be_visible()
    expect(dialog.get_by_label(t("field.key"))).to_be_focused()
    j.assert_labelled()
    dialog.get_by_label(t("field.key")).fill("explanation_style")
    dialog.get_by_label(t("field.content")).fill("Examples before definitions")
    dialog.get_by_label(t("field.category")).select_option("preference")
    expect(dialog.get_by_label(t("field.workspace"))).to_be_disabled()
    dialog.get_by_label(t("field.scope")).select_option("workspace")
    dialog.get_by_label(t("field.workspace")).select_option("learning")
    dialog.get_by_role("button", name=t("create.submit")).click()
    expect(dialog).to_be_hidden()
    expect(j.status()).to_have_text(t("create.done", key="explanation_style"))
    expect(page.locator("#memory-count")).to_have_text(t("memories.count", loaded=3))
    open_new = j.link("memories.open_named", key="explanation_style")
    expect(open_new).to_be_focused()
    memory_id = j.focused()[len("open-") :]  # type: ignore[index]

    # Filter on the server: the filters go into the URL.
    page.get_by_label(t("filter.scope_type")).select_option("workspace")
    page.get_by_label(t("filter.workspace_type")).select_option("learning")
    j.button("filter.apply").click()
    expect(page.locator("tbody tr")).to_have_count(1)
    expect(j.status()).to_have_text(t("memories.count", loaded=1))
    assert page.url.endswith("#/memories?scope_type=workspace&workspace_type=learning")
    page.get_by_label(t("filter.scope_type")).select_option("")
    page.get_by_label(t("filter.workspace_type")).select_option("")
    j.button("filter.apply").click()
    expect(page.locator("tbody tr")).to_have_count(3)

    # Open it: its own URL.
    j.link("memories.open_named", key="explanation_style").click()
    expect(page.get_by_role("heading", name="explanation_style", level=2)).to_be_focused()
    assert page.url.endswith(f"#/memories/{memory_id}")
    j.assert_labelled()

    # Edit while the memory changes behind the page's back: 409, shown, then reapplied.
    j.button("detail.edit").click()
    content = page.get_by_label(t("field.content"))
    expect(content).to_be_focused()
    content.fill("Worked examples first, then the definition")
    behind = j.api.patch(
        f"/me/core-memories/{memory_id}",
        json={"expected_revision": 1, "content": "Changed elsewhere meanwhile"},
    )
    assert behind.status_code == 200 and behind.json()["revision"] == 2
    j.button("edit.save").click()
    conflict = page.get_by_role("region", name=t("conflict.heading"))
    expect(conflict).to_be_visible()
    expect(page.get_by_role("heading", name=t("conflict.heading"))).to_be_focused()
    expect(conflict).to_contain_text(t("conflict.current", revision=2))
    expect(conflict).to_contain_text("Changed elsewhere meanwhile")
    expect(conflict).to_contain_text("Worked examples first, then the definition")
    j.assert_labelled()
    j.button("conflict.reapply").click()
    expect(j.status()).to_have_text(t("edit.saved", revision=3))
    expect(conflict).to_be_hidden()
    facts = page.locator("dl.facts")
    expect(facts).to_contain_text("Worked examples first, then the definition")
    expect(j.button("detail.edit")).to_be_focused()
    assert j.api.get(f"/me/core-memories/{memory_id}").json()["revision"] == 3

    # Suppress, then restore: the badge, the button and the API agree; focus stays put.
    j.button("detail.suppress").click()
    expect(j.status()).to_have_text(t("detail.suppressed", key="explanation_style"))
    expect(facts.locator(".badge")).to_have_text(t("status.suppressed"))
    expect(j.button("detail.restore")).to_be_focused()
    assert j.api.get(f"/me/core-memories/{memory_id}").json()["status"] == "suppressed"
    j.button("detail.restore").click()
    expect(j.status()).to_have_text(t("detail.restored", key="explanation_style"))
    expect(facts.locator(".badge")).to_have_text(t("status.active"))
    expect(j.button("detail.suppress")).to_be_focused()
    assert j.api.get(f"/me/core-memories/{memory_id}").json()["status"] == "active"

    # History (its own screen): three versions, newest first, each saying what happened and who
    # did it; restore the first as revision 4.
    j.link("detail.history").click()
    assert page.url.endswith(f"#/memories/{memory_id}/history")
    versions = page.locator("ol.versions > li")
    expect(versions).to_have_count(3)
    expect(versions.nth(0)).to_contain_text(t("history.current"))
    expect(versions.nth(0)).to_contain_text(t("history.change.update.user_api"))
    expect(versions.nth(1)).to_contain_text("Changed elsewhere meanwhile")
    expect(versions.nth(2)).to_contain_text(t("history.change.create.user_api"))
    j.button("history.restore", revision=1).click()
    expect(j.status()).to_have_text(t("history.restored", revision=1, new_revision=4))
    expect(versions).to_have_count(4)
    expect(versions.nth(0)).to_contain_text(t("history.change.restore.user_api"))
    j.link("history.back", key="explanation_style").click()
    expect(facts).to_contain_text("Examples before definitions")
    assert j.api.get(f"/me/core-memories/{memory_id}").json()["revision"] == 4

    # Candidates from an agent: accept one, edit and accept one, reject one.
    for key, text in [
        ("editor", "Uses vim"),
        ("pace", "Likes short lessons"),
        ("nickname", "Call me Al"),
    ]:
        body = {"memory_key": key, "content": text, "category": "fact", "scope_type": "global"}
        answer = j.agent.post("/tools/propose_core_memory", json=body)
        assert answer.json()["status"] == "candidate_created", answer.text
    j.link("nav.candidates").click()
    expect(page.get_by_role("heading", name=t("candidates.heading"))).to_be_focused()
    cards = page.locator("li.candidate")
    expect(cards).to_have_count(3)
    j.button("candidates.accept_named", key="editor").click()
    expect(j.status()).to_contain_text(t("candidates.accepted", key="editor", revision=1))
    expect(cards).to_have_count(2)
    assert j.page.evaluate("document.activeElement.tagName") == "H3"

    j.button("candidates.edit_named", key="pace").click()
    edit_form = page.get_by_role("form", name=t("candidates.edit_named", key="pace"))
    expect(edit_form.get_by_label(t("field.content"))).to_be_focused()
    j.assert_labelled()
    edit_form.get_by_label(t("field.content")).fill("Likes 20-minute lessons")
    edit_form.get_by_label(t("field.scope")).select_option("workspace")
    edit_form.get_by_label(t("field.workspace")).select_option("learning")
    edit_form.get_by_role("button", name=t("candidates.accept_edited")).click()
    expect(j.status()).to_contain_text(t("candidates.accepted", key="pace", revision=1))
    expect(cards).to_have_count(1)

    j.button("candidates.reject_named", key="nickname").click()
    expect(j.status()).to_have_text(t("candidates.rejected", key="nickname"))
    expect(cards).to_have_count(0)
    expect(page.locator("#candidates-empty")).to_have_text(t("candidates.empty.pending"))
    page.get_by_label(t("candidates.status")).select_option("rejected")
    j.button("candidates.show").click()
    expect(cards).to_have_count(1)
    expect(cards.first).to_contain_text(t("candidate_status.rejected"))

    listed = {m["memory_key"]: m for m in j.api.get("/me/core-memories").json()["items"]}
    assert listed["editor"]["content"] == "Uses vim"
    assert listed["pace"]["content"] == "Likes 20-minute lessons"
    assert listed["pace"]["workspace_type"] == "learning"
    assert "nickname" not in listed

    # Settings: turn proposals off.
    j.link("nav.settings").click()
    toggle = page.get_by_label(t("settings.auto_extract_enabled"))
    expect(toggle).to_be_checked()
    j.assert_labelled()
    toggle.uncheck()
    j.button("settings.save").click()
    expect(j.status()).to_have_text(t("settings.saved"))
    assert j.api.get("/me/memory-settings").json() == {
        "saved_memory_enabled": True,
        "auto_extract_enabled": False,
    }

    # Forget: cancel first (focus returns), then confirm; the tombstone shows the server's 410.
    j.link("nav.memories").click()
    expect(page.locator("tbody tr")).to_have_count(5)
    j.link("memories.open_named", key="explanation_style").click()
    j.button("detail.forget").click()
    confirm = page.get_by_role("dialog", name=t("forget.title"))
    expect(confirm).to_be_visible()
    expect(confirm).to_contain_text(t("forget.irreversible"))
    j.assert_labelled()
    expect(j.button("forget.cancel")).to_be_focused()
    page.keyboard.press("Tab")
    expect(j.button("forget.confirm")).to_be_focused()  # focus stays inside the dialog (wraps)
    page.keyboard.press("Escape")
    expect(confirm).to_be_hidden()
    expect(j.button("detail.forget")).to_be_focused()
    assert j.api.get(f"/me/core-memories/{memory_id}").status_code == 200

    j.button("detail.forget").click()
    j.button("forget.confirm").click()
    tombstone = page.get_by_role("heading", name=t("tombstone.heading"))
    expect(tombstone).to_be_focused()
    expect(page.locator(".tombstone")).to_contain_text("410 forgotten")
    expect(j.status()).to_have_text(t("forget.done", key="explanation_style"))
    gone = j.api.get(f"/me/core-memories/{memory_id}")
    assert gone.status_code == 410 and gone.json()["reason"] == "forgotten"
    j.link("detail.back").click()
    expect(page.locator("tbody tr")).to_have_count(4)
    expect(page.locator("tbody")).not_to_contain_text("explanation_style")

    # Sign out: the token leaves the tab.
    j.button("account.sign_out").click()
    expect(page.get_by_role("heading", name=t("signin.title"))).to_be_visible()
    expect(page.get_by_label(t("signin.token"))).to_be_focused()
    assert page.evaluate("sessionStorage.getItem('memledger.console.token')") is None
    assert j.problems == []


def test_language_switch_persists_and_api_errors_show_their_detail(
    journey: Callable[..., Journey],
) -> None:
    j = journey("en")
    en, zh, page = j.t, Text("zh"), j.page
    page.goto(f"{j.base_url}/console/")
    expect(page.get_by_role("heading", name=en("signin.title"))).to_be_visible()

    page.get_by_label(en("language.label")).select_option("zh")
    expect(page.get_by_role("heading", name=zh("signin.title"))).to_be_visible()
    expect(page.get_by_label(zh("language.label"))).to_be_focused()
    page.reload()
    expect(page.get_by_role("heading", name=zh("signin.title"))).to_be_visible()
    assert page.evaluate("document.documentElement.lang") == "zh-CN"

    # A wrong token: the API's detail, in the sign-in form's alert.
    page.get_by_label(zh("signin.token")).fill("not-a-token")
    page.get_by_role("button", name=zh("signin.submit")).click()
    alert = page.locator("main [role=alert]")
    expect(alert).to_contain_text("wrongly signed bearer token")
    expect(page.get_by_label(zh("signin.token"))).to_be_focused()

    # Signed in, a create the API refuses (a past expiry: 422) keeps the dialog and says why.
    page.get_by_label(zh("signin.token")).fill(j.token)
    page.get_by_role("button", name=zh("signin.submit")).click()
    page.get_by_role("button", name=zh("memories.new")).click()
    dialog = page.get_by_role("dialog", name=zh("create.title"))
    dialog.get_by_label(zh("field.key")).fill("old")
    dialog.get_by_label(zh("field.content")).fill("Something past")
    dialog.get_by_label(zh("field.expires_at")).fill("2001-01-01")
    dialog.get_by_role("button", name=zh("create.submit")).click()
    expect(dialog.get_by_role("alert")).to_contain_text("HTTP 422")
    expect(dialog).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.get_by_role("button", name=zh("memories.new"))).to_be_focused()
    assert j.problems == []


def test_load_more_follows_the_cursor_and_the_keyboard_alone_gets_around(
    journey: Callable[..., Journey],
) -> None:
    j = journey("en")
    t, page = j.t, j.page
    for n in range(52):
        body = {"memory_key": f"note_{n:02}", "content": f"Note number {n}", "category": "fact"}
        assert j.api.post("/me/core-memories", json=body | {"scope_type": "global"}).is_success
    # Keyboard only: the skip link leads to the content, the token field is next, Enter signs in.
    page.goto(f"{j.base_url}/console/")
    expect(page.get_by_role("heading", name=t("signin.title"))).to_be_visible()
    page.keyboard.press("Tab")
    expect(page.locator("#skip-link")).to_be_focused()
    expect(page.locator("#skip-link")).to_have_text(t("nav.skip"))
    page.keyboard.press("Enter")
    expect(page.locator("#main")).to_be_focused()
    page.keyboard.press("Tab")
    expect(page.get_by_label(t("signin.token"))).to_be_focused()
    page.keyboard.type(j.token)
    page.keyboard.press("Tab")
    expect(j.button("signin.submit")).to_be_focused()
    page.keyboard.press("Enter")
    count = page.locator("#memory-count")
    expect(count).to_have_text(t("memories.count", loaded=50))

    # From the heading, Tab reaches "New memory"; the dialog opens on Enter, closes on Escape,
    # and focus comes back to the button.
    expect(page.get_by_role("heading", name=t("memories.heading"))).to_be_focused()
    page.keyboard.press("Tab")
    expect(j.button("memories.new")).to_be_focused()
    page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog", name=t("create.title"))
    expect(dialog.get_by_label(t("field.key"))).to_be_focused()
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    expect(j.button("memories.new")).to_be_focused()

    # The next page through the cursor; focus lands on the first row it brought.
    j.button("memories.load_more").focus()
    page.keyboard.press("Enter")
    expect(count).to_have_text(t("memories.count", loaded=52))
    expect(page.locator(":focus")).to_have_attribute("aria-label", re.compile(r"^Open note_"))
    expect(j.status()).to_have_text(t.n("memories.loaded_more", 2))
    expect(page.get_by_text(t("memories.all_loaded"))).to_be_visible()

    # A change elsewhere (the change feed redraws the list) keeps every row "Load more" brought.
    body = {"memory_key": "note_52", "content": "Note number 52", "category": "fact"}
    assert j.api.post("/me/core-memories", json=body | {"scope_type": "global"}).is_success
    expect(count).to_have_text(t("memories.count", loaded=53))
    assert j.problems == []


def test_a_replacement_candidate_edited_and_accepted_becomes_a_new_version(
    journey: Callable[..., Journey],
) -> None:
    j = journey("zh")
    t, page = j.t, j.page
    body = {"memory_key": "editor", "content": "Uses vim", "category": "fact"}
    memory = j.api.post("/me/core-memories", json=body | {"scope_type": "global"}).json()
    saved = j.agent.post(
        "/tools/save_core_memory", json=body | {"content": "Uses Emacs", "scope_type": "global"}
    )
    assert saved.json()["status"] == "candidate_created", saved.text

    page.goto(console_link(j.base_url, j.token))
    j.link("nav.candidates").click()
    card = page.locator("li.candidate")
    expect(card).to_have_count(1)
    expect(card).to_contain_text(t("operation.replace"))
    expect(card.locator(".version-box.current")).to_contain_text("Uses vim")
    expect(card.locator(".version-box.proposed")).to_contain_text("Uses Emacs")
    j.button("candidates.edit_named", key="editor").click()
    form = page.get_by_role("form", name=t("candidates.edit_named", key="editor"))
    expect(form.get_by_label(t("field.scope"))).to_have_count(0)  # it replaces in place
    form.get_by_label(t("field.content")).fill("Uses Emacs with evil-mode")
    form.get_by_role("button", name=t("candidates.accept_edited")).click()
    expect(j.status()).to_have_text(t("candidates.accepted", key="editor", revision=2))

    j.link("nav.memories").click()
    j.link("memories.open_named", key="editor").click()
    j.link("detail.history").click()
    versions = page.locator("ol.versions > li")
    expect(versions).to_have_count(2)
    expect(versions.first).to_contain_text("Uses Emacs with evil-mode")
    expect(versions.first).to_contain_text(t("history.change.replace.candidate"))
    expect(versions.last).to_contain_text(t("history.change.create.user_api"))
    assert j.api.get(f"/me/core-memories/{memory['memory_id']}").json()["revision"] == 2
    assert j.problems == []


def test_the_page_follows_the_change_feed(journey: Callable[..., Journey]) -> None:
    """Changes made elsewhere (an agent, another tab) appear without a reload: the console follows
    GET /me/changes as a stream and redraws the screen it shows."""
    j = journey("en")
    t, page = j.t, j.page
    seed(j)
    page.goto(console_link(j.base_url, j.token))
    expect(page.locator("tbody tr")).to_have_count(2)

    body = {"memory_key": "editor", "content": "Uses vim", "category": "fact"}
    made = j.agent.post("/tools/save_core_memory", json=body | {"scope_type": "global"})
    assert made.json()["status"] == "created", made.text
    expect(page.locator("tbody tr")).to_have_count(3)
    expect(page.locator("tbody")).to_contain_text("Uses vim")

    memory = made.json()["memory"]
    j.link("memories.open_named", key="editor").click()
    facts = page.locator("dl.facts")
    expect(facts).to_contain_text("Uses vim")
    changed = j.api.patch(
        f"/me/core-memories/{memory['memory_id']}",
        json={"expected_revision": 1, "content": "Uses Helix"},
    )
    assert changed.status_code == 200
    expect(facts).to_contain_text("Uses Helix")

    j.link("nav.candidates").click()
    expect(page.locator("#candidates-empty")).to_be_visible()
    proposal = {"memory_key": "pace", "content": "Likes short lessons", "category": "preference"}
    answer = j.agent.post("/tools/propose_core_memory", json=proposal | {"scope_type": "global"})
    assert answer.json()["status"] == "candidate_created", answer.text
    expect(page.locator("li.candidate")).to_have_count(1)
    expect(page.locator("#candidate-count")).to_have_text(t.n("candidates.count", 1))

    # A redraw by the feed keeps the focus where the user (or an accept) left it: on a card's
    # heading, the same card's heading in the new screen.
    heading = page.locator("li.candidate h3").first
    heading.focus()
    focused = page.evaluate(
        "document.activeElement.dataset.drawn = 'before'; document.activeElement.id"
    )
    second = {"memory_key": "nickname", "content": "Call me Al", "category": "fact"}
    answer = j.agent.post("/tools/propose_core_memory", json=second | {"scope_type": "global"})
    assert answer.json()["status"] == "candidate_created", answer.text
    expect(page.locator("li.candidate")).to_have_count(2)
    active = page.evaluate("[document.activeElement.id, document.activeElement.dataset.drawn]")
    assert active == [focused, None]  # the redrawn heading, not the old one, nor the page
    assert j.problems == []
