"""Profile rules: which profile fields a memory states, in Chinese and English."""

# The cases are full-width and CJK text on purpose.
# ruff: noqa: RUF001

from __future__ import annotations

import logging

import pytest

from domain.model.events import REDACTED
from projections.views import profile_rules
from projections.views.profile_rules import FIELDS, MemoryFacts, Rule, derive


def facts(content: str, category: str = "preference", key: str = "note") -> MemoryFacts:
    return MemoryFacts(memory_key=key, content=content, category=category)


DERIVED: list[tuple[str, str, dict[str, str]]] = [
    # explanation_preference
    ("我喜欢先看例子再理解定义。", "preference", {"explanation_preference": "example_first"}),
    ("先讲定义,再举例子", "preference", {"explanation_preference": "definition_first"}),
    ("例子放在前面讲", "preference", {"explanation_preference": "example_first"}),
    (
        "I prefer examples before definitions",
        "preference",
        {"explanation_preference": "example_first"},
    ),
    (
        "Start with the formal definition, please",
        "preference",
        {"explanation_preference": "definition_first"},
    ),
    (
        "Definitions after worked examples",
        "preference",
        {"explanation_preference": "example_first"},
    ),
    ("example-first", "preference", {"explanation_preference": "example_first"}),
    # preferred_programming_language
    ("我习惯用 Python 写代码", "preference", {"preferred_programming_language": "python"}),
    ("平时主要用Rust", "background", {"preferred_programming_language": "rust"}),
    ("最常用的编程语言是 C++", "preference", {"preferred_programming_language": "cpp"}),
    ("I like Python but not Java", "preference", {"preferred_programming_language": "python"}),
    (
        "My favourite language is TypeScript",
        "preference",
        {"preferred_programming_language": "typescript"},
    ),
    (
        "I usually write Go language services",
        "preference",
        {"preferred_programming_language": "go"},
    ),
    (
        "我喜欢用JavaScript写前端",
        "preference",
        {"preferred_programming_language": "javascript"},
    ),
    # response_language
    ("请用中文回答我", "preference", {"response_language": "zh"}),
    ("回答时请使用英文", "preference", {"response_language": "en"}),
    ("Please reply in English", "preference", {"response_language": "en"}),
    ("我喜欢用中文回答，不要英文", "preference", {"response_language": "zh"}),
    # citation_style
    ("论文引用用 APA 格式", "preference", {"citation_style": "apa"}),
    ("Use IEEE citation style for my papers", "constraint", {"citation_style": "ieee"}),
    ("参考文献按 GB/T 7714 格式", "constraint", {"citation_style": "gbt7714"}),
    # math_notation
    ("尽量少用数学公式", "preference", {"math_notation": "minimal"}),
    ("不要太多公式", "preference", {"math_notation": "minimal"}),
    ("Please use less math notation", "preference", {"math_notation": "minimal"}),
    ("I want rigorous mathematical proofs", "preference", {"math_notation": "formal"}),
    # daily_study_time
    ("工作日每天只能学习一小时", "constraint", {"daily_study_time": "1h_weekdays"}),
    ("周末每天学习两个半小时", "constraint", {"daily_study_time": "2.5h_weekends"}),
    ("每天复习二十分钟", "constraint", {"daily_study_time": "20min_daily"}),
    ("I can study 30 minutes a day", "constraint", {"daily_study_time": "30min_daily"}),
    (
        "Weekdays I study 1 hour, weekends 3 hours",
        "constraint",
        {"daily_study_time": "1h_weekdays,3h_weekends"},
    ),
    # major and expertise_level
    ("我的专业是计算机科学", "background", {"major": "computer_science"}),
    ("我是数学专业的学生", "profile", {"major": "mathematics"}),
    ("I majored in physics", "background", {"major": "physics"}),
    ("我是编程零基础", "background", {"expertise_level": "beginner"}),
    ("I'm an experienced developer", "profile", {"expertise_level": "advanced"}),
    # exam_goal
    ("准备明年考研", "goal", {"exam_goal": "postgraduate_entrance_exam"}),
    ("目标是雅思7分", "goal", {"exam_goal": "ielts"}),
    ("I am preparing for the TOEFL", "goal", {"exam_goal": "toefl"}),
    # several fields from one memory
    (
        "我的专业是计算机科学,请用中文回答",
        "profile",
        {"major": "computer_science", "response_language": "zh"},
    ),
]
"""(content, category, the fields derived): also the corpus of tests/projections/test_needles.py."""


@pytest.mark.parametrize(("content", "category", "expected"), DERIVED)
def test_rules_derive_fields(content: str, category: str, expected: dict[str, str]) -> None:
    assert derive(facts(content, category)) == expected


