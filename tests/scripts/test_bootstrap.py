"""scripts/_bootstrap.sh: scripts/serve (and migrate) get a virtualenv of their own with the
project alone, plus the extras their settings ask for; scripts/test gets the development
tools and every extra but rerank, whose torch is gigabytes (issue 24: serving installed mypy,
playwright and schemathesis).

Run on a copy of the script beside the real pyproject.toml, with a stand-in for Python that
makes a virtualenv whose `pip` only records what it was asked to install: nothing installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FAKE_PYTHON = """#!/usr/bin/env bash
# python3 -m venv DIR: a virtualenv whose python records `-m pip install ...` calls.
set -euo pipefail
mkdir -p "$3/bin"
cat >"$3/bin/python" <<'STUB'
#!/usr/bin/env bash
echo "${@: -1}" >>"$(dirname "$0")/../installs"
STUB
chmod +x "$3/bin/python"
"""


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "_bootstrap.sh", tmp_path / "scripts")
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    python = tmp_path / "fake-python"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    return tmp_path


def bootstrap(checkout: Path, profile: str | None, **settings: str) -> str:
    """Source the bootstrap as a script does; the virtualenv it chose."""
    env = {"PATH": os.environ["PATH"], "PYTHON": str(checkout / "fake-python"), **settings}
    if profile is not None:
        env["MEMLEDGER_BOOTSTRAP"] = profile
    done = subprocess.run(
        ["bash", "-c", 'source scripts/_bootstrap.sh && echo "$VENV"'],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def installs(venv: str) -> list[str]:
    return (Path(venv) / "installs").read_text().split()


def test_serving_installs_the_project_alone_in_its_own_virtualenv(checkout: Path) -> None:
    venv = bootstrap(checkout, "serve")
    assert venv == str(checkout / ".venv-serve")
    assert installs(venv) == ["."]
    assert not (checkout / ".venv").exists()


@pytest.mark.parametrize(
    ("settings", "spec"),
    [
        ({"MEMLEDGER_OTEL": "on"}, ".[otel]"),
        ({"MEMLEDGER_OTEL": "True"}, ".[otel]"),
        ({"MEMLEDGER_OTEL": "off"}, "."),
        ({"MEMLEDGER_OTEL": "1"}, ".[otel]"),
        ({"MEMLEDGER_RERANKER": "cross-encoder"}, ".[rerank]"),
        ({"MEMLEDGER_RERANKER": "http"}, "."),
        ({"MEMLEDGER_OTEL": "on", "MEMLEDGER_RERANKER": "cross-encoder"}, ".[otel,rerank]"),
    ],
)
def test_serving_adds_the_extras_its_settings_need(
    checkout: Path, settings: dict[str, str], spec: str
) -> None:
    assert installs(bootstrap(checkout, "serve", **settings)) == [spec]


def test_testing_installs_the_tools_and_every_extra_and_is_the_default(checkout: Path) -> None:
    venv = bootstrap(checkout, None)
    assert venv == str(checkout / ".venv")
    assert installs(venv) == [".[dev,otel]"]
    assert bootstrap(checkout, "dev") == venv and installs(venv) == [".[dev,otel]"]


def test_it_installs_again_only_when_pyproject_or_the_extras_change(checkout: Path) -> None:
    venv = bootstrap(checkout, "serve")
    bootstrap(checkout, "serve")
    assert installs(venv) == ["."]  # up to date: nothing installed
    bootstrap(checkout, "serve", MEMLEDGER_OTEL="on")
    assert installs(venv) == [".", ".[otel]"]
    stamp = Path(venv) / ".memledger-installed"
    os.utime(checkout / "pyproject.toml", (stamp.stat().st_mtime + 10,) * 2)
    bootstrap(checkout, "serve", MEMLEDGER_OTEL="on")
    assert installs(venv) == [".", ".[otel]", ".[otel]"]


def test_an_unknown_profile_is_refused(checkout: Path) -> None:
    done = subprocess.run(
        ["bash", "-c", "source scripts/_bootstrap.sh"],
        cwd=checkout,
        env={"PATH": os.environ["PATH"], "MEMLEDGER_BOOTSTRAP": "prod"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "must be dev or serve" in done.stderr
