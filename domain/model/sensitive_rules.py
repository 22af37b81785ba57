"""The rules of the sensitive-content guard, in the order they are tried (see `sensitive`)."""

# The rules match full-width and CJK text on purpose.

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from domain.model.sensitive_checks import (
    Check,
    account_number,
    card_run,
    char_classes,
    iban,
    one_time_code,
    random_value,
    session_value,
    worded_value,
)

__all__ = ["DIGIT", "RULES", "Rule"]


@dataclass(frozen=True)
class Rule:
    """One kind of secret: a pattern, an optional check of each match, and its keyword gate."""

    kind: str
    description: str
    pattern: re.Pattern[str]
    check: Check | None = None
    # Substrings one of which every match holds (lowercase when the pattern ignores case): a
    # text holding none of them is not scanned with this rule. Empty: always scanned.
    gate: tuple[str, ...] = ()


_I: Final = re.IGNORECASE

# Keyword rules: a keyword, a separator, then a value. `(?<![a-z])` rather than `\b`, because
# `\b` sees no boundary between a CJK character and an ASCII letter ("我的password是...").
_SEP: Final = (
    r"(?P<sep>\s*[:=#]\s*|\s+(?:is|was|are|were)(?:\s*:\s*|\s+)|\s*(?:是|为|為)\s*:?\s*|\s+)"
)
_STRONG_SEP: Final = r"(?P<sep>\s*[:=]\s*|\s+(?:is|was)(?:\s*:\s*|\s+)|\s*(?:是|为|為)\s*:?\s*)"
_OPEN_QUOTE: Final = "(?:[\"'`\u201c\u2018\u300c\u300e\u300a(<\\[]\\s*)?"
_VALUE: Final = _OPEN_QUOTE + r"(?P<value>[\x21-\x7e]+)"
_TOKEN_VALUE: Final = _OPEN_QUOTE + r"(?P<value>[A-Za-z0-9._~+/=-]+)"

# The gate of the rules that need an ASCII digit: not a keyword, looked for on its own.
DIGIT: Final = "[0-9]"


def _rule(
    kind: str,
    description: str,
    pattern: str,
    check: Check | None = None,
    flags: int = _I,
    *,
    gate: tuple[str, ...],
) -> Rule:
    if flags & _I and any(g != g.lower() for g in gate):
        raise ValueError(f"the gate of the {description!r} rule ignores case: write it lowercase")
    return Rule(kind, description, re.compile(pattern, flags), check, gate)


