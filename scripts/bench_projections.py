"""Projection rebuild events/s against decode-only throughput, and live projection lag.

Builds a ledger of at least --events real, sealed events (a mix of memory creates, updates,
suppressions and restores, candidates proposed, accepted and rejected, forgets and settings
changes, in English and Chinese, over many users) through the domain: aggregates are changed by
their own commands and saved with their keys, claims and fingerprints, ~--per-transaction
commands per ledger transaction, from --writers threads. Then, in the same run and over the same
events: the projection worker's catch-up into the live tables (in this process, then again from
emptied tables by --catch-up-processes `projections run` processes sharing the partitions
through their leases, scripts/_bench_catchup.py), decode-only throughput (read and
decode every event of every partition, no SQL writes, fresh key cache), and `rebuild` of all
projections together (fresh key cache); prints events/s, their ratios to decode-only and
whether the catch-up and the rebuild reach the targets of 10,000 and 15,000 events/s. The
ledger is partitioned (MEMLEDGER_PARTITIONS when the schema is made, default 32): each
partition is read in its own order, and the rebuild's processes take shares of them. Last,
with the worker running in-process, the lag from a committed write to its row in the
active-memories table (polled from another connection), and to `worker.wait` returning.
Everything lives in a throwaway schema `bench_<hex>`, dropped at the end (also on Ctrl-C)
unless --keep-schema.

    .venv/bin/python scripts/bench_projections.py --database-url postgresql://postgres@127.0.0.1/test
    .venv/bin/python scripts/bench_projections.py --events 20000 --json
    .venv/bin/python scripts/bench_projections.py --keep-schema      # then, to skip building:
    .venv/bin/python scripts/bench_projections.py --reuse-schema bench_0123456789ab --profile

The master key of a bench schema is derived from its name (bench data only), so a kept schema
can be reused by a later run: its ledger is kept (plus the live-lag writes of each run), its
projection tables are dropped and caught up again by the worker with the current code.
Without --database-url: MEMLEDGER_DATABASE_URL, else an embedded server in .memledger/.
"""

# The Chinese content has full-width punctuation on purpose.
# ruff: noqa: RUF001

from __future__ import annotations

import argparse
import base64
import cProfile
import hashlib
import itertools
import json
import os
import pathlib
import platform
import pstats
import random
import re
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import psycopg
from _bench_catchup import catch_up_in_processes
from _schemas import drop_schema, new_schema
from psycopg import sql

from api.bootstrap import build_ledger, build_worker
from api.embedded import start_embedded_postgres
from api.settings import Settings
from domain.ledger.ledger import MemoryLedger
from domain.ledger.persistence.tables import Claim, Fingerprint
from domain.model.candidate import CANDIDATE_TTL, MemoryCandidate
from domain.model.memory import Memory
from domain.model.memory_settings import MemorySettings
from domain.model.values import (
    CATEGORIES,
    WORKSPACES,
    Scope,
    check_category,
    check_content,
    check_key,
)
from projections.base import Projection
from projections.envelope import decode_batch
from projections.rebuild import PROCESSES, rebuild
from projections.registry import all_projections, main_projections, select
from projections.tracking import TRACKING, Tables
from projections.worker import ProjectionWorker

