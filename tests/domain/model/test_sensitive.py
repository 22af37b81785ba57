"""The sensitive-content guard: secrets are refused, ordinary memories pass (section 15)."""

# The cases are full-width and CJK text on purpose.
# ruff: noqa: RUF001

from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.model import sensitive
from domain.model.sensitive import SENSITIVE_KINDS, SensitiveMatch, find_sensitive
from domain.model.sensitive_rules import RULES

_JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    ".eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIn0"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
_SSH_PUBLIC_KEY = (
    "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC7vbqajDhA3kXZk0Q1mhOLnFa1s5Bz9tP4oEw2yLm8iRqK"
    "fX0d9s8Zq1o2Hk3pE7W bob@laptop"
)

SECRETS: list[tuple[str, str]] = [
    # password
    ("my password is hunter2", "password"),
    ("My Password: correct-horse-battery", "password"),
    ("password = Tr0ub4dor&3", "password"),
    ("pwd: s3cret!", "password"),
    ("my passcode is 8841", "password"),
    ("the passphrase is 'blue whale 42'", "password"),
    ("The password for my wifi is abc12345", "password"),
    ("my PIN is 4821", "password"),
    ("密码是 abc123", "password"),
    ("我的邮箱密码：Abc@2024", "password"),
    ("登录密码为qwerty123", "password"),
    ("wifi密码 12345678", "password"),
    ("我的password是hunter2", "password"),
    ("支付密码 888888", "password"),
    ("ＱＱ密码是ａｂｃ１２３", "password"),
    ("邮箱授权码是 abcdefghijklmnop", "password"),
    # verification_code
    ("验证码 123456", "verification_code"),
    ("验证码是：8842,五分钟内有效", "verification_code"),
    ("短信校验码 902134", "verification_code"),
    ("OTP is 482913", "verification_code"),
    ("otp: 482913", "verification_code"),
    ("your verification code: 55A21B", "verification_code"),
    ("2FA code 731905", "verification_code"),
    # api_key
    ("sk-abcdefghijklmnopqrstuvwxyz123456", "api_key"),
    ("use sk-proj-Ab3dEfGhIjKlMnOpQrStUvWx for the demo", "api_key"),
    ("AKIAIOSFODNN7EXAMPLE", "api_key"),
    ("ghp_" + "a1B2" * 9, "api_key"),
    ("gho_" + "Z9y8" * 9, "api_key"),
    ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstu", "api_key"),
    ("xoxb-123456789012-abcdefABCDEF", "api_key"),
    ("AIzaSyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe", "api_key"),
    ("api key: 9f8e7d6c5b4a39281716abcd", "api_key"),
    ("我的API密钥是 Ab12Cd34Ef56Gh78", "api_key"),
    ("client_secret=Qm9v2x8LkP3nW7rT5yZ1", "api_key"),
    # token
    (_JWT, "token"),
    ("Authorization: Bearer abcDEF1234567890xyzXYZ", "token"),
    ("token: a8F3kL9qZx2Wm4Pn7Rt", "token"),
    ("my refresh token is 1a2b3c4d5e6f7g8h", "token"),
    ("access_token=ya29a0AfH6SMBx3q7Lk", "token"),
    ("访问令牌是 Zx81Lm02Qw93Er74", "token"),
    # private_key
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7", "private_key"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----", "private_key"),
    ("-----BEGIN PRIVATE KEY-----", "private_key"),
    ("-----BEGIN PGP PRIVATE KEY BLOCK-----", "private_key"),
    # session_id
    ("session id: 8f14e45fceea167a5a36dedd4bea2543", "session_id"),
    ("sessionid=abc123def456", "session_id"),
    ("JSESSIONID=1A2B3C4D5E6F7A8B", "session_id"),
    ("Cookie: sid=s%3Aabc123", "session_id"),
    ("会话ID是 a1b2c3d4e5f6", "session_id"),
    # card_number
    ("4111 1111 1111 1111", "card_number"),
    ("my card is 4111-1111-1111-1111", "card_number"),
    ("5500000000000004", "card_number"),
    ("Amex 3782 822463 10005", "card_number"),
    ("卡号 6222 0212 3456 7894 有效期明年", "card_number"),
    ("4111111111111111 12/25", "card_number"),
    # credential
    ("user: bob pass: x", "credential"),
    ("username: alice, password: Tr0ub4dor", "credential"),
    ("用户名：bob 密码：abc123", "credential"),
    ("postgres://u:p@host/db", "credential"),
    ("mongodb+srv://admin:S3cr3t@cluster0.example.net", "credential"),
    ("凭据是 bob/hunter2", "credential"),
    ("credentials: admin/admin123", "credential"),
    ("私钥是 5Kb8kLf9zgWQnogidDA76MzPL6TsZZY36hWXMssSzNydYXYB9KF", "credential"),
    ("助记词是 abandon ability able about above absent", "credential"),
    # bank_account (payment secrets)
    ("cvv 123", "bank_account"),
    ("CVV: 4821", "bank_account"),
    ("安全码 321", "bank_account"),
    ("信用卡安全码是 987", "bank_account"),
    ("IBAN DE89 3704 0044 0532 0130 00", "bank_account"),
    ("GB82WEST12345698765432", "bank_account"),
    ("bank account number: 12345678901", "bank_account"),
    ("银行账号:6222021234567890123", "bank_account"),
]

