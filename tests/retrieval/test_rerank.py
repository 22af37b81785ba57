"""The reranker stage and its scorers without a database: scores checked and converted, the
budget and the request deadline kept, the CrossEncoder's clear errors, the settings."""

from __future__ import annotations

import math
import re
import socket
import sys
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from uuid import uuid4

import pytest
from pydantic import ValidationError

from api.bootstrap import build_reranker, warm_search
from api.settings import Settings
from domain import context
from retrieval.query import Query, Scored, SearchRow
from retrieval.rerank import Reranker, RerankError, to_relevance
from retrieval.rerankers import CrossEncoderScorer, HttpScorer, make_scorer
from retrieval.vectors.service import EmbeddingService


def row(content: str) -> SearchRow:
    now = datetime.now(UTC)
    return SearchRow(
        memory_id=uuid4(),
        memory_key=content.split()[0].lower(),
        content=content,
        category="fact",
        scope_type="global",
        workspace_type=None,
        source_type="explicit",
        status="active",
        updated_at=now,
    )


FUSED = [
    Scored(row(text), score) for text, score in (("a one", 0.9), ("b two", 0.5), ("c three", 0.2))
]


class Fixed:
    """A scorer answering `answer` after `delay` seconds (or raising it)."""

    name = "fixed"
    bounded = False

    def __init__(self, answer: object, delay: float = 0.0) -> None:
        self.answer = answer
        self.delay = delay
        self.calls = 0

    def warm_up(self) -> None:
        pass

    def scores(self, query: str, documents: Sequence[str], timeout: float) -> list[float]:
        self.calls += 1
        time.sleep(self.delay)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer  # type: ignore[return-value]


def test_probabilities_are_kept_and_logits_go_through_a_sigmoid() -> None:
    assert to_relevance([0.0, 0.25, 1], 3, "probability") == [0.0, 0.25, 1.0]
    assert to_relevance([0.0, 2.0, -1000.0], 3, "logit") == pytest.approx(
        [0.5, 1 / (1 + math.exp(-2)), 0.0]
    )


@pytest.mark.parametrize(
    "raw",
    [
        [0.5, 0.5],
        [0.5, 0.5, 0.5, 0.5],
        [math.nan, 0.5, 0.5],
        [math.inf, 0, 0],
        [1.5, 0, 0],
        [-0.1, 0, 0],
        [True, 0, 0],
        ["0.5", 0, 0],
        [None, 0, 0],
    ],
)
def test_scores_that_cannot_be_trusted_are_refused(raw: list[object]) -> None:
    with pytest.raises(RerankError):
        to_relevance(raw, 3, "probability")


def test_the_first_candidates_are_reordered_by_the_scores_and_the_rest_stay_below() -> None:
    reranker = Reranker(Fixed([0.1, 0.7]), top=2)
    out = reranker.rerank(Query.of("x"), FUSED)
    assert out is not None
    assert [(s.row.content, s.score) for s in out] == [
        ("b two", 0.7),
        ("a one", 0.1),
        ("c three", 0.1),  # its fused 0.2 capped at the lowest reranked relevance
    ]
    assert reranker.state().applied == 1 and reranker.state().available


def test_equal_scores_keep_the_fused_order() -> None:
    out = Reranker(Fixed([0.4, 0.4, 0.4])).rerank(Query.of("x"), FUSED)
    assert out is not None and [s.row.content for s in out] == ["a one", "b two", "c three"]


def test_no_candidates_ask_nothing() -> None:
    scorer = Fixed([])
    assert Reranker(scorer).rerank(Query.of("x"), []) is None and scorer.calls == 0


def test_the_request_deadline_shortens_the_budget() -> None:
    reranker = Reranker(Fixed([0.5, 0.5, 0.5], delay=0.5), budget=5.0)
    started = time.perf_counter()
    with context.within(0.05):
        assert reranker.rerank(Query.of("x"), FUSED) is None
    assert time.perf_counter() - started < 0.4
    state = reranker.state()
    assert state.timeouts == 1 and not state.available
    # the budget is what was left of the deadline when the call began: 50 ms, or a little less
    # on a loaded host
    waited = re.fullmatch(r"no answer within (\d+) ms", state.error or "")
    assert waited is not None and 30 <= int(waited.group(1)) <= 50