TARGET = 15_000.0  # rebuild events/s, all projections together
CATCH_UP_TARGET = 10_000.0  # the live worker's catch-up events/s, all projections together
SCHEMA = re.compile(r"^bench_[0-9a-f]{12}$")
WEIGHTS = {  # relative frequency of each command in the built ledger
    "create": 30,
    "update": 20,
    "suppress": 6,
    "restore": 5,
    "propose": 14,
    "propose_change": 4,
    "accept": 8,
    "reject": 6,
    "forget": 5,
    "settings": 2,
}
TOPICS_EN = ["Rust", "PostgreSQL", "linear algebra", "jazz piano", "Kubernetes", "French", "chess"]
TOPICS_ZH = ["机器学习", "古典诗词", "数据库", "微积分", "围棋", "摄影", "分布式系统"]
CONTENT_EN = [
    "I prefer worked examples before definitions when learning {t}.",
    "Please keep answers about {t} short and skip the history unless I ask.",
    "My current project uses {t}; assume I already know the basics.",
    "I teach {t} to first-year students on Tuesdays and need exercises with solutions.",
    "When we discuss {t}, compare it with Python, which I know well.",
    "Goal for this term: finish a small research prototype in {t} and write it up.",
]
CONTENT_ZH = [
    "学习{t}时我更喜欢先看例子，再看定义。",
    "关于{t}的回答请简短一些，除非我问，否则不用讲历史。",
    "我现在的项目用到了{t}，基础部分可以直接跳过。",
    "我每周二给一年级学生讲{t}，需要带答案的练习题。",
    "讨论{t}的时候，请和我熟悉的 Python 做个对比。",
    "这个学期的目标：用{t}完成一个小型研究原型并写成报告。",
]
EXTRA_EN = " Also: no emoji, British spelling, and cite sources when you can."
EXTRA_ZH = "另外：请不要使用表情符号，尽量给出参考资料。"
KEYS_EN = ["learning_style", "answer_length", "project_stack", "teaching_load", "term_goal"]
KEYS_ZH = ["学习方式", "回答长度", "项目技术栈", "教学安排", "学期目标"]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=os.environ.get("MEMLEDGER_DATABASE_URL"))
    parser.add_argument("--events", type=int, default=100_000, help="ledger events to build")
    parser.add_argument("--users", type=int, default=1000, help="users owning the events")
    parser.add_argument("--writers", type=int, default=2, help="threads building the ledger")
    parser.add_argument(
        "--per-transaction", type=int, default=100, help="commands per ledger transaction"
    )
    parser.add_argument(
        "--batch-size",
        type=int,
        default=5000,
        help="events per decode/rebuild batch (the rebuild's default)",
    )
    parser.add_argument("--rounds", type=int, default=1, help="alternations of decode, rebuild")
    parser.add_argument(
        "--processes", type=int, default=PROCESSES, help="processes filling the rebuilt tables"
    )
    parser.add_argument("--lag-writes", type=int, default=200, help="writes per lag measurement")
    parser.add_argument(
        "--catch-up-processes",
        type=int,
        default=2,
        help="then a catch-up by this many `projections run` processes sharing the partitions",
    )
    parser.add_argument(
        "--projections", default="", help="comma-separated projections to rebuild (default: all)"
    )
    parser.add_argument("--profile", action="store_true", help="one more rebuild, in cProfile")
    parser.add_argument("--profile-out", metavar="FILE", help="with --profile: pstats dump here")
    parser.add_argument("--reuse-schema", metavar="NAME", help="a kept bench schema: no build")
    parser.add_argument("--keep-schema", action="store_true", help="do not drop the schema")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    positive = (
        "events",
        "users",
        "writers",
        "per_transaction",
        "batch_size",
        "rounds",
        "processes",
        "catch_up_processes",
    )
    if any(getattr(args, name) < 1 for name in positive) or args.lag_writes < 0:
        parser.error("counts must be positive")
    if args.writers > 32 or args.writers > args.users:
        parser.error("--writers: at most 32, and at most --users")
    args.projections = [n.strip() for n in args.projections.split(",") if n.strip()]
    try:
        args.projections = [p.name for p in select(args.projections)]
    except KeyError as error:
        parser.error(f"--projections: {error.args[0]}")
    if args.reuse_schema and not SCHEMA.match(args.reuse_schema):
        parser.error("--reuse-schema: a name like bench_0123456789ab (from --keep-schema)")
    return args


def say(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)


def bench_master_key(schema: str) -> str:
    """The master key of a bench schema, derived from its name so a kept schema can be reused."""
    return base64.b64encode(hashlib.sha256(f"memledger-bench/{schema}".encode()).digest()).decode()


def rate(events: int, seconds: float) -> dict[str, float]:
    return {
        "events": events,
        "seconds": round(seconds, 3),
        "events_per_second": round(events / seconds, 1) if seconds else 0.0,
    }


def quantiles(seconds: list[float]) -> dict[str, float | None]:
    done = sorted(seconds)
    if not done:
        return {"p50_ms": None, "p95_ms": None, "max_ms": None}
    at = {q: done[min(len(done) - 1, int(len(done) * q))] for q in (0.5, 0.95)}
    return {
        "p50_ms": round(at[0.5] * 1000, 2),
        "p95_ms": round(at[0.95] * 1000, 2),
        "max_ms": round(done[-1] * 1000, 2),
    }


# -- building the ledger ---------------------------------------------------------------------


