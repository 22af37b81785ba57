"""Search terms: each live memory with the ranker's document terms, under a GIN index, and
the one tokeniser that splits memories and queries into those terms.

`terms` holds the keyed hashes (`RowSeal.hasher(user_id, "term")`, 64-bit integers) of
`index_terms(memory_key, content)`, never the words: the user's key makes them the user's own,
so a GIN lookup only meets the user's rows, and a query's terms are hashed alike
(`term_hashes`). Key and content are sealed like active_memories'. A forgotten memory leaves no
row; a memory whose personal fields were redacted keeps its row but has no terms.

The terms of a text are words, CJK bigrams and weights: `index_terms(memory_key, content)` is
what the view stores for a memory, and `query_terms(text)` what a query is matched with
(retrieval/query.py analyses a query once through it). Both read the canonical form of
`domain.model.values.normalise_content`. The index and retrieval must split text alike, so
the tokeniser is this view's (its output is the index format: a change to it needs
`memledger projections rebuild search_terms`; projections never import retrieval).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from datetime import datetime
from itertools import pairwise
from operator import add
from typing import Any, Final

from psycopg import Cursor
from psycopg.sql import SQL, Composed, Identifier

from domain.model.events import REDACTED
from domain.model.values import Scope, normalise_content
from projections.base import Projection
from projections.envelope import Envelope
from projections.sealed import RowSeal, vacuum_promptly
from projections.tracking import Tables
from projections.views._memory_rows import (
    SEALED,
    fold_memory_events,
    memory_table,
    seal_memory_rows,
)
from projections.views._rows import Column, ReadSource, RowChanges

__all__ = [
    "CJK",
    "CJK_RANGES",
    "COLUMNS",
    "STOPWORDS",
    "STOP_CHARS",
    "STRONG",
    "TABLE_NAME",
    "SearchTerms",
    "document_terms",
    "index_terms",
    "key_terms",
    "next_shadow_expiry",
    "open_search_rows",
    "query_terms",
    "stored_key_terms",
    "stored_terms",
    "term_hashes",
    "word_char",
]

# -- the terms of a text -------------------------------------------------------------------------

# Han (with extensions and compatibility ideographs), kana, bopomofo, U+3005 and U+3007: scripts
# written without spaces, so words are unknown and character bigrams stand in for them. Hangul
# is not here: Korean separates words with spaces.
CJK_RANGES: Final = (
    "\u3005\u3007\u3040-\u30fa\u30fc-\u30ff\u3100-\u312f\u31a0-\u31bf"
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
)
CJK: Final = re.compile(f"[{CJK_RANGES}]")


def word_char(char: str) -> bool:
    """A letter, digit or underscore of a script that separates words with spaces."""
    return (char.isalnum() or char == "_") and not CJK.match(char)


_CJK_RANGES: Final = CJK_RANGES
_CJK: Final = CJK
_RUNS: Final = re.compile(f"[{_CJK_RANGES}]+|[^\\W_{_CJK_RANGES}]+")
_CJK_RUNS: Final = re.compile(f"[{_CJK_RANGES}]+")
_WORDS: Final = re.compile(f"[^\\W_{_CJK_RANGES}]+")
_ASCII_WORDS: Final = re.compile("[a-z0-9]+")
# Full-width and CJK punctuation (escaped: several look like ASCII), and the ideographic space.
_CJK_PUNCTUATION: Final = (
    "\uff0c\u3002\u3001\uff1a\uff1b\uff01\uff1f\uff08\uff09\u3010"
    "\u3011\u300a\u300b\u3008\u3009\u300c\u300d\u300e\u300f\u201c"
    "\u201d\u2018\u2019\u2014\u2026\uff5e\u00b7\u3000"
)
_PLAIN_CJK: Final = re.compile(f"[\\x00-\\x7f\\u4e00-\\u9fff{_CJK_PUNCTUATION}]*")
_IDEOGRAPH_GAPS: Final = re.compile(r"(?<=[\u4e00-\u9fff])\s+(?=[\u4e00-\u9fff])")
# fmt: off
_STOPWORDS: Final = frozenset((
    "a", "an", "the", "and", "or", "but", "of", "to", "in", "on", "for", "with", "at", "by",
    "from", "as", "into", "about", "is", "are", "was", "were", "be", "been", "am", "do", "does",
    "did", "have", "has", "had", "i", "me", "my", "mine", "myself", "you", "your", "we", "our",
    "us", "it", "its", "this", "that", "these", "those", "there", "here", "what", "which", "who",
    "whom", "whose", "how", "when", "where", "why", "should", "would", "could", "can", "will",
    "shall", "may", "might", "must", "please", "any", "some", "all", "not", "no", "yes", "than",
    "then", "so", "too", "very", "just", "also", "tell", "know", "remember", "recall",
))
# fmt: on
# Function characters: alone they say nothing, and a bigram of two of them (我的, 什么) neither.
_STOP_CHARS: Final = frozenset(
    "的了是我你他她它们在和与及也都就很吗呢吧啊呀么这那个一有要会对把被给让什怎样哪些为之其"
)
STOPWORDS: Final = _STOPWORDS
"""English words that alone say nothing (never a query term)."""
STOP_CHARS: Final = _STOP_CHARS
"""Chinese function characters (alone, or two of them, never a query term)."""
_STRONG, _WEAK = 2, 1  # term weights: a bigram with one function character counts half
STRONG: Final = _STRONG
"""The weight of a word or a bigram of two content characters."""


def _stem(word: str) -> str:
    # Plural folding only, applied alike to queries and memories ("examples" ~ "example").
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _bigrams(run: str) -> Iterable[tuple[str, int]]:
    for a, b in pairwise(run):
        stops = (a in _STOP_CHARS) + (b in _STOP_CHARS)
        if stops < 2:
            yield a + b, _WEAK if stops else _STRONG


def query_terms(text: str, *, normal: bool = False) -> dict[str, int]:
    """Weighted terms of a query: words, CJK bigrams (a lone CJK character as itself).

    `normal`: `text` is already `normalise_content`'s form (retrieval.query.Query passes it).
    """
    terms: dict[str, int] = {}
    for run in _RUNS.findall(text if normal else normalise_content(text)):
        if _CJK.match(run):
            pairs = list(_bigrams(run)) if len(run) > 1 else [(run, _STRONG)]
            for term, weight in pairs:
                if term not in _STOP_CHARS:
                    terms[term] = max(weight, terms.get(term, 0))
        else:
            word = _stem(run)
            if len(word) > 1 and word not in _STOPWORDS:
                terms[word] = _STRONG
    return terms


def document_terms(text: str) -> frozenset[str]:
    """Terms of a memory: words, CJK bigrams and single CJK characters."""
    # The runs of `_RUNS` in the canonical form, found faster (every memory is projected
    # through here): CJK runs and word runs apart, as the two classes are disjoint; and on
    # ASCII text, where the canonical form only lowers the case, collapses whitespace and
    # strips trailing punctuation, the runs of letters and digits of the lowered text. Text
    # of ASCII, ideographs and common CJK punctuation (most Chinese memories) is as cheap:
    # the punctuation only separates runs, before and after NFKC, and the one change of the
    # canonical form that joins runs is dropping the whitespace between two ideographs.
    if text.isascii():
        words, runs = _ASCII_WORDS.findall(text.lower()), []
    elif _PLAIN_CJK.fullmatch(text):
        lowered = _IDEOGRAPH_GAPS.sub("", text.lower())
        words, runs = _ASCII_WORDS.findall(lowered), _CJK_RUNS.findall(lowered)
    else:
        normal = normalise_content(text)
        words, runs = _WORDS.findall(normal), _CJK_RUNS.findall(normal)
    terms = {_stem(word) if word[-1] == "s" else word for word in words}  # see _stem
    for run in runs:
        terms.update(run)
        terms.update(map(add, run, run[1:]))  # bigrams
    return frozenset(terms)


def index_terms(memory_key: str, content: str) -> list[str]:
    """What the ranker matches a memory on (sorted): the terms of its key's words and content.

    The search_terms projection stores these, so ranking need not re-tokenise each memory.
    """
    return sorted(document_terms(_indexed_text(memory_key, content)))


def key_terms(memory_key: str) -> list[str]:
    """The terms of a key's words alone (sorted): what "key coverage" counts."""
    return sorted(document_terms(_indexed_text(memory_key)))


