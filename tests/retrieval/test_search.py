"""Lexical retrieval: terms, ranking, budgets (pure), and the candidate query (PostgreSQL)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

import pytest

from domain.ledger.ledger import MemoryLedger
from domain.model.values import Scope
from domain.policy import shadow_global, visible_scopes
from projections.reads import Reads
from projections.tokens import query_terms
from projections.worker import ProjectionWorker
from retrieval.budget import ELLIPSIS, ITEM_TOKENS, TOTAL_TOKENS, estimate_tokens, truncate
from retrieval.fusion import FusedRanker
from retrieval.query import Query, SearchRow
from retrieval.search import search
from tests.search_rows import search_row

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


def memory(
    content: str,
    key: str | None = None,
    *,
    category: str = "preference",
    workspace: str | None = None,
    age_days: float = 1,
    status: str = "active",
    **dates: Any,
) -> SearchRow:
    return search_row(
        key or f"k_{uuid4().hex[:8]}",
        content,
        updated_at=NOW - timedelta(days=age_days),
        category=category,
        workspace=workspace,
        status=status,
        **dates,
    )


def find(pool: list[SearchRow], query: str, **options: Any) -> list[str]:
    result = search(pool, query, workspace="learning", now=NOW, **options)
    return [item.row.content for item in result.items]


# -- terms -------------------------------------------------------------------------------------


def test_english_terms_are_words_without_stop_words_and_plurals() -> None:
    assert query_terms("What are my favourite Examples?") == {"favourite": 2, "example": 2}


def test_chinese_terms_are_character_bigrams_without_function_pairs() -> None:
    terms = query_terms("我的学习目标")

    assert {"学习", "习目", "目标"} <= set(terms)
    assert "我的" not in terms  # both characters are function characters
    assert terms["的学"] == 1  # one function character: half weight


def test_a_lone_cjk_character_is_its_own_term() -> None:
    assert query_terms("猫") == {"猫": 2}


def test_mixed_text_splits_at_script_changes() -> None:
    assert set(query_terms("用Python写代码")) == {"用", "python", "写代", "代码"}


def test_a_query_of_stop_words_has_no_terms() -> None:
    assert query_terms("what is it?") == {}
    assert query_terms("?? !!") == {}


# -- matching and ranking ----------------------------------------------------------------------


def test_chinese_queries_find_chinese_memories() -> None:
    pool = [memory("我更喜欢先看例子再看定义。"), memory("我在准备六月的考试", category="goal")]

    assert find(pool, "例子") == ["我更喜欢先看例子再看定义。"]
    assert find(pool, "考试") == ["我在准备六月的考试"]


def test_english_and_mixed_queries_find_their_memories() -> None:
    pool = [memory("I write Python for data analysis"), memory("用 VS Code 写 Python 代码")]

    assert set(find(pool, "python")) == {pool[0].content, pool[1].content}
    assert find(pool, "代码") == [pool[1].content]
    assert find(pool, "data analysis")[0] == pool[0].content


def test_no_match_gives_no_items_never_the_full_list() -> None:
    pool = [memory("I prefer examples first"), memory("我喜欢先看例子")]

    assert find(pool, "weather tomorrow") == []
    assert find(pool, "天气") == []
    assert find(pool, "the") == []


def test_an_exact_key_match_ranks_first() -> None:
    by_key = memory("Short answers", key="explanation_style", age_days=30)
    by_text = memory("My explanation style: examples first, explanation style matters")

    assert find([by_text, by_key], "Explanation Style") == [by_key.content, by_text.content]


def test_a_phrase_outranks_scattered_words() -> None:
    phrase = memory("I like examples first, then definitions", age_days=30)
    scattered = memory("First I read definitions, examples come later")

    assert find([scattered, phrase], "examples first") == [phrase.content, scattered.content]


def test_a_phrase_does_not_match_inside_a_word() -> None:
    assert find([memory("continuing education")], "cat") == []


def test_higher_term_coverage_ranks_higher() -> None:
    both = memory("学习目标是通过考试", age_days=30)
    one = memory("我的考试在六月")

    assert find([one, both], "学习目标 考试") == [both.content, one.content]


def test_a_category_named_by_the_query_matches_and_ranks_below_text_matches() -> None:
    goal = memory("Pass the June exam", category="goal")
    text = memory("My goal list is long", category="fact", age_days=30)

    assert find([goal, text], "goals") == [text.content, goal.content]
    assert find([goal], "我的目标") == [goal.content]


def test_newer_updated_at_only_breaks_ties() -> None:
    old = memory("python tips", age_days=10)
    new = memory("python tricks", age_days=1)
    better_but_older = memory("python tips and tricks", age_days=100)

    assert find([old, new], "python") == [new.content, old.content]
    assert find([old, new, better_but_older], "tips tricks")[0] == better_but_older.content


def test_a_memory_due_for_review_ranks_below_an_otherwise_equal_one() -> None:
    due = memory("python tips", age_days=1, review_after=NOW - timedelta(days=1))
    fresh = memory("python tips", age_days=5)
    confirmed = memory(
        "python tips",
        age_days=0.5,
        review_after=NOW - timedelta(days=3),
        last_confirmed_at=NOW - timedelta(days=2),
    )
    later = memory("python tips", age_days=0.1, review_after=NOW + timedelta(days=1))

    assert find([due, fresh, confirmed, later], "python") == [
        later.content,
        confirmed.content,
        fresh.content,
        due.content,
    ]


def test_ranking_is_deterministic() -> None:
    pool = [memory(f"python note {i}", age_days=1) for i in range(6)]  # all tied
    first = FusedRanker({}).rank(Query.of("python"), pool, now=NOW)
    again = FusedRanker({}).rank(Query.of("python"), list(reversed(pool)), now=NOW)

    assert [s.row.memory_id for s in first] == [s.row.memory_id for s in again]


# -- filters -----------------------------------------------------------------------------------


def test_the_workspace_memory_hides_the_global_one_with_the_same_key() -> None:
    general = memory("answer in English", key="language")
    local = memory("answer in Chinese", key="language", workspace="learning")
    other = memory("answer politely", key="tone", age_days=5)

    assert shadow_global([general, local, other]) == [local, other]
    assert find([general, local, other], "answer") == [local.content, other.content]
    assert find([general, local], "English") == []  # hidden, not ranked lower


def test_only_active_unexpired_memories_of_visible_scopes_are_returned() -> None:
    pool = [
        memory("python visible"),
        memory("python suppressed", status="suppressed"),
        memory("python expired", expires_at=NOW - timedelta(seconds=1)),
        memory("python expiring later", expires_at=NOW + timedelta(days=1)),
        memory("python teaching", workspace="teaching"),
    ]

    assert set(find(pool, "python")) == {"python visible", "python expiring later"}


def test_the_category_option_narrows_the_candidates() -> None:
    pool = [memory("python at work", category="fact"), memory("python at home")]

    assert find(pool, "python", category="fact") == ["python at work"]


def test_at_most_limit_items_are_returned() -> None:
    pool = [memory(f"python note {i}") for i in range(30)]

    assert len(find(pool, "python")) == 5
    assert len(find(pool, "python", limit=2)) == 2
    assert len(find(pool, "python", limit=20)) == 20


# -- tokens and budgets ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("", 0),
        ("word", 1),
        ("words", 2),
        ("I write Python", 5),
        ("12345", 2),
        ("a, b.", 4),
        ("我喜欢例子", 5),
        ("用Python写", 4),
        ("line\nline", 3),
        ("🙂", 2),
        ("café", 2),
    ],
)
def test_the_token_estimate_is_conservative(text: str, tokens: int) -> None:
    assert estimate_tokens(text) == tokens


def test_one_cjk_character_is_at_least_one_token() -> None:
    text = "这是一个很长的中文句子" * 3
    assert estimate_tokens(text) >= len(text)


def test_short_content_is_not_cut() -> None:
    assert truncate("I prefer examples first.", 160) == "I prefer examples first."


def test_long_english_content_is_cut_at_a_word_and_stays_in_budget() -> None:
    text = "examples first then definitions " * 60

    cut = truncate(text, 50)

    assert cut.endswith(ELLIPSIS) and estimate_tokens(cut) <= 50
    assert text.startswith(cut.removesuffix(ELLIPSIS))
    assert cut.removesuffix(ELLIPSIS).split()[-1] in {"examples", "first", "then", "definitions"}


def test_long_chinese_content_is_cut_at_a_sentence_end_when_one_is_near() -> None:
    text = "我更喜欢先看例子再看定义。" * 30

    cut = truncate(text, 160)

    assert estimate_tokens(cut) <= 160
    assert cut.endswith("。" + ELLIPSIS)


def test_a_cut_never_separates_a_character_from_its_combining_mark() -> None:
    text = "e\u0301" * 400  # e + combining acute accent, each pair one visible letter

    cut = truncate(text, 41).removesuffix(ELLIPSIS)  # 39 characters fit: a bare e last

    assert cut.endswith("\u0301") and estimate_tokens(cut + ELLIPSIS) <= 41


def test_each_item_is_cut_to_160_tokens_and_reports_its_tokens() -> None:
    pool = [memory("python " + "长" * 900)]

    [item] = search(pool, "python", workspace="learning", now=NOW).items

    assert item.tokens == estimate_tokens(item.content) <= ITEM_TOKENS
    assert item.content.endswith(ELLIPSIS)


def test_the_total_budget_holds_and_keeps_rank_order() -> None:
    pool = [memory("python " + "长" * 900, age_days=i) for i in range(5)]

    result = search(pool, "python", workspace="learning", now=NOW)

    assert result.total_tokens == sum(i.tokens for i in result.items) <= TOTAL_TOKENS
    assert len(result.items) == 4  # 160 + 160 + 160 + a cut fourth (< 120), then nothing
    assert result.items[-1].tokens <= TOTAL_TOKENS - 3 * ITEM_TOKENS
    ages = [item.row.updated_at for item in result.items]
    assert ages == sorted(ages, reverse=True)


# -- the candidate query on PostgreSQL ---------------------------------------------------------


@pytest.fixture
def reads(worker: ProjectionWorker, pg_schema: str) -> Reads:
    return Reads(worker.pool, pg_schema, worker.ledger.partition)


def _create(ledger: MemoryLedger, user: str, key: str, scope: Scope, **options: Any) -> UUID:
    outcome = ledger.create_memory(
        user, scope=scope, memory_key=key, content=f"python {key}", category="fact", **options
    )
    assert outcome.memory is not None
    return outcome.memory.memory_id


def test_the_query_fetches_active_unexpired_memories_of_the_visible_scopes(
    ledger: MemoryLedger, worker: ProjectionWorker, reads: Reads, clock: Any
) -> None:
    learning, teaching = Scope.workspace("learning"), Scope.workspace("teaching")
    wanted = {
        _create(ledger, "alice", "g", Scope.global_()),
        _create(ledger, "alice", "l", learning),
    }
    _create(ledger, "alice", "t", teaching)
    _create(ledger, "bob", "b", Scope.global_())
    ledger.suppress_memory("alice", _create(ledger, "alice", "s", Scope.global_()))
    _create(ledger, "alice", "e", learning, expires_at=clock.now + timedelta(hours=1))
    forgotten = _create(ledger, "alice", "f", learning)
    ledger.forget_memory("alice", forgotten)
    worker.catch_up()
    clock.advance(hours=2)

    rows = reads.retrievable_memories("alice", visible_scopes("learning"), now=clock.now)

    assert {r.memory_id for r in rows} == wanted
    assert reads.forgotten_scope("alice", forgotten) == learning
    assert reads.forgotten_scope("bob", forgotten) is None
    by_key = reads.memory_by_key("alice", learning, "l")
    assert by_key is not None and by_key.memory_id in wanted
    assert reads.memory_by_key("alice", Scope.global_(), "l") is None


def test_search_over_the_projection_forgets_with_the_memory(
    ledger: MemoryLedger, worker: ProjectionWorker, reads: Reads, clock: Any
) -> None:
    memory_id = _create(ledger, "alice", "tip", Scope.global_())
    worker.catch_up()

    def hits() -> list[UUID]:
        rows = reads.retrievable_memories("alice", visible_scopes("research"), now=clock.now)
        result = search(
            [SearchRow.of(r) for r in rows], "python", workspace="research", now=clock.now
        )
        return [item.row.memory_id for item in result.items]

    assert hits() == [memory_id]
    ledger.forget_memory("alice", memory_id)
    worker.catch_up()
    assert hits() == []
