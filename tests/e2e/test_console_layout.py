"""The console at a phone's width (390 px) and a desktop's (1280 px), in English and Chinese: the
owner's journey (search, open a memory by its URL, reload, Back, review a replacement beside the
value it replaces, forget), with every screen measured in the page: nothing wider than the
viewport, no text in a column narrower than two characters, no word broken across lines.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from api.console import console_link
from api.metrics import Metrics
from api.services import Services
from domain.ledger.ledger import MemoryLedger
from projections.reads import Reads
from projections.registry import all_projections
from projections.worker import ProjectionWorker
from retrieval.vectors.service import EmbeddingService
from tests.conftest import JWT_SECRET
from tests.e2e.console_harness import chromium_available
from tests.e2e.console_pages import Journey

if not chromium_available() and not os.environ.get("CI"):
    pytest.skip("no /usr/bin/chromium (apt-get install chromium)", allow_module_level=True)

pytestmark = pytest.mark.integration

WIDTHS = [390, 1280]
SEARCHING = 30_000
"""How long (ms) a search may take in the page: it embeds the query on a CPU shared with the
projections' embedding and other test processes."""
LANGS = ["en", "zh"]
CONVERSATION = "conv-2026-12-03-tutoring"
MEMORIES = {
    "en": [
        ("explanation_style", "Worked examples first, then the definition", "preference"),
        ("answer_language", "Answer in English; keep code comments in English too", "preference"),
        ("thesis_deadline", "Thesis draft due 30 June", "goal"),
        ("allergies", "Allergic to peanuts", "constraint"),
        (
            "teaching_context_for_the_first_year_introductory_course",
            "Teaches a first-year class of 24 students twice a week; prefers materials that can be"
            " printed on one double-sided page, with a worked example, three exercises of rising"
            " difficulty and the answers on the back, and no more than ten minutes of lecturing"
            " before the students start working.",
            "background",
        ),
    ],
    "zh": [
        ("explanation_style", "我更喜欢先看例子再看定义。", "preference"),
        ("answer_language", "请用简体中文回答，代码注释用英文。", "preference"),  # noqa: RUF001
        ("study_goal", "今年通过 N2 日语考试。", "goal"),
        ("schedule", "工作日晚上八点以后才有空。", "constraint"),
        (
            "teaching_context_for_the_first_year_introductory_course",
            "每周给二十四名一年级学生上两次课；希望讲义能印在一张双面纸上，包含一个完整的例题、"  # noqa: RUF001
            "三道由易到难的练习题和背面的答案，讲解不超过十分钟，之后让学生自己动手练习。",  # noqa: RUF001
            "background",
        ),
    ],
}
PROPOSED = {
    "en": "Definitions first, then one short example",
    "zh": "先看定义，再看一个简短的例子。",  # noqa: RUF001
}
# Found by meaning, not by shared words (the zh one across languages, as in issue 25).
SEARCH = {
    "en": ("food I must not eat", "allergies"),
    "zh": ("examples before definitions", "explanation_style"),
}


@pytest.fixture
def services(
    ledger: MemoryLedger,
    make_worker: Callable[..., ProjectionWorker],
    embedding_service: EmbeddingService,
) -> Services:
    """The API over every projection, the vectors included, so the owner's search works by
    meaning as in production (the bundled embedder)."""
    worker = make_worker(all_projections(embedding_service))
    worker.start()
    return Services(
        ledger=ledger,
        reads=Reads(worker.pool, worker.schema, worker.ledger.partition),
        metrics=Metrics(),
        jwt_secret=JWT_SECRET,
        worker=worker,
        embeddings=embedding_service,
    )


@pytest.fixture
def journey(browser: Browser, base_url: str) -> Iterator[Callable[..., Journey]]:
    made: list[Journey] = []

    def make(lang: str, width: int, user: str = "alice") -> Journey:
        made.append(Journey(browser, base_url, lang, user, width=width, height=844))
        return made[-1]

    yield make
    for j in made:
        j.close()