class Bag:
    """Aggregates by id, with O(1) add, remove and random pick."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self.where: dict[uuid.UUID, int] = {}

    def __len__(self) -> int:
        return len(self.items)

    def add(self, key: uuid.UUID, item: Any) -> None:
        self.where[key] = len(self.items)
        self.items.append((key, item))

    def remove(self, key: uuid.UUID) -> None:
        index = self.where.pop(key, None)
        if index is None:
            return
        last = self.items.pop()
        if index < len(self.items):
            self.items[index] = last
            self.where[last[0]] = index

    def pick(self, rng: random.Random, busy: set[uuid.UUID]) -> Any:
        """A random item not in `busy` (None after a few misses)."""
        for _ in range(4):
            if not self.items:
                return None
            key, item = self.items[rng.randrange(len(self.items))]
            if key not in busy:
                return item
        return None


@dataclass
class Transaction:
    """Aggregates changed by staged commands, and the side-table changes saved with them."""

    aggregates: dict[uuid.UUID, Any] = field(default_factory=dict)
    new_keys: list[Any] = field(default_factory=list)
    claims: list[Claim] = field(default_factory=list)
    fingerprints: list[Fingerprint] = field(default_factory=list)
    link_keys: list[tuple[uuid.UUID, uuid.UUID]] = field(default_factory=list)
    shred_memories: list[uuid.UUID] = field(default_factory=list)
    shred_keys: list[uuid.UUID] = field(default_factory=list)
    uncache: list[uuid.UUID] = field(default_factory=list)  # keys destroyed by this save

    def touch(self, *aggregates: Any) -> None:
        for aggregate in aggregates:
            self.aggregates[aggregate.id] = aggregate


class Workload:
    """One writer thread's users and their aggregates, changed as the ledger's commands do.

    Each command mirrors its MemoryLedger method (validation, keyed hashes, staged data keys,
    claims, fingerprints, shredding), but many commands are saved in one `store.save` transaction.
    Users are disjoint between writers and no aggregate changes twice in one transaction, so
    nothing here can lose a race; keys are unique by construction, so the claim and proposal
    look-ups the commands make before writing would find nothing.
    """

    def __init__(self, ledger: MemoryLedger, users: list[str], writer: int) -> None:
        self.ledger = ledger
        self.users = users
        self.writer = writer
        self.rng = random.Random(writer)
        self.serial = itertools.count(1)
        self.active, self.suppressed, self.pending = Bag(), Bag(), Bag()
        self.settings: dict[str, MemorySettings] = {}
        self.linked: dict[uuid.UUID, list[uuid.UUID]] = defaultdict(list)  # memory -> candidates
        self.done: Counter[str] = Counter()
        self.commands: dict[str, Callable[[Transaction, set[uuid.UUID]], bool]] = {
            name: getattr(self, f"_{name}") for name in WEIGHTS
        }

    def transaction(self, size: int) -> int:
        """Stage about `size` commands and save them in one transaction; returns its events."""
        tx, busy = Transaction(), set[uuid.UUID]()
        names, weights = list(WEIGHTS), list(WEIGHTS.values())
        staged = 0
        for name in self.rng.choices(names, weights, k=size * 3):
            if staged == size:
                break
            if self.commands[name](tx, busy):
                self.done[name] += 1
                staged += 1
        aggregates = list(tx.aggregates.values())
        events = sum(len(a.pending_events) for a in aggregates)
        self.ledger.store.save(
            *aggregates,
            new_keys=tx.new_keys,
            claims=tx.claims,
            fingerprints=tx.fingerprints,
            link_keys=tx.link_keys,
            shred_memories=tx.shred_memories,
            shred_keys=tx.shred_keys,
        )
        self.ledger.keys.forget_cached(tx.uncache)
        return events

    # -- content ---------------------------------------------------------------------------

    def _text(self, chinese: bool) -> str:
        rng = self.rng
        if chinese:
            text = rng.choice(CONTENT_ZH).format(t=rng.choice(TOPICS_ZH))
            extra = EXTRA_ZH
        else:
            text = rng.choice(CONTENT_EN).format(t=rng.choice(TOPICS_EN))
            extra = EXTRA_EN
        text += extra * rng.choice((0, 0, 1, 2)) + f" (#{self.writer}-{next(self.serial)})"
        return check_content(text)

    def _fresh(self) -> tuple[str, Scope, str, str, str]:
        """A user and a new (scope, key, content, category) for them."""
        rng = self.rng
        chinese = rng.random() < 0.5
        scope = Scope.global_() if rng.random() < 0.6 else Scope.workspace(rng.choice(WORKSPACES))
        stem = rng.choice(KEYS_ZH if chinese else KEYS_EN)
        key = check_key(f"{stem}_{self.writer}_{next(self.serial)}")
        category = check_category(rng.choice(CATEGORIES))
        return rng.choice(self.users), scope, key, self._text(chinese), category

    def _live(self, busy: set[uuid.UUID]) -> Memory | None:
        bag = self.suppressed if self.rng.random() < 0.1 else self.active
        memory: Memory | None = bag.pick(self.rng, busy)
        return memory

    # -- commands (see domain/ledger/memories.py, candidates.py, forgetting.py) -----------

    def _create(self, tx: Transaction, busy: set[uuid.UUID]) -> bool:
        user, scope, key, text, category = self._fresh()
        expires = self.ledger.clock() + timedelta(days=180) if self.rng.random() < 0.1 else None
        via = self.rng.choice(("user_api", "agent_tool"))
        memory, new_key, claim = self.ledger.memories.build(
            user, scope, key, text, category, "explicit", via, None, None, expires
        )
        tx.touch(memory)
        tx.new_keys.append(new_key)
        tx.claims.append(claim)
        busy.add(memory.id)
        self.active.add(memory.id, memory)
        return True

    def _update(self, tx: Transaction, busy: set[uuid.UUID]) -> bool:
        memory = self._live(busy)
        if memory is None:
            return False
        text = self._text(self.rng.random() < 0.5)
        category = memory.category if self.rng.random() < 0.8 else self.rng.choice(CATEGORIES)
        changed = memory.change_content(
            expected_revision=memory.revision,
            content=text,
            content_hash=self.ledger.hashes.content(memory.id, text),
            category=category,
            changed_via=self.rng.choice(("user_api", "agent_tool")),
            replace=self.rng.random() < 0.1,  # the legacy PUT replaces
        )
        tx.touch(memory)
        busy.add(memory.id)
        return changed

    def _suppress(self, tx: Transaction, busy: set[uuid.UUID]) -> bool:
        memory: Memory | None = self.active.pick(self.rng, busy)
        if memory is None or not memory.suppress():
            return False
        tx.touch(memory)
        busy.add(memory.id)
        self.active.remove(memory.id)
        self.suppressed.add(memory.id, memory)
        return True

    def _restore(self, tx: Transaction, busy: set[uuid.UUID]) -> bool:
        memory: Memory | None = self.suppressed.pick(self.rng, busy)
        if memory is None or not memory.restore():
            return False
        tx.touch(memory)
        busy.add(memory.id)
        self.suppressed.remove(memory.id)
        self.active.add(memory.id, memory)
        return True

    def _forget(self, tx: Transaction, busy: set[uuid.UUID]) -> bool:
        memory = self._live(busy)
        if memory is None:
            return False
        memory.forget(self.ledger.clock())
        tx.touch(memory)
        busy.add(memory.id)
        tx.shred_memories.append(memory.id)
        # The shred also destroys the keys of candidates about this memory: they are done for.
        linked = self.linked.pop(memory.id, [])
        tx.uncache += [memory.id, *linked]
        busy.update(linked)
        for candidate_id in linked:
            self.pending.remove(candidate_id)
        self.active.remove(memory.id)
        self.suppressed.remove(memory.id)
        return True

    def _propose(self, tx: Transaction, busy: set[uuid.UUID]) -> bool:
        user, scope, key, text, category = self._fresh()
        self._stage_candidate(tx, busy, user, "create", None, None, scope, key, text, category)
        return True

    def _propose_change(self, tx: Transaction, busy: set[uuid.UUID]) -> bool:
        memory = self._live(busy)
        if memory is None:
            return False
        operation = "replace" if self.rng.random() < 0.2 else "update"
        text = self._text(self.rng.random() < 0.5)
        busy.add(memory.id)
        self._stage_candidate(
            tx,
            busy,
            memory.user_id,
            operation,
            memory.id,
            memory.revision,
            memory.scope,
            memory.memory_key,
            text,
            memory.category,
        )
        return True

    def _stage_candidate(
        self,
        tx: Transaction,
        busy: set[uuid.UUID],
        user: str,
        operation: str,
        target: uuid.UUID | None,
        expected_revision: int | None,
        scope: Scope,
        key: str,
        text: str,
        category: str,
    ) -> None:
        MemoryCandidate.check_operation(operation, target)
        now = self.ledger.clock()
        print_ = self.ledger.hashes.proposal(user, scope, key, text, category)
        candidate_id = uuid.uuid4()
        tx.new_keys.append(self.ledger.keys.stage(candidate_id, user, "candidate", target))
        candidate = MemoryCandidate.new(
            candidate_id,
            user_id=user,
            operation=operation,
            target_memory_id=target,
            expected_revision=expected_revision,
            proposed_scope_type=scope.scope_type,
            proposed_workspace_type=scope.workspace_type,
            proposed_key=key,
            proposed_content=text,
            proposed_category=category,
            source_conversation_id=f"conv-{uuid.uuid4().hex[:12]}",
            expires_at=now + CANDIDATE_TTL,
        )
        tx.touch(candidate)
        tx.fingerprints.append(
            Fingerprint(
                candidate_id,
                user,
                print_.value,
                target,
                "pending",
                now,
                print_.key_id,
                print_.key_check,
            )
        )
        busy.add(candidate_id)
        self.pending.add(candidate_id, (candidate, print_))
        if target is not None:
            self.linked[target].append(candidate_id)

    def _accept(self, tx: Transaction, busy: set[uuid.UUID]) -> bool:
        picked = self.pending.pick(self.rng, busy)
        if picked is None:
            return False
        candidate, print_ = picked
        edited = self._text(self.rng.random() < 0.5) if self.rng.random() < 0.2 else None
        if candidate.operation == "create":
            memory, new_key, claim = self.ledger.memories.build(
                candidate.user_id,
                Scope(candidate.proposed_scope_type, candidate.proposed_workspace_type),
                candidate.proposed_key,
                edited or candidate.proposed_content,
                candidate.proposed_category,
                "confirmed",
                "candidate",
                candidate.id,
                None,
                None,
            )
            tx.new_keys.append(new_key)
            tx.claims.append(claim)
            tx.link_keys.append((candidate.id, memory.id))
            self.linked[memory.id].append(candidate.id)
            self.active.add(memory.id, memory)
            subject = memory.id
        else:
            memory = self._target(candidate)
            if memory is None or memory.id in busy:
                return False
            if memory.revision != candidate.expected_revision:
                return self._reject(tx, busy, picked)  # stale: the user turns it down
            final = edited or candidate.proposed_content
            memory.change_content(
                expected_revision=candidate.expected_revision,
                content=final,
                content_hash=self.ledger.hashes.content(memory.id, final),
                category=candidate.proposed_category,
                changed_via="candidate",
                replace=candidate.operation == "replace",
                source_candidate_id=candidate.id,
            )
            subject = candidate.target_memory_id
        candidate.accept(resulting_memory_id=memory.id, edited_content=edited)
        now = self.ledger.clock()
        tx.touch(memory, candidate)
        tx.fingerprints.append(
            Fingerprint(candidate.id, candidate.user_id, print_.value, subject, "closed", now)
        )
        busy.update((memory.id, candidate.id))
        self.pending.remove(candidate.id)
        return True

    def _target(self, candidate: MemoryCandidate) -> Memory | None:
        assert candidate.target_memory_id is not None
        for bag in (self.active, self.suppressed):
            index = bag.where.get(candidate.target_memory_id)
            if index is not None:
                memory: Memory = bag.items[index][1]
                return memory
        return None

    def _reject(self, tx: Transaction, busy: set[uuid.UUID], picked: Any | None = None) -> bool:
        picked = picked or self.pending.pick(self.rng, busy)
        if picked is None:
            return False
        candidate, print_ = picked
        candidate.reject()
        now = self.ledger.clock()
        tx.touch(candidate)
        tx.shred_keys.append(candidate.id)
        tx.uncache.append(candidate.id)
        tx.fingerprints.append(
            Fingerprint(
                candidate.id,
                candidate.user_id,
                print_.value,
                candidate.target_memory_id,
                "rejected",
                now,
            )
        )
        busy.add(candidate.id)
        self.pending.remove(candidate.id)
        return True

    def _settings(self, tx: Transaction, busy: set[uuid.UUID]) -> bool:
        user = self.rng.choice(self.users)
        settings = self.settings.get(user) or MemorySettings(user_id=user)
        if settings.id in busy:
            return False
        self.settings[user] = settings
        settings.change(
            saved_memory_enabled=None, auto_extract_enabled=not settings.auto_extract_enabled
        )
        tx.touch(settings)
        busy.add(settings.id)
        return True


def build(ledger: MemoryLedger, args: argparse.Namespace) -> dict[str, Any]:
    """Write at least args.events events from args.writers threads; returns what was built."""
    users = [f"bench-user-{n:05d}" for n in range(args.users)]
    workloads = [Workload(ledger, users[w :: args.writers], w) for w in range(args.writers)]
    lock, stop = threading.Lock(), threading.Event()
    errors: list[BaseException] = []
    totals = {"events": 0, "transactions": 0}

    def work(workload: Workload) -> None:
        try:
            while not stop.is_set():
                with lock:
                    if totals["events"] >= args.events:
                        return
                events = workload.transaction(args.per_transaction)
                with lock:
                    before = totals["events"]
                    totals["events"] += events
                    totals["transactions"] += 1
                    if before // 10_000 != totals["events"] // 10_000:
                        say(f"built {totals['events']:,} events")
        except BaseException as error:
            errors.append(error)
            stop.set()

    threads = [threading.Thread(target=work, args=(w,), daemon=True) for w in workloads]
    began = time.perf_counter()
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive():  # join in slices, so Ctrl-C is seen at once
                thread.join(0.2)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
    seconds = time.perf_counter() - began
    if errors:
        raise errors[0]
    commands = sum((w.done for w in workloads), Counter())
    return {
        **rate(totals["events"], seconds),
        "transactions": totals["transactions"],
        "writers": args.writers,
        "users": args.users,
        "commands": dict(sorted(commands.items())),
    }


# -- measuring -------------------------------------------------------------------------------


def drop_read_side(url: str, schema: str) -> None:
    """Drop a reused schema's projection tables: the worker rebuilds them with this code."""
    t = Tables(schema)
    tables = [t[logical] for p in all_projections() for logical in p.tables] + [t[TRACKING]]
    with psycopg.connect(url, autocommit=True, options="-c lock_timeout=30s") as conn:
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.SQL(", ").join(tables)))


