"""The hubness background kept in a cache folder: taken back bit for bit, never from another
model build, and a folder that fails costs only the embedding."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from retrieval.vectors import background as bg
from retrieval.vectors.background import CHINESE, ENGLISH, background


class Model:
    """A deterministic fake embedder: each text's vector from its hash (`build` varies it)."""

    def __init__(self, model_id: str, build: int = 0) -> None:
        self.model_id = model_id
        self.build = build
        self.calls = 0

    def query(self, text: str) -> np.ndarray:
        self.calls += 1
        seed = abs(hash((text, self.build))) % 2**32
        return np.random.default_rng(seed).standard_normal(8).astype(np.float32)


def fresh(model_id: str) -> None:
    """Forget this process's computed background of `model_id` (as a new process would)."""
    bg._COMPUTED.pop(model_id, None)


@pytest.fixture
def model_id() -> Iterator[str]:
    name = f"fake-{uuid.uuid4().hex}"
    yield name
    fresh(name)


def test_a_restart_takes_the_kept_vectors_with_one_embedding(tmp_path: Path, model_id: str) -> None:
    first = Model(model_id)
    computed = background(first, tmp_path)
    assert first.calls == len(ENGLISH) + len(CHINESE)
    [kept] = tmp_path.glob("background-*.npy")
    assert kept.stat().st_mode & 0o777 == 0o644  # public data, readable by other users' processes
    assert not list(tmp_path.glob("*.tmp"))

    fresh(model_id)
    again = Model(model_id)
    taken = background(again, tmp_path)
    assert again.calls == 1  # the probe: the first text, checked bit for bit
    for kept, made in zip(taken, computed, strict=True):
        assert kept.dtype == np.float32 and np.array_equal(kept, made)

    fresh(model_id)
    uncached = background(Model(model_id), None)  # no folder: as before there was one
    assert all(np.array_equal(a, b) for a, b in zip(uncached, computed, strict=True))


def test_another_build_under_the_same_id_is_embedded_afresh(tmp_path: Path, model_id: str) -> None:
    background(Model(model_id, build=1), tmp_path)
    fresh(model_id)
    other = Model(model_id, build=2)
    latin, cjk = background(other, tmp_path)
    assert other.calls == 1 + len(ENGLISH) + len(CHINESE)  # the probe failed: all embedded
    fresh(model_id)
    expected = background(Model(model_id, build=2), None)
    assert np.array_equal(latin, expected[0]) and np.array_equal(cjk, expected[1])
    fresh(model_id)
    rewritten = Model(model_id, build=2)
    background(rewritten, tmp_path)
    assert rewritten.calls == 1  # the file now holds build 2's vectors


def test_an_unusable_folder_or_file_costs_only_the_embedding(tmp_path: Path, model_id: str) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    model = Model(model_id)
    assert background(model, blocked / "cache")[0].shape == (len(ENGLISH), 8)
    assert model.calls == len(ENGLISH) + len(CHINESE)

    fresh(model_id)
    background(Model(model_id), tmp_path)
    [kept] = tmp_path.glob("background-*.npy")
    kept.write_bytes(b"garbage")
    fresh(model_id)
    model = Model(model_id)
    assert background(model, tmp_path)[1].shape == (len(CHINESE), 8)
    assert model.calls == len(ENGLISH) + len(CHINESE)
    assert np.load(kept).shape == (len(ENGLISH) + len(CHINESE), 8)  # written again, whole

    for wrong in (np.float32(1.0), np.zeros((3, 8), np.float32), np.zeros((2, 2, 2), np.float32)):
        np.save(kept, wrong)  # a valid file of another shape: not taken, embedded again
        fresh(model_id)
        model = Model(model_id)
        assert background(model, tmp_path)[0].shape == (len(ENGLISH), 8)
        assert model.calls == len(ENGLISH) + len(CHINESE)
