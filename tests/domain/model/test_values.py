"""Value rules of the model: scopes, keys, content, categories and times."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from domain.errors import InvalidInput, SensitiveContent
from domain.model.values import (
    CATEGORIES,
    MAX_CONTENT_CHARS,
    MAX_KEY_CHARS,
    WORKSPACES,
    Scope,
    check_category,
    check_content,
    check_key,
    check_time,
)

NOW = datetime(2025, 1, 15, 12, 0, tzinfo=UTC)


# -- Scope -----------------------------------------------------------------------------------


def test_the_global_scope_has_no_workspace() -> None:
    scope = Scope.global_()

    assert (scope.scope_type, scope.workspace_type) == ("global", None)
    assert scope.label() == "global"


@pytest.mark.parametrize("workspace", WORKSPACES)
def test_a_workspace_scope_names_one_of_the_workspaces(workspace: str) -> None:
    scope = Scope.workspace(workspace)

    assert (scope.scope_type, scope.workspace_type) == ("workspace", workspace)
    assert scope.label() == f"workspace:{workspace}"


def test_the_workspaces_are_learning_teaching_and_research() -> None:
    assert set(WORKSPACES) == {"learning", "teaching", "research"}


@pytest.mark.parametrize("workspace", ["learning", ""])
def test_a_global_scope_with_a_workspace_is_invalid(workspace: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        Scope("global", workspace)

    assert raised.value.field == "workspace_type"


@pytest.mark.parametrize("workspace", [None, "coding", "Learning", ""])
def test_a_workspace_scope_without_a_known_workspace_is_invalid(workspace: str | None) -> None:
    with pytest.raises(InvalidInput) as raised:
        Scope("workspace", workspace)

    assert raised.value.field == "workspace_type"


@pytest.mark.parametrize("scope_type", ["project", "Global", "", "workspace:learning"])
def test_an_unknown_scope_type_is_invalid(scope_type: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        Scope(scope_type, None)

    assert raised.value.field == "scope_type"


def test_scopes_with_the_same_fields_are_equal() -> None:
    assert Scope("workspace", "research") == Scope.workspace("research")
    assert Scope("global") == Scope.global_()
    assert Scope.global_() != Scope.workspace("research")


# -- check_key -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "normalised"),
    [
        ("favourite_drink", "favourite_drink"),
        ("  Favourite Drink ", "favourite_drink"),
        ("Tea-Time.Pref", "tea_time_pref"),
        ("ＴＥＡ", "tea"),  # noqa: RUF001 (full width on purpose)
        ("a__b", "a_b"),
        ("_edge_", "edge"),
        ("喜欢的饮料", "喜欢的饮料"),
    ],
)
def test_a_key_is_normalised(key: str, normalised: str) -> None:
    assert check_key(key) == normalised


@pytest.mark.parametrize("key", ["", "   ", "\t\n"])
def test_an_empty_key_is_invalid(key: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        check_key(key)

    assert raised.value.field == "memory_key"


@pytest.mark.parametrize("key", ["a!b", "drink?", "a/b", "__", "a\x00b", "emoji_☕"])
def test_a_key_with_other_than_letters_digits_and_underscores_is_invalid(key: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        check_key(key)

    assert raised.value.field == "memory_key"
    assert not isinstance(raised.value, SensitiveContent)


@pytest.mark.parametrize(
    "key",
    [
        "t\u0435\u0430",  # t + Cyrillic U+0435, U+0430: looks like "tea"
        "favourite_t\u0435a",  # one mixed word is enough
        "\u0440ython",  # Cyrillic U+0440
        "caf\u03b5",  # Greek U+03B5
        "\u0442ea",  # Cyrillic U+0442
        "\u0442\u03b5\u0430",  # Cyrillic and Greek
        "T\u0415A",  # upper case look-alikes, case-folded first
    ],
)
def test_a_key_word_mixing_latin_cyrillic_or_greek_is_refused(key: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        check_key(key)

    assert raised.value.field == "memory_key"
    assert "mixes Latin with Cyrillic or Greek" in raised.value.message


@pytest.mark.parametrize(
    ("key", "normalised"),
    [
        ("\u0447\u0430\u0439", "\u0447\u0430\u0439"),  # чай
        ("\u044f\u0437\u044b\u043a_\u043e\u0442\u0432\u0435\u0442\u0430", None),
        ("tea_\u0447\u0430\u0439", "tea_\u0447\u0430\u0439"),  # one script per word
        ("\u03ba\u03b1\u03c6\u03ad", "\u03ba\u03b1\u03c6\u03ad"),  # καφέ
        ("caf\u00e9", "caf\u00e9"),  # Latin with a diacritic
        ("python_3\u5b66\u4e60", "python_3\u5b66\u4e60"),  # Latin and Han mix freely
    ],
)
def test_a_key_word_in_one_script_is_kept(key: str, normalised: str | None) -> None:
    assert check_key(key) == (normalised or key)


def test_a_key_of_the_maximum_length_is_valid() -> None:
    assert check_key("k" * MAX_KEY_CHARS) == "k" * MAX_KEY_CHARS


def test_an_over_long_key_is_invalid() -> None:
    with pytest.raises(InvalidInput) as raised:
        check_key("k" * (MAX_KEY_CHARS + 1))

    assert raised.value.field == "memory_key"
    assert str(MAX_KEY_CHARS) in raised.value.message


def test_a_key_that_is_not_a_string_is_invalid() -> None:
    with pytest.raises(InvalidInput) as raised:
        check_key(42)  # type: ignore[arg-type]

    assert raised.value.field == "memory_key"


def test_a_key_holding_a_secret_is_refused() -> None:
    with pytest.raises(SensitiveContent) as raised:
        check_key("password is hunter2")

    assert raised.value.field == "memory_key"
    assert raised.value.kind == "password"


# -- check_content ---------------------------------------------------------------------------


def test_valid_content_is_returned_cleaned() -> None:
    assert check_content("  Likes tea.  \r\n\r\n\r\n\r\nAnd coffee.  ") == (
        "Likes tea.\n\nAnd coffee."
    )


@pytest.mark.parametrize("content", ["", "   ", "\n\t\r\n", "\u0007"])
def test_empty_content_is_invalid(content: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        check_content(content)

    assert raised.value.field == "content"


def test_content_that_is_not_a_string_is_invalid() -> None:
    with pytest.raises(InvalidInput) as raised:
        check_content(None)  # type: ignore[arg-type]

    assert raised.value.field == "content"


def test_content_of_the_maximum_length_is_valid() -> None:
    assert len(check_content("a" * MAX_CONTENT_CHARS)) == MAX_CONTENT_CHARS


def test_content_over_1000_characters_is_invalid() -> None:
    assert MAX_CONTENT_CHARS == 1000

    with pytest.raises(InvalidInput) as raised:
        check_content("a" * (MAX_CONTENT_CHARS + 1))

    assert raised.value.field == "content"


def test_the_length_limit_counts_the_cleaned_content() -> None:
    assert check_content("a" * MAX_CONTENT_CHARS + "   \n  ") == "a" * MAX_CONTENT_CHARS


def test_content_with_a_nul_character_is_invalid() -> None:
    with pytest.raises(InvalidInput) as raised:
        check_content("Likes\x00 tea.")

    assert raised.value.field == "content"


@pytest.mark.parametrize(
    ("content", "kind"),
    [
        ("my password is hunter2", "password"),
        ("我的密码是 hunter2abc", "password"),
        ("my PIN is 4821", "password"),
        ("use sk-abcdefghijklmnopqrstuvwx12345 for the API", "api_key"),
        ("db at postgres://app:s3cret@db.example.com/app", "credential"),
        ("card 4111 1111 1111 1111", "card_number"),
        ("verification code: 482913", "verification_code"),
        ("-----BEGIN OPENSSH PRIVATE KEY-----", "private_key"),
    ],
)
def test_content_holding_a_secret_is_refused_with_its_kind(content: str, kind: str) -> None:
    with pytest.raises(SensitiveContent) as raised:
        check_content(content)

    assert raised.value.field == "content"
    assert raised.value.kind == kind


def test_a_refused_secret_is_not_repeated_in_the_error() -> None:
    with pytest.raises(SensitiveContent) as raised:
        check_content("my password is hunter2")

    assert "hunter2" not in str(raised.value)


def test_sensitive_content_is_invalid_input() -> None:
    with pytest.raises(InvalidInput):
        check_content("my password is hunter2")


@pytest.mark.parametrize(
    "content",
    [
        "My password is strong and I change it often.",
        "Prefers short answers about tokens and passwords in general.",
        "Lives in Berlin since 2019.",
    ],
)
def test_talk_about_secrets_is_not_a_secret(content: str) -> None:
    assert check_content(content) == content


# -- check_category --------------------------------------------------------------------------


@pytest.mark.parametrize("category", CATEGORIES)
def test_a_known_category_is_valid(category: str) -> None:
    assert check_category(category) == category


@pytest.mark.parametrize("category", ["", "Preference", "secret", "hobby"])
def test_an_unknown_category_is_invalid(category: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        check_category(category)

    assert raised.value.field == "category"


# -- check_time ------------------------------------------------------------------------------


@pytest.mark.parametrize("future", [True, False])
def test_no_time_is_valid(future: bool) -> None:
    check_time("expires_at", None, now=NOW, future=future)


@pytest.mark.parametrize("field", ["review_after", "expires_at"])
def test_a_naive_time_is_invalid(field: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        check_time(field, datetime(2030, 1, 1, 12, 0), now=NOW, future=False)

    assert raised.value.field == field


def test_an_aware_time_in_another_zone_is_valid() -> None:
    tokyo = timezone(timedelta(hours=9))

    check_time("expires_at", datetime(2025, 1, 16, 9, 0, tzinfo=tokyo), now=NOW, future=True)


def test_an_expiry_in_the_future_is_valid() -> None:
    check_time("expires_at", NOW + timedelta(seconds=1), now=NOW, future=True)


@pytest.mark.parametrize("offset", [timedelta(0), timedelta(seconds=-1), timedelta(days=-30)])
def test_an_expiry_that_is_not_in_the_future_is_invalid(offset: timedelta) -> None:
    with pytest.raises(InvalidInput) as raised:
        check_time("expires_at", NOW + offset, now=NOW, future=True)

    assert raised.value.field == "expires_at"


def test_a_review_date_in_the_past_is_valid() -> None:
    check_time("review_after", NOW - timedelta(days=30), now=NOW, future=False)