def catch_up_shared(
    settings: Settings, url: str, heads: dict[int, int], processes: int
) -> dict[str, Any]:
    """The live tables emptied (all but embeddings, which keeps its rows) and caught up again
    by `processes` processes; the result checked equal to the first catch-up's."""
    main = main_projections()
    before = table_digests(url, settings.db_schema, main)
    tables = Tables(settings.db_schema)
    with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
        for projection in main:
            for logical in projection.tables:
                conn.execute(sql.SQL("TRUNCATE {}").format(tables[logical]))
        conn.execute(
            sql.SQL("DELETE FROM {} WHERE projection <> 'embeddings'").format(tables[TRACKING])
        )
    shared = catch_up_in_processes(settings, url, heads, processes)
    after = table_digests(url, settings.db_schema, main)
    shared["identical"] = before == after
    shared["differences"] = sorted(name for name in before if before[name] != after[name])
    return shared


def table_digests(url: str, schema: str, projections: list[Projection]) -> dict[str, list[str]]:
    """Per projection, an order-free digest of each of its tables (md5 of its sorted rows)."""
    tables = Tables(schema)
    digest = sql.SQL("SELECT md5(string_agg(r::text, '|' ORDER BY r::text)) FROM {} r")
    digests: dict[str, list[str]] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        for projection in projections:
            for logical in projection.tables:
                row = conn.execute(digest.format(tables[logical])).fetchone()
                digests.setdefault(projection.name, []).append(str(row[0] if row else None))
    return digests