def retried(call: Callable[[], Any]) -> Any:
    """A write, again after a 503 (the projections, embedding on a shared CPU, may lag behind the
    request deadline), as the contract's Retry-After invites; any other answer is returned."""
    for _ in range(10):
        answer = call()
        if answer.status_code != 503:
            return answer
        time.sleep(float(answer.headers.get("Retry-After", "1")))
    return answer


def embedded(j: Journey, query: str, key: str) -> None:
    """Wait until the vectors projection (embedding on a shared CPU, behind the others) has the
    seeded memories: the API's own search ranks `key` first."""
    for _ in range(120):
        items = j.api.get("/me/core-memories", params={"q": query}).json().get("items", [])
        if items and items[0]["memory_key"] == key:
            return
        time.sleep(0.5)
    raise AssertionError(f"the search for {query!r} never ranked {key} first: {items}")


def remember(j: Journey, lang: str) -> dict[str, str]:
    ids = {}
    for key, content, category in MEMORIES[lang]:
        body = {"memory_key": key, "content": content, "category": category}
        answer = retried(
            lambda body=body: j.api.post("/me/core-memories", json=body | {"scope_type": "global"})
        )
        assert answer.status_code == 201, answer.text
        ids[key] = answer.json()["memory_id"]
    return ids


def propose_replacement(j: Journey, lang: str) -> dict[str, Any]:
    body = {
        "memory_key": "explanation_style",
        "content": PROPOSED[lang],
        "category": "preference",
        "scope_type": "global",
        "source_conversation_id": CONVERSATION,
    }
    answer = retried(lambda: j.agent.post("/tools/propose_core_memory", json=body))
    assert answer.json().get("status") == "candidate_created", answer.text
    candidate: dict[str, Any] = answer.json()["candidate"]
    assert candidate["target_memory_id"] is not None
    return candidate