BENIGN: list[str] = [
    "I prefer examples before definitions",
    "回复代码时优先使用 Python",
    "我更喜欢先看例子再看定义。",
    "我准备参加明年的研究生考试",
    "工作日每天只能学习一小时",
    "Use APA citation style",
    "I study 1 hour a day",
    "I was born in 2024",
    "我的目标是在 2025 年通过考试",
    "每周学习 3 次,每次 45 分钟",
    "I want to learn how password hashing works",
    "I forgot my password",
    "my password is strong",
    "My password manager is 1Password",
    "Passwords should be at least 12 characters",
    "password: 8 characters minimum",
    "请提醒我每三个月修改一次密码",
    "密码学是我最喜欢的课",
    "密码是什么意思?",
    "密码为空时会报错",
    "my token budget is 600 tokens",
    "token limit: 4000",
    "Bearer tokens confuse me",
    "I use an access token for GitHub",
    "令牌桶算法很有意思",
    "Session recordings help me learn",
    "JSESSIONID cookies are used by Tomcat",
    "Cookie policy: accept all",
    "I like chocolate cookies",
    "I got a verification code yesterday",
    "验证码总是收不到",
    "OTP 2024 conference in Houston",
    "my api key is stored in the vault",
    "The private key is stored safely",
    "credentials are required for the lab",
    "I want a PIN code reset",
    "The CVV is 3 digits",
    "I am taking CSC 148 this term",
    "I use scikit-learn, also written sk-learn",
    _SSH_PUBLIC_KEY,
    "Call me at +86 138 0013 8000",
    "我的手机号是 13800138000",
    "ISBN 978-3-16-148410-0",
    "My student ID is 2023123456",
    "Order 4111111111111112 was late",
    "Read chapters 1-12 by 2025-06-30",
    "https://example.com:8080/docs",
    "我的用户名是 bob",
    "pwd: /home/me/projects",
    "安全第一,不要把密码告诉别人",
]


@pytest.mark.parametrize(("text", "kind"), SECRETS)
def test_a_secret_is_found_with_its_kind(text: str, kind: str) -> None:
    match = find_sensitive(text)
    assert match is not None
    assert match.kind == kind


@pytest.mark.parametrize("text", BENIGN)
def test_an_ordinary_memory_passes(text: str) -> None:
    assert find_sensitive(text) is None


@pytest.mark.parametrize(("text", "kind"), SECRETS)
def test_the_description_never_repeats_the_secret(text: str, kind: str) -> None:
    match = find_sensitive(text)
    assert match is not None
    assert match.description
    # Descriptions are fixed phrases of plain words, so they cannot echo the secret.
    assert all(c.isalpha() or c in " ()/-" for c in match.description)


def test_every_kind_is_covered_by_a_case() -> None:
    assert {kind for _, kind in SECRETS} == SENSITIVE_KINDS


@pytest.mark.parametrize(
    "text",
    ["my pass\u200bword is hunter2", "ｐａｓｓｗｏｒｄ：ｈｕｎｔｅｒ２", "PASSWORD IS HUNTER2"],
)
def test_disguised_keywords_are_still_found(text: str) -> None:
    assert find_sensitive(text) == SensitiveMatch("password", "a password")


