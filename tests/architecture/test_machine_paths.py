"""No committed file names a path of the machine it was written or measured on.

A doc citing a worktree under /work, a lock file under /tmp or a home folder tells a newcomer
nothing and goes stale with the machine. Allowed: test code (its fixtures may write to the
temporary folder, and some test data is made to look like a path), and paths built at run
time (`tempfile.gettempdir()`, `Path.home()`, `~`), which this does not match.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MACHINE_PATH = re.compile(r"(?<![\w.~/-])/(?:tmp|work|root|home|Users|mnt)(?:/|\b)")
"""An absolute path into a folder that holds one machine's files."""


def _tracked() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    return [path for path in listed.split("\0") if path]


def _checked(path: str) -> bool:
    return not path.startswith("tests/") or path.endswith(".md")


def _hits(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if MACHINE_PATH.search(line)]


def test_no_tracked_doc_or_code_names_a_machine_path() -> None:
    found = {}
    for path in filter(_checked, _tracked()):
        try:
            text = (ROOT / path).read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue  # binary (screenshots), or deleted in the work tree
        if hits := _hits(text):
            found[path] = hits
    assert found == {}


@pytest.mark.parametrize(
    "line",
    [
        "against 26c3bc3 (`/work/wt/base`, a worktree of it)",
        "flock /tmp/bench.lock .venv/bin/python scripts/bench_ledger.py",
        "cache in /tmp",
        "PYTHONPATH=/home/alice/memledger",
        "ls /root/.cache",
    ],
)
def test_a_machine_path_is_found(line: str) -> None:
    assert _hits(line)


@pytest.mark.parametrize(
    "line",
    [
        "~/memledger/.memledger",
        "Path.home() / '.memledger'",
        "tests/retrieval/recall_set/tmp/x",
        "/usr/lib/postgresql/15/bin/initdb",
        "the embeddings work/s",
        "GET /healthz and /tools/search_core_memories",
    ],
)
def test_paths_made_at_run_time_or_of_the_repo_are_not(line: str) -> None:
    assert not _hits(line)