def test_after_a_failure_it_is_left_alone_for_retry_after_seconds() -> None:
    now = [0.0]
    scorer = Fixed(RerankError("down"))
    reranker = Reranker(scorer, retry_after=30, clock=lambda: now[0])
    assert reranker.rerank(Query.of("x"), FUSED) is None
    now[0] = 29.0
    assert reranker.rerank(Query.of("x"), FUSED) is None and scorer.calls == 1
    now[0] = 30.0
    scorer.answer = [0.2, 0.3, 0.9]
    assert reranker.rerank(Query.of("x"), FUSED) is not None and scorer.calls == 2
    state = reranker.state()
    assert (state.errors, state.skipped, state.applied, state.available) == (1, 1, 1, True)


def test_a_scorer_bug_is_an_error_not_a_crash() -> None:
    reranker = Reranker(Fixed(ZeroDivisionError()))
    assert reranker.rerank(Query.of("x"), FUSED) is None
    assert reranker.state().error == "ZeroDivisionError"


def test_a_missing_cross_encoder_folder_is_said_clearly(tmp_path: Path) -> None:
    reranker = Reranker(CrossEncoderScorer(tmp_path / "absent"))
    assert reranker.warm_up() is False
    assert reranker.state().error == f"no cross-encoder model folder at {tmp_path / 'absent'}"
    assert reranker.rerank(Query.of("x"), FUSED) is None  # backing off: the fused order


def test_a_missing_rerank_extra_is_said_clearly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # not installed
    scorer = CrossEncoderScorer(tmp_path)
    with pytest.raises(RerankError, match=r"pip install 'memledger\[rerank\]'"):
        scorer.scores("x", ["a"], 1.0)
    reranker = Reranker(scorer)
    assert reranker.rerank(Query.of("x"), FUSED) is None
    assert reranker.state().errors == 1


def test_start_up_says_when_the_reranker_cannot_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = Settings(reranker="cross-encoder", reranker_model=str(tmp_path / "absent"))
    reranker = build_reranker(settings)
    assert reranker is not None
    warm_search(EmbeddingService(None), reranker)
    err = capsys.readouterr().err
    assert "loading the reranker cross-encoder/absent" in err
    assert "the reranker is unavailable (no cross-encoder model folder at" in err


def test_a_trickling_server_is_cut_at_the_timeout() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def trickle() -> None:
        conn, _ = listener.accept()
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
        for _ in range(20):  # each byte within the read timeout, the whole far past it
            time.sleep(0.05)
            try:
                conn.sendall(b" ")
            except OSError:
                break
        conn.close()

    threading.Thread(target=trickle, daemon=True).start()
    scorer = HttpScorer(f"http://127.0.0.1:{port}/rerank", timeout=5.0)  # the call's 0.2 rules
    started = time.perf_counter()
    with pytest.raises(RerankError, match=r"took longer than 0\.2 s"):
        scorer.scores("x", ["a"], 0.2)
    assert time.perf_counter() - started < 0.6
    listener.close()


@pytest.mark.parametrize(
    ("fields", "missing"),
    [
        ({"reranker": "http"}, "MEMLEDGER_RERANKER_URL"),
        ({"reranker": "cross-encoder"}, "MEMLEDGER_RERANKER_MODEL"),
    ],
)
def test_a_reranker_without_its_endpoint_or_folder_is_refused(
    fields: dict[str, str], missing: str
) -> None:
    with pytest.raises(ValidationError, match=missing):
        Settings(**fields)  # type: ignore[arg-type]


def test_an_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown reranker"):
        make_scorer("magic")


def test_start_up_loads_nothing_for_an_endpoint(capsys: pytest.CaptureFixture[str]) -> None:
    reranker = build_reranker(Settings(reranker="http", reranker_url="http://127.0.0.1:9/rerank"))
    assert reranker is not None
    warm_search(EmbeddingService(None), reranker)
    assert "reranker" not in capsys.readouterr().err
    assert reranker.state().available
