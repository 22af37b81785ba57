"""The value checks of the sensitive-content rules: does a matched value look like a secret?"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

__all__ = [
    "Check",
    "account_number",
    "card_run",
    "char_classes",
    "iban",
    "one_time_code",
    "random_value",
    "session_value",
    "worded_value",
]

Check = Callable[[re.Match[str]], bool]
"""Decides whether a rule's match is a secret (True) or a harmless mention (False)."""

_DIGIT_GROUP_SEPARATOR: Final = re.compile("[ -]")
_TRIM: Final = "\"'`.,;:!?)]}>"
# English words that describe a secret rather than being one: "my password is strong".
_STOP_WORDS_TEXT: Final = """
    a an the not too very so really quite also still now always never usually just only and or
    but no none yes weak strong long short secure insecure safe unsafe hard easy simple complex
    complicated required needed optional mandatory important stored saved hashed encrypted salted
    expired expiring wrong incorrect correct invalid valid reset changed updated same different
    case being been in on at of for to from with by into my your his her their our its it this
    that these those what which where how why who whom something anything nothing everything
    unknown forgotten lost hidden private secret confidential personal sensitive set stuck
    missing empty blank managed kept generated random unique protected shared necessary
    here there see check use ask enter type change update remember forgot forget
    case-sensitive like about over under more less least most enough again
    one two three four five six eight ten twelve fifteen eighteen twenty twenty-four words
"""
_STOP_WORDS: Final = frozenset(_STOP_WORDS_TEXT.split())


def _trimmed(match: re.Match[str]) -> str:
    return match.group("value").rstrip(_TRIM).lstrip(_TRIM)


def char_classes(value: str) -> int:
    """How many of lowercase, uppercase and digits `value` mixes (0-3)."""
    return sum(
        (
            any(c.islower() for c in value),
            any(c.isupper() for c in value),
            any(c.isdigit() for c in value),
        )
    )


def random_value(min_len: int) -> Check:
    """A value that looks machine-made: long enough, mixing letter cases or letters and digits."""

    def check(match: re.Match[str]) -> bool:
        value = _trimmed(match)
        if len(value) < min_len or char_classes(value) < 2:
            return False
        # "text-embedding-3-small" mixes classes too; machine-made values carry more digits or
        # mix both cases over a longer stretch.
        digits = sum(c.isdigit() for c in value)
        mixed_case = any(c.isupper() for c in value) and any(c.islower() for c in value)
        return digits >= 2 or (mixed_case and len(value) >= 20)

    return check


def worded_value(min_len: int) -> Check:
    """A value that is not a descriptive word; after a bare space it must also hold a digit."""

    def check(match: re.Match[str]) -> bool:
        value = _trimmed(match)
        if len(value) < min_len or set(value) <= {"*", "\u2022"}:  # masked
            return False
        if value.startswith(("/", "~/")):  # `pwd` prints a directory
            return False
        if not match.group("sep").strip():
            return len(value) >= 4 and any(c.isdigit() for c in value)
        return value.lower() not in _STOP_WORDS

    return check


def session_value(match: re.Match[str]) -> bool:
    """A session id: 8+ characters mixing classes, or 10+ digits."""
    value = _trimmed(match)
    return len(value) >= 8 and (char_classes(value) >= 2 or (value.isdigit() and len(value) >= 10))


def one_time_code(match: re.Match[str]) -> bool:
    """A one-time code: holds a digit, and is not a bare year after an English keyword."""
    value = match.group("value")
    if not any(c.isdigit() for c in value):
        return False
    # "OTP 2024" is more likely a year than a code: English keywords need `is`/`:` or 6+ chars.
    return bool(match.group("sep").strip()) or not match.group("kw").isascii() or len(value) >= 6


def _digits(text: str) -> str:
    return "".join(c for c in text if c.isdigit())


def _luhn(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char)
        if index % 2 == 1:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def iban(match: re.Match[str]) -> bool:
    """An IBAN of a valid length whose check digits verify (mod 97)."""
    compact = match.group(0).replace(" ", "")
    if not 15 <= len(compact) <= 34:
        return False
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(c, 36)) for c in rearranged)) % 97 == 1


def account_number(match: re.Match[str]) -> bool:
    """A bank account number: 8 to 34 digits."""
    return 8 <= len(_digits(match.group("value"))) <= 34


def card_run(match: re.Match[str]) -> bool:
    """Any run of digit groups whose whole groups make 13-19 digits passing the card checks."""
    groups = _DIGIT_GROUP_SEPARATOR.split(match.group(0))
    for start in range(len(groups)):
        digits = ""
        for group in groups[start:]:
            digits += group
            if len(digits) > 19:
                break
            if len(digits) >= 13 and _is_card_number(digits):
                return True
    return False


def _is_card_number(digits: str) -> bool:
    return digits[0] in "23456" and len(set(digits)) > 1 and _luhn(digits)