def measured(j: Journey, screen: str) -> None:
    problems = j.layout_problems()
    assert problems == [], f"{screen}: {problems}"


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("lang", LANGS)
def test_the_owners_journey_holds_its_layout_and_its_place(
    journey: Callable[..., Journey], lang: str, width: int
) -> None:
    j = journey(lang, width)
    t, page = j.t, j.page
    ids = remember(j, lang)
    candidate = propose_replacement(j, lang)
    target = candidate["target_memory_id"]
    assert target == ids["explanation_style"]

    page.goto(console_link(j.base_url, j.token))
    expect(page.get_by_role("heading", name=t("memories.heading"), level=2)).to_be_focused()
    assert page.url.endswith("#/memories")
    expect(page.locator("tbody tr")).to_have_count(len(MEMORIES[lang]))
    measured(j, "list")

    # Search: the query goes into the URL, the result replaces the list.
    query, found_key = SEARCH[lang]
    embedded(j, query, found_key)
    page.get_by_label(t("search.label")).fill(query)
    j.button("search.submit").click()
    expect(page).to_have_url(re.compile(r"#/memories\?q="))
    rows = page.locator("tbody tr")
    expect(page.locator("#memory-count")).to_contain_text(query, timeout=SEARCHING)  # results in
    expect(rows.first).to_contain_text(found_key)
    expect(page.locator("#memory-count")).to_have_text(t.n("memories.found", rows.count(), q=query))
    measured(j, "search")
    search_url = page.url

    # Open a memory by its URL, on a fresh load; reload keeps it; its history is its own URL.
    memory_url = f"{j.base_url}/console/#/memories/{target}"
    page.goto(memory_url)
    heading = page.get_by_role("heading", name="explanation_style", level=2, exact=True)
    expect(heading).to_be_focused()
    measured(j, "memory")
    page.reload()
    expect(heading).to_be_visible()
    assert page.url == memory_url
    j.link("detail.history").click()
    expect(page).to_have_url(f"{memory_url}/history")
    expect(page.get_by_role("heading", name=t("history.heading_named", key="explanation_style")))
    versions = page.locator("ol.versions > li")
    expect(versions).to_have_count(1)
    expect(versions.first).to_contain_text(t("history.change.create.user_api"))
    measured(j, "history")

    # Back, Back: the memory, then the search as it was (query in the box, same results).
    page.go_back()
    expect(heading).to_be_visible()
    assert page.url == memory_url
    page.go_back()
    expect(page).to_have_url(search_url)
    expect(page.get_by_label(t("search.label"))).to_have_value(query)
    expect(page.locator("tbody tr").first).to_contain_text(found_key)
    page.go_forward()
    expect(heading).to_be_visible()

    # The replacement beside the value it would replace, with the conversation that proposed it.
    j.link("nav.candidates").click()
    expect(page).to_have_url(re.compile(r"#/candidates$"))
    expect(page.locator("#candidate-count")).to_have_text(t.n("candidates.count", 1))
    card = page.locator("li.candidate")
    expect(card).to_have_count(1)
    current = card.locator(".version-box.current")
    proposed = card.locator(".version-box.proposed")
    expect(current).to_contain_text(t("candidates.current", revision=1))
    expect(current).to_contain_text(MEMORIES[lang][0][1])
    expect(proposed).to_contain_text(PROPOSED[lang])
    expect(card).to_contain_text(CONVERSATION)
    if width > 600:  # side by side where there is room, one above the other on a phone
        assert current.bounding_box()["y"] == proposed.bounding_box()["y"]  # type: ignore[index]
    else:
        assert current.bounding_box()["y"] < proposed.bounding_box()["y"]  # type: ignore[index]
    measured(j, "candidates")
    page.reload()
    expect(card.locator(".version-box.current")).to_contain_text(MEMORIES[lang][0][1])

    # Forget it from its page: the tombstone, and the list without it.
    page.goto(memory_url)
    j.button("detail.forget").click()
    confirm = page.get_by_role("dialog", name=t("forget.title"))
    expect(confirm).to_be_visible()
    measured(j, "forget dialog")
    j.button("forget.confirm").click()
    expect(page.get_by_role("heading", name=t("tombstone.heading"))).to_be_focused()
    measured(j, "tombstone")
    assert j.api.get(f"/me/core-memories/{target}").status_code == 410
    j.link("detail.back").click()
    expect(page.locator("tbody tr")).to_have_count(len(MEMORIES[lang]) - 1)
    expect(page.locator("tbody")).not_to_contain_text("explanation_style")
    # Its candidate went with it.
    j.link("nav.candidates").click()
    expect(page.locator("#candidates-empty")).to_have_text(t("candidates.empty.pending"))
    measured(j, "no candidates")
    assert j.problems == []


@pytest.mark.parametrize("lang", LANGS)
def test_an_empty_account_no_match_and_no_candidates_read_differently(
    journey: Callable[..., Journey], lang: str
) -> None:
    j = journey(lang, 390)
    t, page = j.t, j.page
    page.goto(console_link(j.base_url, j.token))
    empty = page.locator("#memories-empty")
    expect(empty).to_contain_text(t("memories.empty_account"))
    measured(j, "empty account")

    remember(j, lang)
    # A search's empty state, whatever the ranking: a query under a filter nothing passes (no
    # memory is suppressed). Without the filter, relevance decides: dense recall is the floor,
    # so even a nonsense query may rank a memory above the threshold.
    page.goto(f"{j.base_url}/console/#/memories?q=zzzz-nothing&status=suppressed")
    expect(empty).to_have_text(t("memories.empty_search", q="zzzz-nothing"), timeout=SEARCHING)
    page.goto(f"{j.base_url}/console/#/memories?status=suppressed")
    expect(empty).to_have_text(t("memories.empty_filtered"))
    expect(page.get_by_label(t("filter.status"))).to_have_value("suppressed")

    page.goto(f"{j.base_url}/console/#/candidates?status=rejected")
    expect(page.locator("#candidates-empty")).to_have_text(t("candidates.empty.rejected"))
    expect(page.get_by_label(t("candidates.status"))).to_have_value("rejected")
    measured(j, "no rejected candidates")
    assert j.problems == []
