"""Calibrated relevance: cosine minus the memory's hubness against a generic background."""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from datetime import UTC, datetime
from uuid import UUID, uuid4

import numpy as np
import pytest

from domain.model.values import normalise_content
from retrieval.calibration import CHINESE, ENGLISH, GENERIC_TERMS, TOP_K, Background, is_cjk
from retrieval.hybrid import MIN_RELEVANCE, HybridRanker, relevance
from retrieval.query import LexicalRanker, Query, SearchRow
from retrieval.vectors.service import EmbeddingService, Vectors, normalised
from tests.search_rows import search_row

NOW = datetime(2026, 11, 30, tzinfo=UTC)


class HashEmbedder:
    """Deterministic pseudo-random unit vectors per text, in a space of its own per instance."""

    def __init__(self, model_id: str, dim: int = 16) -> None:
        self.model_id = model_id
        self.dim = dim
        self.calls = 0

    def _vector(self, text: str) -> Vectors:
        rng = np.random.default_rng(zlib.crc32(text.encode()))
        return normalised(rng.standard_normal(self.dim))

    def passages(self, texts: Sequence[str]) -> Vectors:
        return np.stack([self._vector(t) for t in texts])

    def query(self, text: str) -> Vectors:
        self.calls += 1
        return self._vector(text)


class Failing(HashEmbedder):
    def query(self, text: str) -> Vectors:
        raise RuntimeError("endpoint down")


def test_hubness_is_the_mean_of_the_top_k_cosines_to_the_background_in_the_query_script() -> None:
    embedder = HashEmbedder(f"hash/{uuid4()}")
    background = Background(EmbeddingService(embedder))
    memories = embedder.passages(["I teach chemistry.", "我喜欢先看例子。"])

    latin = background.hubness(memories, cjk_query=False)
    cjk = background.hubness(memories, cjk_query=True)

    assert latin is not None and cjk is not None
    for hubness, texts in ((latin, ENGLISH), (cjk, CHINESE)):
        queries = [embedder.query(normalise_content(t)) for t in texts]
        cosines = memories @ np.stack(queries).T
        expected = np.sort(cosines, axis=1)[:, -TOP_K:].mean(axis=1)
        assert np.allclose(hubness, expected, atol=1e-6)
    assert not np.allclose(latin, cjk)


def test_the_background_is_embedded_once_per_model() -> None:
    embedder = HashEmbedder(f"hash/{uuid4()}")
    background = Background(EmbeddingService(embedder))

    assert background.warm_up()
    calls = embedder.calls
    assert Background(EmbeddingService(embedder)).vectors(True) is not None

    assert calls == len(ENGLISH) + len(CHINESE) and embedder.calls == calls


def test_a_failing_embedder_gives_no_calibration_and_is_retried_later() -> None:
    model = f"hash/{uuid4()}"
    assert (
        Background(EmbeddingService(Failing(model))).hubness(np.ones((1, 16)), cjk_query=False)
        is None
    )
    assert Background(EmbeddingService(HashEmbedder(model))).warm_up()


def test_the_background_is_generic_bilingual_and_written_apart_from_the_eval_set() -> None:
    assert len(ENGLISH) >= 100 and len(CHINESE) >= 100
    assert not any(is_cjk(t) for t in ENGLISH) and all(is_cjk(t) for t in CHINESE)
    assert len(set(ENGLISH)) == len(ENGLISH) and len(set(CHINESE)) == len(CHINESE)


def test_relevance_is_cosine_minus_hubness() -> None:
    a, b = uuid4(), uuid4()
    vectors = {a: np.zeros(2, dtype=np.float32), b: np.zeros(2, dtype=np.float32)}

    found = relevance({a: 0.9, b: 0.8}, vectors, np.array([0.85, 0.76], dtype=np.float32))

    assert found == pytest.approx({a: 0.05, b: 0.04})


def _candidate(key: str, content: str, age: float = 0.0) -> SearchRow:
    updated_at = datetime.fromtimestamp(NOW.timestamp() - age, UTC)
    return search_row(key, content, updated_at=updated_at)


def test_an_answered_query_ranks_every_candidate_by_evidence() -> None:
    weak = _candidate("job", "I am a nurse in Madrid.")
    strong = _candidate("study_time", "I study on weekday mornings.")
    lexical = _candidate("pets", "My cat naps on the keyboard.")
    scores: dict[UUID, float] = {
        weak.memory_id: MIN_RELEVANCE - 0.001,
        strong.memory_id: MIN_RELEVANCE + 0.02,
        lexical.memory_id: -0.2,  # far below, but the word matches
    }
    ranker = HybridRanker(LexicalRanker(), scores)

    ranked = ranker.rank(Query.of("when is my cat awake"), [weak, strong, lexical], now=NOW)

    assert [s.row for s in ranked] == [strong, weak, lexical]


def test_a_query_no_row_answers_gets_nothing_whatever_words_it_shares() -> None:
    assert "cat" in GENERIC_TERMS  # a word of the background: shared, but no answer
    weak = _candidate("job", "I am a nurse in Madrid.")
    lexical = _candidate("pets", "My cat naps on the keyboard.")
    scores: dict[UUID, float] = {
        weak.memory_id: MIN_RELEVANCE - 0.001,
        lexical.memory_id: -0.2,  # a shared word is no answer on its own
    }
    ranker = HybridRanker(LexicalRanker(), scores)

    assert ranker.rank(Query.of("when is my cat awake"), [weak, lexical], now=NOW) == []


def test_a_lexical_match_on_a_specific_word_answers_the_query() -> None:
    job = _candidate("job", "I am a nurse in Madrid.")
    other = _candidate("pets", "My cat naps on the keyboard.")
    scores: dict[UUID, float] = {job.memory_id: -0.1, other.memory_id: 0.0}
    assert "madrid" not in GENERIC_TERMS

    ranked = HybridRanker(LexicalRanker(), scores).rank(
        Query.of("Madrid evenings"), [job, other], now=NOW
    )

    assert [s.row for s in ranked] == [other, job]  # answered; then ordered by evidence


def test_a_lexical_match_without_a_vector_yet_answers_the_query() -> None:
    fresh = _candidate("pets", "My cat naps on the keyboard.")

    ranked = HybridRanker(LexicalRanker(), {}).rank(Query.of("cat naps"), [fresh], now=NOW)

    assert [s.row for s in ranked] == [fresh]


def test_a_query_naming_only_a_category_lists_that_category() -> None:
    goal = search_row("exam_goal", "Pass the bar exam in July.", category="goal", updated_at=NOW)
    other = _candidate("job", "I am a nurse in Madrid.")
    scores: dict[UUID, float] = {goal.memory_id: -0.1, other.memory_id: -0.05}

    ranked = HybridRanker(LexicalRanker(), scores).rank(
        Query.of("my goals"), [other, goal], now=NOW
    )

    assert [s.row for s in ranked] == [goal, other]


def test_vector_only_memories_rank_by_relevance_then_newer_first() -> None:
    old, new, best = (_candidate(f"k{i}", f"text {i}", age) for i, age in enumerate((9, 1, 5)))
    scores = {old.memory_id: 0.05, new.memory_id: 0.05, best.memory_id: 0.08}

    ranked = HybridRanker(LexicalRanker(), scores).rank(
        Query.of("question"), [old, new, best], now=NOW
    )

    assert [s.row for s in ranked] == [best, new, old]
