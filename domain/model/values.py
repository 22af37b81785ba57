"""Value rules of the model: scopes, categories, keys, content and times (sections 5, 7, 15)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal, get_args

from domain.errors import InvalidInput, SensitiveContent
from domain.model.cjk import CJK_TEXT
from domain.model.sensitive import find_sensitive

__all__ = [
    "CATEGORIES",
    "CHANGED_VIA",
    "ID_PATTERN",
    "KEY_MAX_CHARS",
    "MAX_CONTENT_CHARS",
    "MAX_ID_CHARS",
    "MAX_KEY_CHARS",
    "SOURCE_TYPES",
    "UNSET",
    "WORKSPACES",
    "Category",
    "Scope",
    "Workspace",
    "check_category",
    "check_changed_via",
    "check_content",
    "check_id",
    "check_key",
    "check_origin",
    "check_time",
    "clean_content",
    "is_valid_key",
    "mixed_script_word",
    "normalise_content",
    "normalise_key",
]

KEY_MAX_CHARS: Final = 64

_INVISIBLE: Final = re.compile("[\u00ad\u200b\u2060\ufeff]")
_WHITESPACE: Final = re.compile(r"\s+")
# CJK text is written without spaces, so a space next to a CJK character carries no meaning:
# "使用 Python" and "使用Python", "例子 ,也" and "例子,也" are the same content.
_SPACE_BY_CJK: Final = re.compile(f"(?<=[{CJK_TEXT}]) | (?=[{CJK_TEXT}])")
_TRAILING: Final = " .!?;\u3002"
# CJK punctuation and dashes that NFKC leaves alone, mapped to the ASCII variants (escaped here
# because several are visually confusable with ASCII).
_PUNCT_MAP: Final = str.maketrans(
    {
        "\u3002": ".",  # ideographic full stop
        "\u3001": ",",  # ideographic comma
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u300c": '"',
        "\u300d": '"',
        "\u300e": '"',
        "\u300f": '"',
        "\u2018": "'",
        "\u2019": "'",
        "\u3010": "[",
        "\u3011": "]",
        "\u3014": "(",
        "\u3015": ")",
        "\u2010": "-",
        "\u2011": "-",
        "\u2013": "-",
        "\u2014": "-",
        "\u2015": "-",
        "\u2212": "-",
    }
)

_KEY_SEPARATORS: Final = re.compile(r"[\s\-.\u2010-\u2015\u2212\u30fb\u00b7]+")
_UNDERSCORES: Final = re.compile(r"_+")

_NEWLINES: Final = re.compile("\r\n|[\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")
# C0/C1 controls other than tab and newline, and lone surrogates: invisible or unstorable.
_UNSTORABLE: Final = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x84\x86-\x9f\ud800-\udfff]")
_TRAILING_SPACE: Final = re.compile(r"[^\S\n]+$", re.MULTILINE)
_BLANK_RUN: Final = re.compile(r"\n{3,}")

# NFKC and casefold do not commute for a handful of code points; a few passes reach a fixed point.
_MAX_PASSES: Final = 4


def normalise_content(text: str) -> str:
    """Return the canonical form used to decide whether two contents are the same."""
    return _fixed_point(_normalise_content_once, text)


def _normalise_content_once(text: str) -> str:
    folded = unicodedata.normalize("NFKC", text).casefold()
    folded = unicodedata.normalize("NFKC", folded).translate(_PUNCT_MAP)
    folded = _INVISIBLE.sub("", folded)
    folded = _WHITESPACE.sub(" ", folded).strip()
    folded = _SPACE_BY_CJK.sub("", folded)
    return folded.rstrip(_TRAILING)


def normalise_key(key: str) -> str:
    """Return the canonical memory key; check the result with `is_valid_key`."""
    return _fixed_point(_normalise_key_once, key)


def _normalise_key_once(key: str) -> str:
    folded = unicodedata.normalize("NFKC", key).casefold()
    folded = _INVISIBLE.sub("", unicodedata.normalize("NFKC", folded)).strip()
    folded = _KEY_SEPARATORS.sub("_", folded)
    return _UNDERSCORES.sub("_", folded).strip("_")


def _fixed_point(once: Callable[[str], str], text: str) -> str:
    """`once` applied until the text stops changing (at most `_MAX_PASSES` times)."""
    if text.isascii():  # NFKC and casefold change no ASCII text: one pass is the fixed point
        return once(text)
    current = text
    for _ in range(_MAX_PASSES):
        following = once(current)
        if following == current:
            break
        current = following
    return current


def is_valid_key(normalised: str) -> bool:
    """True for a canonical key of 1..64 letters (any script), digits and single inner `_`."""
    if not 1 <= len(normalised) <= KEY_MAX_CHARS or normalise_key(normalised) != normalised:
        return False
    for index, char in enumerate(normalised):
        if char == "_":
            continue
        category = unicodedata.category(char)
        if category[0] == "L" or category == "Nd":
            continue
        # Combining marks belong to the letter before them (Devanagari, Thai, ...).
        if category in ("Mn", "Mc") and index > 0 and normalised[index - 1] != "_":
            continue
        return False
    return True


def clean_content(text: str) -> str:
    """Return the form to store: NFC, `\\n` newlines, no trailing spaces, at most one blank line."""
    cleaned = _NEWLINES.sub("\n", text)
    cleaned = _UNSTORABLE.sub("", cleaned)
    cleaned = unicodedata.normalize("NFC", cleaned)
    cleaned = _TRAILING_SPACE.sub("", cleaned)
    cleaned = _BLANK_RUN.sub("\n\n", cleaned)
    return cleaned.strip()


Workspace = Literal["learning", "teaching", "research"]
"""A workspace type: the one definition of the workspaces (the API's schemas use it too)."""
WORKSPACES: Final[tuple[Workspace, ...]] = get_args(Workspace)
Category = Literal[
    "preference", "goal", "constraint", "background", "fact", "profile", "project", "other"
]
"""A memory category: the one definition of the categories (the API's schemas use it too)."""
CATEGORIES: Final[tuple[Category, ...]] = get_args(Category)
SOURCE_TYPES: Final = ("explicit", "confirmed")
CHANGED_VIA: Final = ("user_api", "agent_tool", "candidate", "migration")
MAX_CONTENT_CHARS: Final = 1000
MAX_KEY_CHARS: Final = 64
MAX_ID_CHARS: Final = 200
ID_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9._:@|+=~/-]{0,199}$"
"""Identifiers stored in clear (a token's `sub`, a conversation id): 1 to 200 ASCII letters,
digits and `. _ : @ | + = ~ / -`, starting with a letter or digit. No spaces, no control
characters, nothing a database, a log line or a terminal could read differently."""
_ID: Final = re.compile(ID_PATTERN)


