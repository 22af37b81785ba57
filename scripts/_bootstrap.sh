# Sourced by scripts/test and scripts/serve: make .venv match pyproject.toml, then cd to the repo.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_ROOT"

VENV="$REPO_ROOT/.venv"
STAMP="$VENV/.memledger-installed"
PYTHON="${PYTHON:-python3}"

if [[ ! -x "$VENV/bin/python" || ! -f "$STAMP" || pyproject.toml -nt "$STAMP" ]]; then
    echo "bootstrapping $VENV ..." >&2
    [[ -x "$VENV/bin/python" ]] || "$PYTHON" -m venv "$VENV"
    if ! "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e '.[dev,otel]' \
        >"$VENV/pip-install.log" 2>&1; then
        cat "$VENV/pip-install.log" >&2
        exit 1
    fi
    touch "$STAMP"
fi
