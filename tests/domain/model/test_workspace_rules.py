"""Workspace content rules (section 11): teaching keeps no student details, research no project
rules; general statements and the user's own habits pass."""

# The cases are full-width and CJK text on purpose.
# ruff: noqa: RUF001

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.errors import InvalidInput
from domain.model.values import Scope
from domain.model.workspace_rules import (
    RULES,
    WORKSPACE_RULES,
    WorkspaceContentRefused,
    check_workspace_content,
    find_workspace_violation,
)

TEACHING_REFUSED: list[tuple[str, str]] = [
    ("学生张三数学不及格", "student_personal_info"),
    ("李四同学最近总是打架", "student_personal_info"),
    ("学生小明的父母离婚了", "student_personal_info"),
    ("王小红同学有多动症，上课要坐前排", "student_personal_info"),
    ("班上的刘洋这次期中考了58分", "student_personal_info"),
    ("学号 2023015 的学生家住朝阳区", "student_personal_info"),
    ("学生：陈某，过敏体质", "student_personal_info"),
    ("my student Tom has ADHD", "student_personal_info"),
    ("Tom, one of my students, failed the exam", "student_personal_info"),
    ("A student named Lucy was caught cheating", "student_personal_info"),
    ("Maria in my class lives with a foster family", "student_personal_info"),
    ("student #12 was suspended last week", "student_personal_info"),
    ("Remember: pupil Jack is dyslexic.", "student_personal_info"),
    ("三年二班的期中平均分是78分", "class_records"),
    ("初二（3）班的及格率只有六成", "class_records"),
    ("class 5B average score is 71", "class_records"),
    ("Period 3 attendance has dropped", "class_records"),
]
TEACHING_ALLOWED = [
    "学生们更喜欢先看例子",
    "我的学生普遍喜欢小组讨论",
    "批改作业时先写评语再给分数",
    "我每周给学生布置10分钟的口语练习",
    "学生常常不及格时我会先鼓励",
    "my students like group work",
    "I prefer short feedback on student essays",
    "Also, my students' grades improved when I used examples",
    "Everyone in my class likes quizzes",
    "I explain fractions with pizza slices",
]
RESEARCH_REFUSED = [
    "本项目的所有实验必须使用固定随机种子 42",
    "该课题的数据一律存放在共享盘",
    "Alpha项目的数据只能存放在NAS上",
    "项目规范：代码提交前必须通过评审",
    "课题组规定每周一开组会",
    "For project Phoenix always use the v2 dataset",
    "All experiments in this project must run on the cluster",
    "In the Phoenix project we never use p-values",
    "Our lab policy: never share raw data",
    "Project rules: one branch per experiment.",
]
RESEARCH_ALLOWED = [
    "我偏好用 R 做统计分析",
    "写论文时使用 APA 引用格式",
    "我做项目时习惯先写文献综述",
    "我在项目中习惯先写文献综述",
    "I always use Python for my projects",
    "I prefer to pre-register my studies",
    "I always start the project with a literature review",
    "I always study English in the morning",
    "I never use pie charts",
]


@pytest.mark.parametrize(("text", "rule"), TEACHING_REFUSED)
def test_teaching_refuses_student_details_and_class_records(text: str, rule: str) -> None:
    match = find_workspace_violation("teaching", text)

    assert match is not None and (match.workspace, match.rule) == ("teaching", rule)


@pytest.mark.parametrize("text", TEACHING_ALLOWED)
def test_teaching_keeps_the_teachers_own_habits_and_general_statements(text: str) -> None:
    assert find_workspace_violation("teaching", text) is None


@pytest.mark.parametrize("text", RESEARCH_REFUSED)
def test_research_refuses_rules_of_a_specific_project(text: str) -> None:
    match = find_workspace_violation("research", text)

    assert match is not None and match.rule == "project_rule"


@pytest.mark.parametrize("text", RESEARCH_ALLOWED)
def test_research_keeps_personal_research_habits(text: str) -> None:
    assert find_workspace_violation("research", text) is None


@pytest.mark.parametrize("text", [t for t, _ in TEACHING_REFUSED] + RESEARCH_REFUSED)
def test_learning_global_and_unknown_workspaces_have_no_content_rule(text: str) -> None:
    assert find_workspace_violation("learning", text) is None
    assert find_workspace_violation(None, text) is None
    assert find_workspace_violation("kitchen", text) is None
    check_workspace_content(Scope.global_(), text)  # no error: global has no rule


def test_the_rules_of_one_workspace_do_not_apply_in_the_other() -> None:
    assert find_workspace_violation("research", "学生张三数学不及格") is None
    assert find_workspace_violation("teaching", "本项目的所有实验必须使用固定随机种子") is None


def test_a_rule_is_judged_within_one_sentence() -> None:
    assert find_workspace_violation("teaching", "My student Tom joined in May and has ADHD.")
    # Named in one sentence, described in the next: a documented limit of the rules.
    assert not find_workspace_violation("teaching", "My student Tom joined in May. He has ADHD.")
    assert not find_workspace_violation("teaching", "学生张三五月转来。\n他数学不及格")


def test_the_refusal_is_an_invalid_input_naming_the_rule_never_the_text() -> None:
    text = "学生张三数学不及格"

    with pytest.raises(WorkspaceContentRefused) as refused:
        check_workspace_content(Scope.workspace("teaching"), text)

    error = refused.value
    assert isinstance(error, InvalidInput)
    assert (error.field, error.workspace, error.rule) == (
        "content",
        "teaching",
        "student_personal_info",
    )
    assert "张三" not in str(error) and "不及格" not in str(error)
    assert "teaching memories may not store it" in str(error)


def test_a_workspace_name_can_be_checked_directly() -> None:
    # The tools check the token's workspace, whatever the scope of the memory.
    with pytest.raises(WorkspaceContentRefused):
        check_workspace_content("research", "For project Phoenix always use the v2 dataset")
    check_workspace_content("learning", "For project Phoenix always use the v2 dataset")


def test_zero_width_and_full_width_tricks_do_not_hide_a_refusal() -> None:
    assert find_workspace_violation("teaching", "学生\u200b张三数学不及格")
    assert find_workspace_violation("teaching", "ｍｙ ｓｔｕｄｅｎｔ Ｔｏｍ ｈａｓ ＡＤＨＤ")


def test_every_rule_has_a_stable_name_and_a_description_without_placeholders() -> None:
    assert {"student_personal_info", "class_records", "project_rule"} == RULES
    assert set(WORKSPACE_RULES) == {"learning", "teaching", "research"}
    for rules in WORKSPACE_RULES.values():
        for rule in rules:
            assert rule.description and "{" not in rule.description


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_any_text_is_judged_without_error(text: str) -> None:
    for workspace in WORKSPACE_RULES:
        match = find_workspace_violation(workspace, text)
        assert match is None or match.rule in RULES