@dataclass(frozen=True, slots=True)
class Scope:
    """Where a memory is visible: `global`, or one workspace (learning/teaching/research)."""

    scope_type: str
    workspace_type: str | None = None

    def __post_init__(self) -> None:
        if self.scope_type == "global":
            if self.workspace_type is not None:
                raise InvalidInput("workspace_type", "must be null for global scope")
        elif self.scope_type == "workspace":
            if self.workspace_type not in WORKSPACES:
                raise InvalidInput(
                    "workspace_type", f"must be one of {', '.join(WORKSPACES)} for workspace scope"
                )
        else:
            raise InvalidInput("scope_type", "must be 'global' or 'workspace'")

    @classmethod
    def global_(cls) -> Scope:
        """The global scope."""
        return cls("global")

    @classmethod
    def workspace(cls, workspace_type: str) -> Scope:
        """The scope of one workspace."""
        return cls("workspace", workspace_type)

    def label(self) -> str:
        """A stable text form, e.g. `global` or `workspace:learning`."""
        return (
            self.scope_type if self.workspace_type is None else f"workspace:{self.workspace_type}"
        )


def check_key(key: str) -> str:
    """Return the normalised memory key, or raise InvalidInput / SensitiveContent."""
    if not isinstance(key, str) or not key.strip():
        raise InvalidInput("memory_key", "must be a non-empty string")
    normalised = normalise_key(key)
    if len(normalised) > MAX_KEY_CHARS:
        raise InvalidInput("memory_key", f"must be at most {MAX_KEY_CHARS} characters")
    if not is_valid_key(normalised):
        raise InvalidInput("memory_key", "may hold only letters, digits and '_'")
    mixed = mixed_script_word(normalised)
    if mixed is not None:
        raise InvalidInput(
            "memory_key",
            f"the word {mixed!r} mixes Latin with Cyrillic or Greek letters (look-alikes such"
            " as a Cyrillic 'e', U+0435): write each word of a key in one script",
        )
    _refuse_secrets("memory_key", key)
    return normalised


