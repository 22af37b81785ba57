"""The walks of docs/architecture.md: the layers a create and a search cross, by concept.

A profiler records every project module whose code runs while one request is served (on every
thread: the request's, and for a create the projection worker's until the row is written).
Each walk must pass through the modules docs/architecture.md names for it (route, use case,
aggregate or search, persistence, read model). File counts are not pinned (issue 24): modules
are split by concern, not to move a count.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.metrics import Metrics
from api.services import Services
from projections.reads import Reads
from projections.registry import all_projections
from projections.sealed import register
from projections.worker import ProjectionWorker
from retrieval.vectors.service import EmbeddingService
from tests.conftest import JWT_SECRET

ROOT = str(Path(__file__).resolve().parents[2]) + "/"
PACKAGES = ("domain/", "projections/", "retrieval/", "service/", "api/", "migration/", "replay/")
ACTIVE_MEMORIES = {
    "projections/views/active_memories.py",
    "projections/views/_memory_rows.py",
    "projections/views/_rows.py",
    "projections/memory_kinds.py",
}
"""The view modules that write an active_memories row (the worker also applies the others)."""

CREATE_TO_EVENTS_ROW = {
    "api/routes/memories.py",  # the route
    "service/memories.py",  # the use case
    "domain/ledger/memories.py",  # the command
    "domain/model/memory.py",  # the aggregate
    "domain/ledger/store.py",  # the save
    "domain/ledger/persistence/recorder.py",  # the events row
}
CREATE_TO_ACTIVE_ROW = {"projections/worker.py", "projections/views/active_memories.py"}
LEXICAL_SEARCH = {
    "api/routes/tools.py",  # the route
    "service/tool_reads.py",  # the use case
    "service/tool_policy.py",  # its policy check
    "domain/policy.py",
    "retrieval/search.py",  # the search
    "retrieval/fetch.py",  # the narrow fetch over the read model
    "projections/sealed.py",  # the rows opened
}
HYBRID_SEARCH = LEXICAL_SEARCH | {"retrieval/hybrid.py", "retrieval/fusion.py"}
KEY_FETCH = {
    "domain/ledger/keyring.py",
    "domain/ledger/persistence/key_table.py",
    "domain/ledger/persistence/reads.py",
}
"""What a search adds when the data keys of its rows are not cached (never loaded in this
process, or older than `key_cache_ttl`): the key table's read and the unwrapping."""

pytestmark = pytest.mark.integration


class Tracer:
    """Collects (thread name, project file) pairs while `recording` is on."""

    def __init__(self) -> None:
        self.seen: dict[str, set[str]] = {}
        self.recording = False

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if self.recording and event == "call":
            name = frame.f_code.co_filename
            if name.startswith(ROOT) and name[len(ROOT) :].startswith(PACKAGES):
                thread = threading.current_thread().name
                self.seen.setdefault(thread, set()).add(name[len(ROOT) :])

    def record(self, request: Callable[[], Any], settle: float = 1.0) -> dict[str, set[str]]:
        self.seen = {}
        self.recording = True
        try:
            response = request()
            assert response.status_code in (200, 201), response.text
            time.sleep(settle)
        finally:
            self.recording = False
        return self.seen


@pytest.fixture
def ledger(make_ledger: Callable[..., Any], pg_schema: str) -> Any:
    """The walks are measured with the keys the requests use in the cache (30 s by default:
    a hybrid test's model load outlasts it), and the key fetch on its own (KEY_FETCH)."""
    made = make_ledger(key_cache_ttl=3600.0)
    register(pg_schema, made.mapper.keys)
    return made


@pytest.fixture
def tracer() -> Iterator[Tracer]:
    """Installed before the app's threads start, so that every thread is profiled."""
    tracer = Tracer()
    sys.setprofile(tracer)
    threading.setprofile(tracer)
    yield tracer
    sys.setprofile(None)
    threading.setprofile(None)  # type: ignore[arg-type]


def _request_files(seen: dict[str, set[str]]) -> set[str]:
    return set().union(*(files for thread, files in seen.items() if thread != "projection-worker"))


def _services(ledger: Any, worker: ProjectionWorker, schema: str, **extra: Any) -> Services:
    worker.start()
    return Services(
        ledger=ledger,
        reads=Reads(worker.pool, schema, worker.ledger.partition),
        metrics=Metrics(),
        jwt_secret=JWT_SECRET,
        worker=worker,
        **extra,
    )


def _memory(key: str, content: str) -> dict[str, str]:
    return {"memory_key": key, "content": content, "category": "preference", "scope_type": "global"}


def test_a_create_and_a_lexical_search_cross_the_documented_files(
    tracer: Tracer, ledger: Any, worker: ProjectionWorker, pg_schema: str, auth: Any
) -> None:
    with TestClient(create_app(_services(ledger, worker, pg_schema))) as client:
        headers = auth("walker", workspace="learning")
        client.post("/me/core-memories", headers=headers, json=_memory("warm", "warm up"))
        client.post("/tools/search_core_memories", headers=headers, json={"query": "warm"})
        created = tracer.record(
            lambda: client.post(
                "/me/core-memories",
                headers=headers,
                json=_memory("style", "I prefer examples before definitions"),
            )
        )
        searched = tracer.record(
            lambda: client.post(
                "/tools/search_core_memories",
                headers=headers,
                json={"query": "examples definitions"},
            ),
            settle=0.2,
        )
    to_events = _request_files(created)
    applied = created.get("projection-worker", set())
    to_row = to_events | {f for f in applied if not f.startswith("projections/views/")}
    to_row |= applied & ACTIVE_MEMORIES
    assert to_events >= CREATE_TO_EVENTS_ROW, sorted(CREATE_TO_EVENTS_ROW - to_events)
    assert to_row >= CREATE_TO_ACTIVE_ROW, sorted(CREATE_TO_ACTIVE_ROW - to_row)
    lexical = _request_files(searched)
    assert lexical >= LEXICAL_SEARCH, sorted(LEXICAL_SEARCH - lexical)
    assert "retrieval/hybrid.py" not in lexical


def test_a_hybrid_search_crosses_the_documented_files(
    tracer: Tracer,
    ledger: Any,
    make_worker: Callable[..., ProjectionWorker],
    pg_schema: str,
    auth: Any,
    embedding_service: EmbeddingService,
) -> None:
    worker = make_worker(all_projections(embedding_service))
    services = _services(ledger, worker, pg_schema, embeddings=embedding_service)
    with TestClient(create_app(services)) as client:
        headers = auth("walker", workspace="learning")
        for key, content in (("warm", "warm up"), ("style", "I prefer examples first")):
            client.post("/me/core-memories", headers=headers, json=_memory(key, content))
        client.post("/tools/search_core_memories", headers=headers, json={"query": "warm"})
        search = lambda: client.post(  # noqa: E731
            "/tools/search_core_memories",
            headers=headers,
            json={"query": "how should things be explained to me"},
        )
        searched = tracer.record(search, settle=0.2)
        ledger.mapper.keys.forget_all_cached()  # as after key_cache_ttl, or in another process
        fetched = tracer.record(search, settle=0.2)
    files = _request_files(searched)
    assert files >= HYBRID_SEARCH, sorted(HYBRID_SEARCH - files)
    assert not files & KEY_FETCH, sorted(files & KEY_FETCH)
    # The second search may also read vectors the embeddings worker wrote after the first one
    # (the cached matrix is refreshed row by row, through the embeddings view).
    added = _request_files(fetched) - files - {"projections/views/embeddings.py"}
    assert added == KEY_FETCH, sorted(added)