def test_a_secret_after_a_harmless_mention_is_found() -> None:
    text = "I want to learn password hashing. By the way my password is hunter2"
    match = find_sensitive(text)
    assert match is not None
    assert match.kind == "password"


@pytest.mark.parametrize(
    "digits",
    ["4111111111111111", "5500000000000004", "378282246310005", "6011111111111117"],
)
def test_a_card_number_needs_a_valid_luhn_check_digit(digits: str) -> None:
    broken = digits[:-1] + str((int(digits[-1]) + 1) % 10)
    assert find_sensitive(digits) is not None
    assert find_sensitive(broken) is None


def test_an_iban_needs_valid_check_digits() -> None:
    assert find_sensitive("DE89370400440532013000") is not None
    assert find_sensitive("DE88370400440532013000") is None


def test_a_masked_connection_string_passes() -> None:
    assert find_sensitive("postgres://app:****@db.internal/memledger") is None


@settings(max_examples=500, database=None, deadline=None)
@given(st.text(max_size=200))
def test_find_sensitive_never_raises(text: str) -> None:
    result = find_sensitive(text)
    assert result is None or result.kind in SENSITIVE_KINDS


@settings(max_examples=300, database=None, deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from(list("密码验证是为:= 0123456789abcXYZ-_./@+ \n")),
        max_size=120,
    )
)
def test_find_sensitive_never_raises_on_keyword_soup(text: str) -> None:
    result = find_sensitive(text)
    assert result is None or result.kind in SENSITIVE_KINDS


# -- the keyword gates only skip scans that could not match ------------------------------------


def scan_every_rule(text: str) -> SensitiveMatch | None:
    """find_sensitive without its gates: every rule scans the text."""
    prepared = sensitive._INVISIBLE.sub("", unicodedata.normalize("NFKC", text))
    for rule in RULES:
        for match in rule.pattern.finditer(prepared):
            if rule.check is None or rule.check(match):
                return SensitiveMatch(rule.kind, rule.description)
    return None


def test_every_character_matching_an_ascii_letter_regardless_of_case_is_folded() -> None:
    everything = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    letters = re.compile("[a-z]", re.IGNORECASE).findall(everything)
    others = {c for c in letters if not c.isascii()}
    assert others  # the fold table is needed at all
    for char in others:
        folded = char.translate(sensitive._FOLD)
        assert folded.isascii() and re.fullmatch(folded, char, re.IGNORECASE), char


def case_variants(text: str) -> list[str]:
    return [
        text,
        text.upper(),
        text.title(),
        text.swapcase(),
        text.replace("i", "\u0131").replace("I", "\u0130"),
        text.upper().replace("I", "\u0130"),
    ]


@pytest.mark.parametrize("text", [t for t, _ in SECRETS] + BENIGN)
def test_gated_and_full_scans_agree_on_every_case_variant(text: str) -> None:
    for variant in case_variants(text):
        assert find_sensitive(variant) == scan_every_rule(variant), variant


_GATE_WORDS = sorted({g for rule in RULES for g in rule.gate})
_PIECES = [
    *_GATE_WORDS,
    *(w.upper() for w in _GATE_WORDS),
    *(w.title() for w in _GATE_WORDS),
    "word", "number", "id", "details", "phrase", "code", "for my bank", "\u0131", "\u0130",
    ": ", " is ", "是", "=", " ", "\n", "'", "4111 1111 1111 1111", "DE89370400440532013000",
    "hunter2", "Ab12Cd34Ef56Gh78Ij90", "482913", "u:p@host", "-----", "_", "-", "1234",
]  # fmt: skip


@settings(max_examples=1500, database=None, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=10))
def test_gated_and_full_scans_agree_on_keyword_mixtures(pieces: list[str]) -> None:
    text = "".join(pieces)
    assert find_sensitive(text) == scan_every_rule(text)


@settings(max_examples=500, database=None, deadline=None)
@given(st.text(max_size=120))
def test_gated_and_full_scans_agree_on_any_text(text: str) -> None:
    assert find_sensitive(text) == scan_every_rule(text)
