"""Hubness (retrieval/vectors/background.py) and calibrated relevance: Platt scaling of cosine
minus hubness (retrieval/fusion.py)."""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from datetime import UTC, datetime
from uuid import UUID, uuid4

import numpy as np
import pytest

from domain.model.cjk import is_cjk
from domain.model.values import normalise_content
from retrieval.fusion import WEIGHTS, FusedRanker, Weights
from retrieval.query import Query, SearchRow
from retrieval.vectors.background import CHINESE, ENGLISH, TOP_K
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


def test_hubness_is_the_mean_of_the_top_k_cosines_to_the_background_of_each_script() -> None:
    embedder = HashEmbedder(f"hash/{uuid4()}")
    memories = embedder.passages(["I teach chemistry.", "我喜欢先看例子。"])

    hubness = EmbeddingService(embedder).hubness(memories)

    assert hubness is not None and hubness.shape == (2, 2)
    for column, texts in enumerate((ENGLISH, CHINESE)):
        queries = [embedder.query(normalise_content(t)) for t in texts]
        cosines = memories @ np.stack(queries).T
        expected = np.sort(cosines, axis=1)[:, -TOP_K:].mean(axis=1)
        assert np.allclose(hubness[:, column], expected, atol=1e-6)
    assert not np.allclose(hubness[:, 0], hubness[:, 1])


def test_a_memory_s_hubness_does_not_depend_on_its_batch() -> None:
    embedder = HashEmbedder(f"hash/{uuid4()}")
    service = EmbeddingService(embedder)
    memories = embedder.passages([f"memory {i}" for i in range(40)])

    together = service.hubness(memories)
    alone = [service.hubness(memories[i : i + 1]) for i in range(40)]

    assert together is not None and all(a is not None for a in alone)
    assert together.tobytes() == b"".join(a.tobytes() for a in alone if a is not None)


def test_the_background_is_embedded_once_per_model() -> None:
    embedder = HashEmbedder(f"hash/{uuid4()}")

    assert EmbeddingService(embedder).warm_up()
    calls = embedder.calls
    assert EmbeddingService(embedder).hubness(embedder.passages(["x"])) is not None

    assert calls == len(ENGLISH) + len(CHINESE) + 1 and embedder.calls == calls


def test_a_failing_embedder_gives_no_hubness_and_is_retried_later() -> None:
    model = f"hash/{uuid4()}"
    assert EmbeddingService(Failing(model)).hubness(np.ones((1, 16))) is None
    assert EmbeddingService(HashEmbedder(model)).warm_up()


def test_the_background_is_generic_bilingual_and_written_apart_from_the_eval_set() -> None:
    assert len(ENGLISH) >= 100 and len(CHINESE) >= 100
    assert not any(is_cjk(t) for t in ENGLISH) and all(is_cjk(t) for t in CHINESE)
    assert len(set(ENGLISH)) == len(ENGLISH) and len(set(CHINESE)) == len(CHINESE)


def _candidate(key: str, content: str, age: float = 0.0) -> SearchRow:
    updated_at = datetime.fromtimestamp(NOW.timestamp() - age, UTC)
    return search_row(key, content, updated_at=updated_at)


def _dense_for(relevance: float) -> float:
    """The dense score (cosine - HUBNESS x hubness) the shipped calibration maps to `relevance`."""
    return (math.log(relevance / (1 - relevance)) - WEIGHTS.platt_b) / WEIGHTS.platt_a


def test_relevance_is_platt_scaling_of_the_dense_score_or_of_lexical_coverage() -> None:
    w = Weights(
        hubness=1.0,
        translated=0.0,
        listed=0.0,
        platt_a=10.0,
        platt_b=-1.0,
        lexical_a=2.0,
        lexical_b=-1.0,
        threshold=0.1,
    )

    assert w.relevance(0.1, coverage=1.0) == pytest.approx(0.5)  # a vector: coverage unused
    assert w.relevance(None, coverage=0.5) == pytest.approx(0.5)
    assert w.relevance(0.3, 0.0) > w.relevance(0.2, 0.0)
    assert 0.0 < WEIGHTS.threshold < 0.5 and WEIGHTS.platt_a > 0 and WEIGHTS.lexical_a > 0


def test_every_dense_candidate_ranks_by_relevance_and_lexical_words_remove_none() -> None:
    weak = _candidate("job", "I am a nurse in Madrid.")
    strong = _candidate("study_time", "I study on weekday mornings.")
    lexical = _candidate("pets", "My cat naps on the keyboard.")
    scores: dict[UUID, float] = {
        weak.memory_id: _dense_for(0.2),
        strong.memory_id: _dense_for(0.9),
        lexical.memory_id: _dense_for(0.5),
    }

    ranked = FusedRanker(scores).rank(
        Query.of("when is my cat awake"), [weak, strong, lexical], now=NOW
    )

    assert [s.row for s in ranked] == [strong, lexical, weak]
    assert [s.score for s in ranked] == pytest.approx([0.9, 0.5, 0.2], abs=1e-4)


def test_only_items_at_or_above_min_relevance_come_back_and_none_is_no_match() -> None:
    weak = _candidate("job", "I am a nurse in Madrid.")
    strong = _candidate("study_time", "I study on weekday mornings.")
    scores = {weak.memory_id: _dense_for(WEIGHTS.threshold / 2), strong.memory_id: _dense_for(0.6)}
    ranker = FusedRanker(scores)
    query = Query.of("when do I study")

    assert [s.row for s in ranker.rank(query, [weak, strong], now=NOW)] == [strong]
    assert ranker.rank(query, [weak, strong], now=NOW, min_relevance=0.7) == []
    everything = ranker.rank(query, [weak, strong], now=NOW, min_relevance=0.0)
    assert [s.row for s in everything] == [strong, weak]


def test_a_lexical_match_without_a_vector_yet_is_a_candidate_by_its_coverage() -> None:
    fresh = _candidate("pets", "My cat naps on the keyboard.")
    other = _candidate("job", "I am a nurse in Madrid.")

    ranked = FusedRanker({}).rank(Query.of("cat naps"), [fresh, other], now=NOW)

    assert [s.row for s in ranked] == [fresh]
    assert ranked[0].score == pytest.approx(WEIGHTS.relevance(None, 1.0), abs=1e-6)


def test_equal_relevance_ranks_newer_first() -> None:
    old, new, best = (_candidate(f"k{i}", f"text {i}", age) for i, age in enumerate((9, 1, 5)))
    scores = {old.memory_id: 0.05, new.memory_id: 0.05, best.memory_id: 0.08}

    ranked = FusedRanker(scores).rank(
        Query.of("question"), [old, new, best], now=NOW, min_relevance=0.0
    )

    assert [s.row for s in ranked] == [best, new, old]


def test_a_query_naming_only_a_category_raises_that_category() -> None:
    goal = search_row("exam_goal", "Pass the bar exam in July.", category="goal", updated_at=NOW)
    other = _candidate("job", "I am a nurse in Madrid.")
    scores = {goal.memory_id: 0.0, other.memory_id: WEIGHTS.listed / 2}

    ranked = FusedRanker(scores).rank(Query.of("my goals"), [other, goal], now=NOW, min_relevance=0)
    plain = FusedRanker(scores).rank(Query.of("exam"), [other, goal], now=NOW, min_relevance=0)

    assert [s.row for s in ranked][:1] == [goal]
    assert [s.row for s in plain] == [other, goal]