def ledger_facts(url: str, schema: str, ledger: MemoryLedger) -> dict[str, Any]:
    events = sql.Identifier(schema, ledger.recorder.events_table_name)
    with psycopg.connect(url, autocommit=True) as conn:
        # Reading the whole table also warms the caches for every measurement after it.
        count, aggregates, size = conn.execute(
            sql.SQL(
                "SELECT count(*), count(DISTINCT originator_id), coalesce(sum(length(state)), 0)"
                " FROM {}"
            ).format(events)
        ).fetchone()
        by_topic = conn.execute(
            sql.SQL("SELECT topic, count(*) FROM {} GROUP BY topic ORDER BY 2 DESC").format(events)
        ).fetchall()
        sealed = conn.execute(
            sql.SQL("SELECT count(*) FROM {} WHERE substring(state FROM 1 FOR 4) = 'MLS1'").format(
                events
            )
        ).fetchone()[0]
    return {
        "events": count,
        "aggregates": aggregates,
        "sealed_events": sealed,
        "stored_bytes": size,
        "topics": {topic.removeprefix("memledger:"): n for topic, n in by_topic},
    }


def machine_facts(url: str) -> dict[str, Any]:
    names = ("server_version", "fsync", "synchronous_commit", "shared_buffers")
    with psycopg.connect(url, autocommit=True) as conn:
        values = conn.execute(
            "SELECT " + ", ".join(f"current_setting('{n}')" for n in names)
        ).fetchone()
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "python": platform.python_version(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        **dict(zip(names, values, strict=True)),
    }