def _indexed_text(memory_key: str, content: str | None = None) -> str:
    """The text a memory's terms are taken from: its key's words, then its content."""
    words = memory_key.replace("_", " ")
    return words if content is None else f"{words} {content}"


# -- the view ----------------------------------------------------------------------------------

TABLE_NAME = "search_terms"
TABLE = memory_table(Column("terms", "int8[]"), Column("key_terms", "int8[]"))
COLUMNS = TABLE.names


def term_hashes(seal: RowSeal, user_id: str) -> Callable[[Collection[str]], list[int]]:
    """How the terms of this user are stored and looked up: keyed hashes, in order."""
    return seal.hasher(user_id, "term")


def stored_terms(seal: RowSeal, user_id: str, memory_key: str, content: str) -> list[int]:
    """The stored terms of a memory (of `index_terms`): hashed, sorted; none when redacted."""
    if REDACTED in (memory_key, content):
        return []
    return sorted(term_hashes(seal, user_id)(document_terms(_indexed_text(memory_key, content))))


def stored_key_terms(seal: RowSeal, user_id: str, memory_key: str) -> list[int]:
    """The hashed terms of the key's words alone (of `key_terms`), sorted; none when redacted."""
    if memory_key == REDACTED:
        return []
    return sorted(term_hashes(seal, user_id)(document_terms(_indexed_text(memory_key))))


