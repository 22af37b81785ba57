"""Bilingual evidence: English and Chinese met through a dictionary (retrieval/glossary.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from retrieval.english import english_terms, fold
from retrieval.fusion import WEIGHTS, FusedRanker
from retrieval.glossary import Evidence, Glossary, shared_glossary
from retrieval.query import Query, SearchRow
from tests.search_rows import search_row

NOW = datetime(2026, 11, 30, tzinfo=UTC)
SMALL = Glossary(
    {
        "助教": english_terms("teaching assistant"),
        "截止": english_terms("to close; to stop; deadline"),
        "时间": english_terms("time; period"),
        "什么时候": english_terms("when?; at what time?"),
        "工程师": english_terms("engineer"),
    }
)


def _coverage(glossary: Glossary, query: str, key: str, content: str) -> float:
    return glossary.coverage(glossary.units(query), glossary.concepts(key, content))


def test_fold_gives_one_form_to_spelling_and_inflection_variants() -> None:
    assert fold("memorise") == fold("memorize") == fold("memorized") == fold("memorising")
    assert fold("studies") == fold("studied") == fold("study")
    assert fold("colour") == fold("color")
    assert fold("planning") == fold("plan")


def test_inflected_forms_of_a_verb_ending_in_ly_fold_to_one_form() -> None:
    assert fold("apply") == fold("applying") == fold("applied") == fold("applies")
    assert fold("family") == fold("families")
    assert fold("quickly") == "quick"


def test_an_english_query_covers_a_chinese_memory_through_the_dictionary() -> None:
    assert _coverage(SMALL, "teaching assistant", "role", "我是生态学实验课的助教。") == 1.0


def test_a_chinese_query_covers_an_english_memory_through_the_dictionary() -> None:
    covered = _coverage(SMALL, "截止", "grant", "The deadline is the end of March.")

    assert covered == 1.0


def test_characters_no_dictionary_word_holds_keep_the_coverage_low() -> None:
    # 助教 (2 characters) matches; 当, 门, 课 are content the dictionary does not know.
    covered = _coverage(SMALL, "我当哪门课的助教", "ta_role", "I am a teaching assistant.")

    assert covered == pytest.approx(2 / 5)


def test_function_words_are_no_part_of_a_query() -> None:
    assert SMALL.units("什么时候") == ()


def test_an_unrelated_query_covers_nothing() -> None:
    assert _coverage(SMALL, "pizza toppings", "job", "我是后端工程师。") == 0.0
    assert _coverage(SMALL, "截止时间", "job", "我是后端工程师。") == 0.0


def test_long_terms_match_as_the_start_or_end_of_a_memory_word_short_ones_do_not() -> None:
    assert _coverage(SMALL, "vocabulary", "vocab_method", "每天一个单元。") == 1.0
    assert _coverage(SMALL, "statistics", "goal", "I want to understand biostatistics.") == 1.0
    assert _coverage(SMALL, "cat", "note", "I catalogue my books.") == 0.0


def test_a_term_many_headwords_gloss_counts_less_than_a_specific_one() -> None:
    glossary = Glossary(
        {
            "老家": english_terms("hometown; state"),
            "国家": english_terms("country; state"),
            "州": english_terms("state"),
            "截止": english_terms("deadline"),
        }
    )
    shared = _coverage(glossary, "老家", "note", "我研究国家政策。")  # "state" alone

    assert glossary.specificity("stat") < glossary.specificity("hometown") == 1.0
    assert _coverage(glossary, "老家", "home", "My hometown is Harbin.") == 1.0
    assert shared == pytest.approx(glossary.specificity("stat"))
    assert 0.0 < shared < 0.5


def test_characters_of_overlapping_dictionary_words_count_once() -> None:
    glossary = Glossary(
        {
            "本职": english_terms("one's job"),
            "职工": english_terms("staff; worker"),
            "工作": english_terms("work; job"),
        }
    )

    # 本职 / 职工 / 工作 overlap: four characters, all covered by a unit that matches "job".
    assert _coverage(glossary, "本职工作", "job", "我是后端工程师。") == pytest.approx(
        glossary.specificity("job")
    )


def test_without_a_dictionary_only_the_same_language_counts() -> None:
    empty = Glossary({})

    assert _coverage(empty, "teaching assistant", "role", "我是助教。") == 0.0
    assert _coverage(empty, "teaching assistant", "role", "I assist in teaching.") == 1.0


def test_the_bundled_dictionary_translates_both_ways() -> None:
    glossary = shared_glossary()

    assert glossary.warm_up()
    assert _coverage(glossary, "which course am I a teaching assistant for", "r", "我是助教") > 0
    assert _coverage(glossary, "基金申请书的截止时间", "grant", "The deadline is in May.") > 0


def _candidate(key: str, content: str) -> SearchRow:
    return search_row(key, content, updated_at=NOW)


def test_dictionary_evidence_raises_a_memory_with_a_vector() -> None:
    translated = _candidate("ta_role", "我在生态学实验课做助教。")
    unrelated = _candidate("job", "我是后端工程师。")
    scores = {translated.memory_id: 0.0, unrelated.memory_id: 0.01}
    pool = [unrelated, translated]
    query = Query.of("teaching assistant")
    evidence = Evidence(SMALL, query.normal, WEIGHTS.translated)

    ranked = FusedRanker(scores, evidence).rank(query, pool, now=NOW, min_relevance=0)
    without = FusedRanker(scores).rank(query, pool, now=NOW, min_relevance=0)

    assert [s.row for s in ranked] == [translated, unrelated]
    assert [s.row for s in without] == [unrelated, translated]


def test_dictionary_evidence_never_admits_a_memory_without_a_vector() -> None:
    translated = _candidate("ta_role", "我在生态学实验课做助教。")
    query = Query.of("teaching assistant")
    ranker = FusedRanker({}, Evidence(SMALL, query.normal, WEIGHTS.translated))

    assert ranker.rank(query, [translated], now=NOW, min_relevance=0) == []


@pytest.mark.parametrize(
    ("query", "key", "content"),
    [
        ("which course am I a teaching assistant for", "role", "我是生态学实验课的助教。"),
        ("基金申请书的截止时间", "grant", "The deadline for the grant proposal is in May."),
        ("我当哪门课的助教", "ta_role", "I am a teaching assistant for statistics."),
        ("老家在哪里", "home", "我的老家在哈尔滨。现在住在上海。"),
        ("statistics homework", "goal", "I want to understand biostatistics 统计学."),
    ],
)
def test_a_credit_narrowed_to_the_query_terms_equals_the_whole_memory_s(
    query: str, key: str, content: str
) -> None:
    glossary = shared_glossary()
    evidence = Evidence(glossary, Query.of(query).normal, WEIGHTS.translated)
    whole = glossary.coverage(evidence.units, glossary.concepts(key, content))

    assert evidence.credit(key, content) == pytest.approx(WEIGHTS.translated * whole)
    assert glossary.concepts(key, content, evidence.wanted).terms <= evidence.wanted


@pytest.mark.parametrize(
    "query",
    ["我当哪门课的助教", "老家在哪里", "statistics homework", "when is the deadline", "截止时间"],
)
def test_no_memory_gets_more_credit_than_the_query_s_most(query: str) -> None:
    """`Evidence.most` bounds every credit (the fusion and the dense pool stop on it), and is
    reached by a memory holding each unit's most specific term."""
    glossary = shared_glossary()
    evidence = Evidence(glossary, Query.of(query).normal, WEIGHTS.translated)
    memories = [
        ("ta_role", "I am a teaching assistant for statistics."),
        ("home", "我的老家在哈尔滨。现在住在上海。"),
        ("goal", "I want to understand biostatistics 统计学."),
        ("deadline", "The thesis deadline is in May; 截止时间是五月。"),
        ("unrelated", "Plays the violin on Sundays."),
    ]
    best = " ".join(terms[0][1] for _, _, terms in evidence.ranked if terms)
    most = evidence.credit("best", best)

    assert 0 < evidence.most <= evidence.weight == WEIGHTS.translated
    assert all(evidence.credit(key, content) <= evidence.most for key, content in memories)
    assert most == pytest.approx(evidence.most)


def test_a_query_with_an_unknown_unit_can_be_credited_less_than_the_whole_weight() -> None:
    evidence = Evidence(SMALL, "助教 嗯", WEIGHTS.translated)  # 嗯: no dictionary entry here

    assert 0 < evidence.most < evidence.weight
    assert evidence.credit("ta", "teaching assistant") == pytest.approx(evidence.most)