def decode_only(
    settings: Settings, url: str, heads: dict[int, int], batch_size: int
) -> dict[str, Any]:
    """Read and decode every event of each partition up to its head in `heads` as a rebuild
    does (partition after partition), writing nothing."""
    ledger = build_ledger(settings, url)  # a fresh key cache, as a rebuild's process has
    recorder = ledger.recorder
    try:
        unreadable, done = 0, 0
        began = time.perf_counter()
        for partition, head in sorted(heads.items()):
            after = 0
            while after < head:
                notes = recorder.read_partition(partition, after, batch_size, until=head)  # type: ignore[attr-defined]
                if not notes:
                    break
                batch = decode_batch(ledger.mapper, notes, fresh=False)
                unreadable += sum(1 for envelope in batch if envelope.event is None)
                done += len(batch)
                after = batch[-1].local
        seconds = time.perf_counter() - began
    finally:
        ledger.close()
    return {**rate(done, seconds), "unreadable": unreadable}


def timed(projections: list[Projection], seconds: dict[str, float]) -> list[Projection]:
    """The projections, each `apply` adding its wall time (its SQL included) to `seconds`."""
    for projection in projections:

        def apply(
            cur: Any,
            t: Any,
            batch: Any,
            _apply: Any = projection.apply,
            _name: str = projection.name,
        ) -> None:
            began = time.perf_counter()
            try:
                _apply(cur, t, batch)
            finally:
                seconds[_name] = seconds.get(_name, 0.0) + time.perf_counter() - began

        projection.apply = apply  # type: ignore[method-assign]
    return projections


def rebuild_all(
    settings: Settings,
    url: str,
    pool: Any,
    names: list[str],
    batch_size: int,
    processes: int,
    profiler: cProfile.Profile | None = None,
) -> dict[str, Any]:
    """`rebuild` of the projections, on a ledger with a fresh key cache.

    With several processes, `apply_seconds` and the profile cover this process only (the
    children's share is not seen here).
    """
    ledger = build_ledger(settings, url)
    applying: dict[str, float] = {}
    projections = timed(select(names), applying)
    try:
        if profiler is not None:
            profiler.enable()
        try:
            report = rebuild(
                ledger,
                pool,
                settings.db_schema,
                projections,
                batch_size=batch_size,
                processes=processes,
            )
        finally:
            if profiler is not None:
                profiler.disable()
    finally:
        ledger.close()
    return {
        **rate(report.events, report.seconds),
        "processes": processes,
        "check_seconds": round(report.check_seconds, 3),
        "identical": report.identical,
        "differences": report.differences,
        "apply_seconds": {name: round(s, 3) for name, s in applying.items()},
        # Reading and decoding the batches, commits and DDL: the rest of the rebuild's time.
        "other_seconds": round(report.seconds - sum(applying.values()), 3),
    }


def profile_rows(profiler: cProfile.Profile, top: int = 25) -> dict[str, list[dict[str, Any]]]:
    stats = pstats.Stats(profiler)
    root = str(pathlib.Path.cwd()) + os.sep
    rows = []
    for (path, line, name), (_, calls, own, cumulative, _) in stats.stats.items():  # type: ignore[attr-defined]
        where = path.replace(root, "").replace(sys.prefix + os.sep, "")
        rows.append(
            {
                "function": f"{where}:{line}({name})" if line else name,
                "calls": calls,
                "own_s": round(own, 3),
                "cumulative_s": round(cumulative, 3),
            }
        )
    return {
        "by_own_time": sorted(rows, key=lambda r: -r["own_s"])[:top],
        "by_cumulative_time": sorted(rows, key=lambda r: -r["cumulative_s"])[:top],
    }


def live_lag(
    ledger: MemoryLedger, worker: Any, url: str, schema: str, writes: int
) -> dict[str, Any]:
    """Commit-to-visible lag of single memory creates, with the worker running in-process."""
    user, timeout = "bench-lag-user", 10.0
    active = Tables(schema)["active_memories"]
    query = sql.SQL("SELECT 1 FROM {} WHERE partition = %s AND memory_id = %s").format(active)
    partition = ledger.partition(user)
    serial, run = itertools.count(), uuid.uuid4().hex[:8]  # keys unique across reuses

    def write() -> tuple[Any, float]:
        n = next(serial)
        chinese = n % 2 == 1
        outcome = ledger.create_memory(
            user,
            scope=Scope.global_(),
            memory_key=f"{'延迟探针' if chinese else 'lag_probe'}_{run}_{n}",
            content=(CONTENT_ZH if chinese else CONTENT_EN)[n % 6].format(t=f"probe {n}"),
            category="preference",
        )
        assert outcome.status == "created", outcome.status
        return outcome, time.perf_counter()  # create_memory returns once the commit is done

    visible: list[float] = []
    waited: list[float] = []
    timeouts = 0
    worker.start()
    try:
        with psycopg.connect(url, autocommit=True) as probe:
            for _ in range(3):  # warm up: user key, prepared statements, the worker's LISTEN
                outcome, _committed = write()
                worker.wait(outcome.position, timeout)
            for _ in range(writes):
                outcome, committed = write()
                memory_id = outcome.memory.memory_id
                while probe.execute(query, (partition, memory_id), prepare=True).fetchone() is None:
                    if time.perf_counter() - committed > timeout:
                        timeouts += 1
                        break
                    time.sleep(0.0005)
                else:
                    visible.append(time.perf_counter() - committed)
                outcome, committed = write()
                if worker.wait(outcome.position, timeout):
                    waited.append(time.perf_counter() - committed)
                else:
                    timeouts += 1
    finally:
        worker.stop()
    return {
        "writes": writes,
        "visible": quantiles(visible),
        "worker_wait": quantiles(waited),
        "timeouts": timeouts,
    }