def open_search_rows(
    rows: list[dict[str, Any]], seal: RowSeal, query_hashes: Mapping[int, str] | None = None
) -> list[dict[str, Any]]:
    """Fetched rows with key and content opened, and clear `terms` and `key_terms` (the stored
    ones are hashes): what ranking reads.

    With `query_hashes` (each query term's `term_hashes` hash -> the term), a row's terms are
    the query terms among its stored hashes: all that ranking reads of them (which query terms
    a row holds), without tokenising its text again. Without, they are computed again from key
    and content (`index_terms`, `key_terms`).
    """
    seal.open_rows(rows, TABLE_NAME, "memory_id", SEALED)
    for row in rows:
        row.pop("key_hash", None)
        memory_key, content = row["memory_key"], row["content"]
        if REDACTED in (memory_key, content):
            row["terms"], row["key_terms"] = frozenset(), frozenset()
        elif query_hashes is not None:
            row["terms"] = frozenset(query_hashes[h] for h in row["terms"] if h in query_hashes)
            row["key_terms"] = frozenset(
                query_hashes[h] for h in row["key_terms"] if h in query_hashes
            )
        else:
            row["terms"] = frozenset(index_terms(memory_key, content))
            row["key_terms"] = frozenset(key_terms(memory_key))
    return rows


class SearchTerms(Projection):
    """One row per live memory (active or suppressed) with its search terms."""

    name = "search_terms"

    def create(self, t: Tables) -> list[Composed]:
        table = t["search_terms"]
        return [
            TABLE.create(table),
            vacuum_promptly(table),
            t.create_index("search_terms", "terms", "USING gin (terms)"),
            t.create_index("search_terms", "user_key", "(user_id, key_hash)"),
            # The newest rows of a category first: a query that only names a category reads a
            # few index entries instead of sorting all the user's rows of it.
            SQL("DROP INDEX IF EXISTS {}.{}").format(
                Identifier(t.schema), t.index("search_terms", "user_category")
            ),
            t.create_index(
                "search_terms",
                "user_category_recent",
                "(user_id, category, updated_at DESC, memory_id)",
            ),
            # The next expiry of a workspace memory (it may hide a global one): the search
            # cache keeps no result past it.
            t.create_index(
                "search_terms",
                "workspace_expiry",
                "(user_id, expires_at) WHERE scope_type = 'workspace' AND expires_at IS NOT NULL",
            ),
        ]

    def apply(self, cur: Cursor[Any], t: Tables, batch: Sequence[Envelope]) -> None:
        rows = TABLE.changes(t["search_terms"])
        fold_memory_events(rows, batch)
        seal = t.seal
        for row in rows.new.values():
            user_id, memory_key = row["user_id"], row["memory_key"]
            row["terms"] = stored_terms(seal, user_id, memory_key, row["content"])
            row["key_terms"] = stored_key_terms(seal, user_id, memory_key)
        _terms_of_changed_content(cur, rows, seal)
        seal_memory_rows(rows, TABLE_NAME, seal)
        rows.flush(cur)


def _terms_of_changed_content(cur: Cursor[Any], rows: RowChanges, seal: RowSeal) -> None:
    """Add new terms to the content changes of older rows (from their stored user and key)."""
    changed = [key for key, values in rows.updates.items() if "content" in values]
    if not changed:
        return
    cur.execute(
        SQL("SELECT memory_id, user_id, memory_key FROM {} WHERE memory_id = ANY(%s)").format(
            rows.table
        ),
        (changed,),
        binary=True,
    )
    updates = rows.updates
    for memory_id, user_id, sealed_key in cur.fetchall():
        memory_key = seal.open(TABLE_NAME, memory_id, memory_id, "memory_key", sealed_key)
        values = updates[memory_id]
        values["terms"] = stored_terms(seal, user_id, memory_key, values["content"])


def next_shadow_expiry(
    src: ReadSource, user_id: str, scopes: Sequence[Scope], now: datetime
) -> datetime | None:
    """When the first of the user's visible, active workspace memories expires (or None).

    A workspace memory hides the global one with its key; when it expires, without any
    event, the global one becomes visible, so a cached search result must not outlive it.
    """
    workspaces = [s.workspace_type for s in scopes if s.scope_type == "workspace"]
    if not workspaces:
        return None
    rows = src.all(
        SQL(
            "SELECT min(expires_at) AS at FROM {} WHERE user_id = %s AND status = 'active'"
            " AND scope_type = 'workspace' AND workspace_type = ANY(%s)"
            " AND expires_at > %s"
        ).format(src.t["search_terms"]),
        (user_id, workspaces, now),
    )
    return rows[0]["at"] if rows else None