_LOOKALIKE_SCRIPTS: Final = ("LATIN", "CYRILLIC", "GREEK")


def mixed_script_word(key: str) -> str | None:
    """The first `_`-separated word of a normalised key whose letters mix Latin, Cyrillic and
    Greek (the scripts whose letters pass for one another), or None.

    Such a word is refused rather than folded: `tea` spelt with a Cyrillic `e` (U+0435) would
    otherwise be a key of its own beside `tea`, looking the same to the user. A word written
    wholly in one script (`чай`, `tea`, `язык_ответа`) is never affected, so no key of one
    script per word changes: its normal form, and so its key claim, stay what they were.
    """
    for word in key.split("_"):
        if word.isascii():
            continue
        scripts = {
            unicodedata.name(char, "").partition(" ")[0]
            for char in word
            if unicodedata.category(char)[0] == "L"
        }
        if len(scripts & set(_LOOKALIKE_SCRIPTS)) > 1:
            return word
    return None


def check_id(field: str, value: str) -> str:
    """Return an identifier matching ID_PATTERN (user ids, conversation ids), or raise."""
    if not isinstance(value, str) or _ID.fullmatch(value) is None:
        raise InvalidInput(
            field,
            f"must be 1 to {MAX_ID_CHARS} characters: ASCII letters, digits and . _ : @ | + = ~ / -"
            ", starting with a letter or digit",
        )
    return value


def check_content(content: str) -> str:
    """Return the cleaned content to store, or raise InvalidInput / SensitiveContent."""
    if not isinstance(content, str):
        raise InvalidInput("content", "must be a string")
    if "\x00" in content:
        raise InvalidInput("content", "must not contain NUL characters")
    cleaned = clean_content(content)
    if not cleaned:
        raise InvalidInput("content", "must not be empty")
    if len(cleaned) > MAX_CONTENT_CHARS:
        raise InvalidInput("content", f"must be at most {MAX_CONTENT_CHARS} characters")
    _refuse_secrets("content", cleaned)
    return cleaned


def check_category(category: str) -> str:
    """Return the category if it is one of CATEGORIES."""
    if category not in CATEGORIES:
        raise InvalidInput("category", f"must be one of {', '.join(CATEGORIES)}")
    return category


def check_changed_via(changed_via: str) -> str:
    """Return changed_via if it is one of CHANGED_VIA."""
    if changed_via not in CHANGED_VIA:
        raise InvalidInput("changed_via", f"must be one of {', '.join(CHANGED_VIA)}")
    return changed_via


def check_time(field: str, value: datetime | None, *, now: datetime, future: bool) -> None:
    """Require an aware datetime, and (when `future`) one later than `now`."""
    if value is None:
        return
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidInput(field, "must include a time zone")
    if future and value <= now:
        raise InvalidInput(field, "must be in the future")


def _refuse_secrets(field: str, text: str) -> None:
    match = find_sensitive(text)
    if match is not None:
        raise SensitiveContent(field, match.kind, match.description)


UNSET: Final[Any] = object()
"""Marks an optional command argument the caller did not give (None means 'clear it')."""

_MAX_ORIGIN_ITEMS: Final = 16
_MAX_ORIGIN_CHARS: Final = 200


def check_origin(origin: Mapping[str, str] | None) -> dict[str, str] | None:
    """A small dict of short strings (stored in clear: never content, keys or names)."""
    if origin is None:
        return None
    if len(origin) > _MAX_ORIGIN_ITEMS:
        raise InvalidInput("origin", f"must have at most {_MAX_ORIGIN_ITEMS} items")
    for name, value in origin.items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise InvalidInput("origin", "names and values must be strings")
        if not name or len(name) > 64 or len(value) > _MAX_ORIGIN_CHARS:
            raise InvalidInput("origin", "names and values must be short")
    return dict(origin)
