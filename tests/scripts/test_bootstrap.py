"""scripts/_bootstrap.sh: scripts/serve (and migrate) get a virtualenv of their own with the
project alone, plus the extras their settings ask for; scripts/test gets the development
tools and every extra but rerank, whose torch is gigabytes (issue 24: serving installed mypy,
playwright and schemathesis), and the Python SDK of clients/python (issue 25).

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
# python3 -m venv DIR: a virtualenv whose python records `-m pip install ...` calls: the
# editable targets of each, on one line.
set -euo pipefail
mkdir -p "$3/bin"
cat >"$3/bin/python" <<'STUB'
#!/usr/bin/env bash
targets=()
while (($#)); do
    if [[ $1 == -e ]]; then targets+=("$2"); shift; fi
    shift
done
echo "${targets[*]}" >>"$(dirname "$0")/../installs"
STUB
chmod +x "$3/bin/python"
"""


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "_bootstrap.sh", tmp_path / "scripts")
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    (tmp_path / "clients" / "python").mkdir(parents=True)
    shutil.copy(ROOT / "clients" / "python" / "pyproject.toml", tmp_path / "clients" / "python")
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
    """What each pip call installed, one entry per call (its targets, space-separated)."""
    return (Path(venv) / "installs").read_text().splitlines()


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


def test_testing_installs_the_tools_every_extra_and_the_sdk_and_is_the_default(
    checkout: Path,
) -> None:
    venv = bootstrap(checkout, None)
    assert venv == str(checkout / ".venv")
    assert installs(venv) == [".[dev,otel] clients/python"]
    assert bootstrap(checkout, "dev") == venv and installs(venv) == [".[dev,otel] clients/python"]


def test_testing_installs_again_when_the_sdk_pyproject_changes(checkout: Path) -> None:
    venv = bootstrap(checkout, "dev")
    stamp = Path(venv) / ".memledger-installed"
    sdk = checkout / "clients" / "python" / "pyproject.toml"
    os.utime(sdk, (stamp.stat().st_mtime + 10,) * 2)
    bootstrap(checkout, "dev")
    assert installs(venv) == [".[dev,otel] clients/python"] * 2
    os.utime(sdk, (stamp.stat().st_mtime - 10,) * 2)
    bootstrap(checkout, "dev")
    assert len(installs(venv)) == 2  # up to date again


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