RULES: Final[tuple[Rule, ...]] = (
    _rule(
        "private_key",
        "a private key block",
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|PuTTY-User-Key-File-\d",
        flags=0,
        gate=("-----BEGIN ", "PuTTY-User-Key-File-"),
    ),
    _rule(
        "api_key",
        "an API key",
        r"(?<![A-Za-z0-9_-])sk-(?P<value>[A-Za-z0-9_-]{20,})",
        lambda m: char_classes(m.group("value")) >= 2,
        flags=0,
        gate=("sk-",),
    ),
    _rule(
        "api_key",
        "an API key",
        r"(?<![A-Za-z0-9_-])(?:"
        r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"
        r"|(?:AKIA|ASIA)[0-9A-Z]{16}(?![0-9A-Z])"
        r"|gh[pousr]_[A-Za-z0-9]{20,}"
        r"|github_pat_[A-Za-z0-9_]{20,}"
        r"|xox[baprs]-[A-Za-z0-9-]{10,}"
        r"|AIza[0-9A-Za-z_-]{30,}"
        r")",
        flags=0,
        gate=("k_live_", "k_test_", "AKIA", "ASIA", "gh", "github_pat_", "xox", "AIza"),
    ),
    _rule(
        "token",
        "a JSON Web Token",
        r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*",
        flags=0,
        gate=("eyJ",),
    ),
    _rule(
        "credential",
        "a connection string or URL holding a password",
        r"(?<![a-z0-9+.-])[a-z][a-z0-9+.-]{1,30}://[^\s/:@]+:(?P<value>[^\s/@]+)@[^\s/@]",
        lambda m: set(m.group("value")) != {"*"},
        gate=("://",),
    ),
    _rule(
        "credential",
        "a user name with its password",
        r"(?:(?<![a-z])(?:user(?:\s*name)?|login)|用户名|账号|帐号|账户)\s*(?:[:=]|是|为)\s*"
        r"[\x21-\x7e]+[\s\S]{0,20}?"
        r"(?:(?<![a-z])(?:pass(?:word)?|passwd|pwd)|密码|口令)(?P<sep>\s*(?:[:=]|是|为)\s*)"
        r"(?P<value>[\x21-\x7e]+)",
        worded_value(1),
        gate=("pass", "pwd", "密码", "口令"),
    ),
    _rule(
        "bank_account",
        "a card security code (CVV/CVC)",
        r"(?:(?<![a-z])(?:cvv2?|cvc2?|card\s+(?:security|verification)\s+(?:code|value)"
        r"|security\s+code)|安全码|(?:信用)?卡验证码|cvv码)"
        r"\s*(?:[:=#]|is|是|为)?\s*(?P<value>\d{3,4})(?!\d)"
        # "CSC 148" is a course code: these two need an explicit separator.
        r"|(?<![a-z])(?:csc|cvn)\s*(?:[:=]|\s+is\s+)\s*\d{3,4}(?!\d)",
        gate=("cvv", "cvc", "card", "security", "安全码", "验证码", "csc", "cvn"),
    ),
    _rule(
        "bank_account",
        "an IBAN",
        r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?(?![A-Za-z0-9])",
        iban,
        flags=re.ASCII,
        gate=(DIGIT,),
    ),
    _rule(
        "bank_account",
        "a bank account number",
        r"(?:(?<![a-z])(?:bank\s+account(?:\s+(?:number|no\.?|#))?|account\s+(?:number|no\.?|#)"
        r"|acct\.?\s*(?:number|no\.?|#)|routing\s+number)"
        r"|(?:银行|信用|储蓄|借记)卡(?:卡)?号|银行(?:账|帐)(?:号|户)|(?:收款|开户)(?:账|帐)(?:号|户))"
        r"\s*(?:[:=#]|is|是|为)?\s*(?P<value>\d(?:[ -]?\d){7,33})(?!\d)",
        account_number,
        gate=("account", "acct", "routing", "卡号", "银行", "收款", "开户"),
    ),
    _rule(
        "verification_code",
        "a one-time verification code",
        r"(?P<kw>(?<![a-z0-9])(?:t?otp|one[\s-]?time\s+(?:pass(?:word|code)|code|pin)"
        r"|(?:verification|confirmation|security|login|sign[\s-]?in|auth(?:entication)?|access"
        r"|sms|2fa|mfa|two[\s-]?factor)\s+code)"
        r"|验证码|校验码|动态码|动态密码|短信码|确认码|登录码|一次性密码)"
        r"(?P<sep>\s*[:=#]\s*|\s+(?:is|was)\s*:?\s*|\s*(?:是|为)\s*:?\s*|\s*)"
        r"(?P<value>[a-z0-9]{4,8})(?![a-z0-9])",
        one_time_code,
        gate=("otp", "time", "code", "码"),
    ),
    _rule(
        "password",
        "a PIN",
        r"(?<![a-z])pin(?:\s*(?:code|number)|码)?(?:\s*[:=]\s*|\s+is\s+|\s*(?:是|为)\s*)"
        r"(?P<value>\d{4,8})(?!\d)",
        gate=("pin",),
    ),
    _rule(
        "password",
        "a password",
        r"(?<![a-z])(?:password|passwd|passcode|pass\s?phrase|pin)\s+(?:for|of|on|to)"
        r"(?:\s+[^\s:=]{1,30}){1,3}?" + _STRONG_SEP + _VALUE,
        worded_value(3),
        gate=("pass", "pin"),
    ),
    _rule(
        "password",
        "a password",
        r"(?:(?<![a-z])(?:password|passwd|passcode|pass\s?phrase|pwd|pw(?=\s*[:=]))"
        r"|密码|密碼|口令|授权码)" + _SEP + _VALUE,
        worded_value(3),
        gate=("pass", "pw", "密码", "密碼", "口令", "授权码"),
    ),
    _rule(
        "session_id",
        "a session identifier",
        r"(?:(?<![a-z])(?:session[\s_-]?(?:id|key|token|cookie)|sessionid|sessid|jsessionid"
        r"|phpsessid|asp\.net_sessionid|connect\.sid)|会话\s*(?:id|标识|令牌|密钥))"
        r"(?:\s*[:=]\s*|\s+(?:is|was)\s+|\s*(?:是|为)\s*:?\s*)" + _TOKEN_VALUE,
        session_value,
        gate=("sess", "connect.sid", "会话"),
    ),
    _rule(
        "session_id",
        "a cookie value",
        r"(?<![a-z])(?:set-)?cookie\s*(?::|是|为)\s*(?P<value>[^\s=;:,]{1,64}=[^\s;,]{4,})",
        gate=("cookie",),
    ),
    _rule(
        "token",
        "a bearer token",
        r"(?<![a-z])bearer\s+" + _TOKEN_VALUE,
        random_value(16),
        gate=("bearer",),
    ),
    _rule(
        "token",
        "an access token",
        r"(?:(?<![a-z])(?:(?:access|refresh|auth|api|bot|oauth|id|personal\s+access|github"
        r"|gitlab|slack|discord|telegram|npm|pypi)[\s_-]?token)|(?:访问|刷新|身份)?令牌)"
        r"(?:\s*[:=]\s*|\s+(?:is|was)\s+|\s*(?:是|为)\s*:?\s*)" + _TOKEN_VALUE,
        random_value(12),
        gate=("token", "令牌"),
    ),
    _rule(
        "token",
        "a token",
        r"(?<![a-z])token(?:\s*[:=]\s*|\s+(?:is|was)\s+|\s*(?:是|为)\s*:?\s*)" + _TOKEN_VALUE,
        random_value(16),
        gate=("token",),
    ),
    _rule(
        "api_key",
        "an API key or client secret",
        r"(?:(?<![a-z])(?:api[\s_-]?(?:key|secret)|apikey|app[\s_-]?(?:key|secret)"
        r"|client[\s_-]?secret|secret[\s_-]?(?:access[\s_-]?)?key|access[\s_-]?key(?:[\s_-]?id)?)"
        r"|(?:api\s*)?(?:密钥|秘钥))"
        r"(?:\s*[:=]\s*|\s+(?:is|was)\s+|\s*(?:是|为)\s*:?\s*)" + _TOKEN_VALUE,
        random_value(16),
        gate=("key", "secret", "密钥", "秘钥"),
    ),
    _rule(
        "credential",
        "a private key",
        r"(?:(?<![a-z])private[\s_-]?key|私钥)"
        r"(?:\s*[:=]\s*|\s+(?:is|was)\s+|\s*(?:是|为)\s*:?\s*)" + _TOKEN_VALUE,
        random_value(8),
        gate=("private", "私钥"),
    ),
    _rule(
        "credential",
        "login credentials",
        r"(?:(?<![a-z])(?:credentials?|login\s+details|seed\s+phrase|recovery\s+phrase"
        r"|mnemonic(?:\s+phrase)?)|凭据|登录凭证|助记词)"
        r"(?P<sep>\s*[:=]\s*|\s+(?:is|are|was|were)\s+|\s*(?:是|为)\s*:?\s*)" + _VALUE,
        worded_value(3),
        gate=("credential", "login", "phrase", "mnemonic", "凭据", "凭证", "助记词"),
    ),
    _rule(
        "card_number",
        "a payment card number",
        r"(?<![A-Za-z0-9+])(?<![0-9][ .,-])(?>[0-9]+(?:[ -][0-9]+)*)(?![A-Za-z0-9])",
        card_run,
        flags=re.ASCII,
        gate=(DIGIT,),
    ),
)