def bench(url: str, schema: str, args: argparse.Namespace) -> dict[str, Any]:
    settings = Settings(
        database_url=url,
        db_schema=schema,
        master_key=bench_master_key(schema),
        pool_size=args.writers + 2,
        max_overflow=args.writers + 2,
        key_cache_ttl=3600.0,
    )
    ledger = build_ledger(settings, url)
    worker = None
    try:
        data: dict[str, Any] = {"machine": machine_facts(url), "schema": schema}
        if args.reuse_schema:
            if not ledger.recorded():
                raise SystemExit(f"bench: schema {schema} holds no ledger events")
            say(f"reusing schema {schema} ({ledger.recorded():,} events): no build")
            drop_read_side(url, schema)
            data["build"] = None
        else:
            say(f"building a ledger of >= {args.events:,} events in schema {schema}")
            data["build"] = build(ledger, args)
            say(f"built in {data['build']['seconds']:.1f}s")
        data["ledger"] = ledger_facts(url, schema, ledger)
        heads = dict(ledger.recorder.heads())  # type: ignore[attr-defined]
        data["ledger"]["partitions"] = len(heads)
        data["ledger"]["partitions_used"] = sum(1 for head in heads.values() if head)
        worker = build_worker(settings, ledger, url)

        say("projection worker catching up the live tables")
        began = time.perf_counter()
        caught = worker.catch_up()
        data["catch_up"] = rate(caught, time.perf_counter() - began)
        # The embeddings rows have a worker of their own in the service: caught up here too
        # (not timed), else each rebuild's check would replay the whole ledger into them.
        say("embeddings rows catching up (not timed)")
        ProjectionWorker(ledger, worker.pool, schema, select(["embeddings"])).catch_up()
        if args.catch_up_processes > 1:
            say(f"again from empty tables, by {args.catch_up_processes} processes (leases)")
            data["catch_up_shared"] = catch_up_shared(settings, url, heads, args.catch_up_processes)

        names = args.projections
        data["projections"] = names
        profiler = cProfile.Profile() if args.profile else None
        decodes, rebuilds = [], []
        for round_ in range(1, args.rounds + 1):
            say(f"round {round_}/{args.rounds}: decode only")
            decodes.append(decode_only(settings, url, heads, args.batch_size))
            say(f"round {round_}/{args.rounds}: rebuild of {len(names)} projections")
            rebuilds.append(
                rebuild_all(settings, url, worker.pool, names, args.batch_size, args.processes)
            )
        decode, rebuilt = median_of(decodes), median_of(rebuilds)
        rebuilt["identical"] = all(r["identical"] for r in rebuilds)
        ratio = rebuilt["events_per_second"] / decode["events_per_second"]
        catch_up = data["catch_up"]["events_per_second"]
        data |= {
            "decode": decode,
            "rebuild": rebuilt,
            "rounds": {"decode": decodes, "rebuild": rebuilds} if args.rounds > 1 else None,
            "ratio": round(ratio, 3),
            "catch_up_ratio": round(catch_up / decode["events_per_second"], 3),
            "target": {
                "events_per_second": TARGET,
                "met": rebuilt["events_per_second"] >= TARGET,
            },
            "catch_up_target": {
                "events_per_second": CATCH_UP_TARGET,
                "met": catch_up >= CATCH_UP_TARGET,
                "met_by_processes": (
                    data["catch_up_shared"]["events_per_second"] >= CATCH_UP_TARGET
                    if "catch_up_shared" in data
                    else None
                ),
            },
        }
        if profiler is not None:
            say("rebuild again, in one process, in cProfile")
            profiled = rebuild_all(settings, url, worker.pool, names, args.batch_size, 1, profiler)
            data["profile"] = {"rebuild": profiled, **profile_rows(profiler)}
            if args.profile_out:
                profiler.dump_stats(args.profile_out)
        if args.lag_writes:
            say(f"live lag: {args.lag_writes} writes, worker running in-process")
            data["lag"] = live_lag(ledger, worker, url, schema, args.lag_writes)
        data["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
        return data
    finally:
        if worker is not None:
            worker.stop()
            worker.pool.close()
        ledger.close()


def median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median throughput."""
    ordered = sorted(runs, key=lambda r: r["events_per_second"])
    return dict(ordered[(len(ordered) - 1) // 2])


def report(data: dict[str, Any]) -> None:
    m = data["machine"]
    print(
        f"nproc {m['nproc']}, PostgreSQL {m['server_version']}, python {m['python']},"
        f" fsync {m['fsync']}, synchronous_commit {m['synchronous_commit']},"
        f" shared_buffers {m['shared_buffers']}"
    )
    print(
        f"load average (1, 5, 15 min) at start {m['load_average_at_start']},"
        f" at end {m['load_average_at_end']}"
    )
    built, facts = data["build"], data["ledger"]
    if built:
        print(
            f"built {built['events']:,} events in {built['seconds']:.1f}s"
            f" ({built['events_per_second']:,.0f} events/s, {built['transactions']:,}"
            f" transactions, {built['writers']} writers, {built['users']:,} users)"
        )
        print("  commands: " + ", ".join(f"{k} {v:,}" for k, v in built["commands"].items()))
    print(
        f"ledger: {facts['events']:,} events ({facts['sealed_events']:,} sealed),"
        f" {facts['aggregates']:,} aggregates, {facts['stored_bytes'] / 1e6:.1f} MB stored,"
        f" {facts['partitions_used']} of {facts['partitions']} partitions used"
    )
    print("  " + ", ".join(f"{k} {v:,}" for k, v in facts["topics"].items()))
    c = data["catch_up"]
    print(
        f"worker catch-up:  {c['events']:>8,} events in {c['seconds']:7.2f}s"
        f" = {c['events_per_second']:>9,.0f} events/s"
    )
    shared = data.get("catch_up_shared")
    if shared:
        same = "identical to the first" if shared["identical"] else "DIFFERED from the first"
        print(
            f"catch-up again:   {shared['events']:>8,} events in {shared['seconds']:7.2f}s"
            f" = {shared['events_per_second']:>9,.0f} events/s ({shared['processes']}"
            f" `projections run` processes sharing the partitions; {same})"
        )
    d, r = data["decode"], data["rebuild"]
    print(
        f"decode only:      {d['events']:>8,} events in {d['seconds']:7.2f}s"
        f" = {d['events_per_second']:>9,.0f} events/s ({d['unreadable']} unreadable)"
    )
    print(f"projections rebuilt: {', '.join(data['projections'])}")
    same = "identical to live" if r["identical"] else f"DIFFERED from live: {r['differences']}"
    print(
        f"rebuild (all):    {r['events']:>8,} events in {r['seconds']:7.2f}s"
        f" = {r['events_per_second']:>9,.0f} events/s ({r['processes']} processes; {same})"
    )
    print(
        f"  then brought to one position, compared row for row and swapped in"
        f" {r['check_seconds']:.2f}s ({r['events'] / (r['seconds'] + r['check_seconds']):,.0f}"
        " events/s with the check)"
    )
    parts = sorted(r["apply_seconds"].items(), key=lambda item: -item[1])
    if parts:
        print(
            "  time in apply (with its SQL): "
            + ", ".join(f"{name} {seconds:.2f}s" for name, seconds in parts)
            + f"; reading, decoding, commits {r['other_seconds']:.2f}s"
        )
    else:
        print("  (time per projection: in the forked processes; see --processes 1)")
    if data.get("rounds"):
        each = ", ".join(f"{run['events_per_second']:,.0f}" for run in data["rounds"]["rebuild"])
        print(f"  rebuild events/s of each round: {each} (the median is shown)")
    verdict = "meets" if data["target"]["met"] else "does NOT meet"
    print(
        f"ratio rebuild/decode {data['ratio']}; rebuild {verdict} the >="
        f" {TARGET:,.0f} events/s target"
    )
    verdict = "meets" if data["catch_up_target"]["met"] else "does NOT meet"
    print(
        f"ratio catch-up/decode {data['catch_up_ratio']}; catch-up by one process {verdict} the"
        f" >= {CATCH_UP_TARGET:,.0f} events/s target"
    )
    by_processes = data["catch_up_target"]["met_by_processes"]
    if by_processes is not None:
        verdict = "meets" if by_processes else "does NOT meet"
        print(f"  catch-up by {data['catch_up_shared']['processes']} processes {verdict} it")
    if data.get("profile"):
        p = data["profile"]
        print(f"profiled rebuild: {p['rebuild']['events_per_second']:,.0f} events/s (in cProfile)")
        for title, key in (("own time", "by_own_time"), ("cumulative", "by_cumulative_time")):
            print(f"  top by {title}:  calls  own s  cum s  function")
            for row in p[key][:15]:
                print(
                    f"  {row['calls']:>20,} {row['own_s']:>6.2f} {row['cumulative_s']:>6.2f}"
                    f"  {row['function']}"
                )
    if data.get("lag"):
        lag = data["lag"]
        for name, title in (("visible", "commit -> row visible"), ("worker_wait", "worker.wait")):
            q = lag[name]
            print(
                f"live lag {title}: p50 {q['p50_ms']} ms, p95 {q['p95_ms']} ms,"
                f" max {q['max_ms']} ms ({lag['writes']} writes)"
            )
        if lag["timeouts"]:
            print(f"  {lag['timeouts']} writes not visible within 10 s")


def main() -> None:
    args = parse_args()
    url = args.database_url or start_embedded_postgres(pathlib.Path(".memledger/bench-postgres"))
    schema = args.reuse_schema or new_schema()
    keep = args.keep_schema or bool(args.reuse_schema)
    if args.reuse_schema:
        with psycopg.connect(url, autocommit=True) as conn:
            found = conn.execute(
                "SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)
            ).fetchone()
        if found is None:
            raise SystemExit(f"bench: no schema {schema} in this database")
    try:
        data = bench(url, schema, args)
    finally:
        if keep:
            say(f"kept schema {schema} (reuse it with --reuse-schema {schema})")
        else:
            drop_schema(url, schema)
            say(f"dropped schema {schema}")
    if args.json:
        print(json.dumps(data, indent=2, default=str))
    else:
        report(data)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