NOTHING: list[tuple[str, str]] = [
    ("tea, not coffee", "preference"),
    ("我喜欢猫", "preference"),
    ("green tea in the morning", "preference"),
    ("我不喜欢先看例子", "preference"),
    ("I don't like Python", "preference"),
    ("不要用英文回答", "preference"),
    ("我不是新手", "background"),
    ("我用过 Java", "background"),
    ("我学习很认真", "constraint"),  # a study word, no duration
    ("我的专业是海洋学", "background"),  # an unknown subject is not guessed
    ("IEEE member since 2019", "background"),  # no citation word
    ("The Python talk was good", "preference"),  # no liking next to the language
]


@pytest.mark.parametrize(("content", "category"), NOTHING)
def test_unrelated_or_negated_memories_give_nothing(content: str, category: str) -> None:
    assert derive(facts(content, category)) == {}


@pytest.mark.parametrize("category", ["fact", "project", "other"])
def test_categories_that_are_not_profile_like_give_nothing(category: str) -> None:
    assert derive(facts("我喜欢先看例子再理解定义", category)) == {}


def test_goal_memories_feed_only_the_exam_goal() -> None:
    assert derive(facts("准备考研,请用中文回答", "goal")) == {
        "exam_goal": "postgraduate_entrance_exam"
    }


def test_long_and_redacted_content_gives_nothing() -> None:
    assert derive(facts("我喜欢先看例子再理解定义" + "。" * 200)) == {}
    assert derive(facts(REDACTED)) == {}
    assert derive(MemoryFacts(REDACTED, "请用中文回答", "preference")) == {}


@pytest.mark.parametrize(
    ("key", "content", "expected"),
    [
        ("response_language", "中文", "zh"),
        ("response_language", "English", "en"),
        ("explanation_preference", "example_first", "example_first"),
        ("explanation_preference", "先讲定义", "definition_first"),
        ("preferred_programming_language", "Go", "go"),
        ("citation_style", "MLA", "mla"),
        ("daily_study_time", "每天两小时", "2h_daily"),
        ("daily_study_time", "90 minutes", "1.5h_daily"),
        ("major", "Marine Biology", "biology"),
        ("major", "海洋学", "海洋学"),  # an open field keeps an unknown short value
        ("exam_goal", "CET-6", "cet6"),
    ],
)
def test_a_key_naming_a_field_maps_its_short_value(key: str, content: str, expected: str) -> None:
    assert derive(facts(content, "profile", key=key))[key] == expected


def test_a_key_naming_a_closed_field_ignores_unknown_values() -> None:
    assert derive(facts("Klingon", "preference", key="response_language")) == {}


def test_the_exact_key_wins_over_the_text() -> None:
    fields = derive(facts("English (never 中文回答)", "preference", key="response_language"))
    assert fields == {"response_language": "en"}


def test_every_derived_field_is_a_known_field() -> None:
    fields = derive(facts("我的专业是计算机科学,工作日每天学习一小时,喜欢先看例子", "profile"))
    assert set(fields) <= set(FIELDS)
    assert len(fields) == 3


def test_a_failing_rule_is_logged_and_does_not_stop_the_others(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(memory: MemoryFacts, text: str) -> list[tuple[str, str]]:
        raise RuntimeError(f"cannot read {text}")

    monkeypatch.setattr(profile_rules, "RULES", (Rule("broken", broken), *profile_rules.RULES))
    with caplog.at_level(logging.ERROR, logger="projections.profile"):
        fields = derive(facts("我喜欢先看例子再理解定义,请用中文回答"))
    assert fields == {"explanation_preference": "example_first", "response_language": "zh"}
    assert [r.name for r in caplog.records] == ["projections.profile"]
    assert "broken" in caplog.text and "RuntimeError" in caplog.text
    assert "例子" not in caplog.text  # the content is personal: never logged


def test_a_rule_yielding_nonsense_is_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    def nonsense(memory: MemoryFacts, text: str) -> list[tuple[str, object]]:
        return [("shoe_size", "42"), ("major", 7), ("major", "x" * 100)]

    monkeypatch.setattr(profile_rules, "RULES", (Rule("nonsense", nonsense),))  # type: ignore[arg-type]
    assert derive(facts("我的专业是计算机科学", "background")) == {}


def test_rules_are_deterministic() -> None:
    memory = facts("Weekdays I study 1 hour, weekends 3 hours; reply in English", "constraint")
    assert len({tuple(sorted(derive(memory).items())) for _ in range(5)}) == 1
