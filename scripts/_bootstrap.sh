# Sourced by scripts/test, scripts/serve and scripts/migrate: make a virtualenv match
# pyproject.toml, then cd to the repo. Two of them, each with what its scripts need:
#   MEMLEDGER_BOOTSTRAP=dev (the default; scripts/test): .venv, the project with its
#     development tools and every extra but rerank (torch: gigabytes): '.[dev,otel]', and the
#     Python SDK (clients/python, its own distribution) so the suite runs its tests
#   MEMLEDGER_BOOTSTRAP=serve (scripts/serve, scripts/migrate): .venv-serve, the project
#     alone, plus the extras its settings ask for: otel when MEMLEDGER_OTEL is on, rerank
#     when MEMLEDGER_RERANKER is cross-encoder
# Each is (re)installed when missing, when a pyproject.toml it installs is newer than its stamp,
# or when the extras it needs changed (the stamp holds the install spec).
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_ROOT"

PYTHON="${PYTHON:-python3}"
PROJECTS=()  # further distributions of this repository installed (editable) beside it

case "${MEMLEDGER_BOOTSTRAP:-dev}" in
    dev)
        VENV="$REPO_ROOT/.venv"
        SPEC='.[dev,otel]'
        PROJECTS=(clients/python)
        ;;
    serve)
        VENV="$REPO_ROOT/.venv-serve"
        extras=()
        case "$(printf '%s' "${MEMLEDGER_OTEL:-}" | tr '[:upper:]' '[:lower:]')" in
            on | true | yes | y | t | 1) extras+=(otel) ;;
        esac
        if [[ "${MEMLEDGER_RERANKER:-}" == cross-encoder ]]; then
            extras+=(rerank)
        fi
        SPEC='.'
        if ((${#extras[@]})); then
            SPEC=".[$(IFS=,; echo "${extras[*]}")]"
        fi
        ;;
    *)
        echo "MEMLEDGER_BOOTSTRAP must be dev or serve, not '${MEMLEDGER_BOOTSTRAP}'" >&2
        exit 2
        ;;
esac
STAMP="$VENV/.memledger-installed"
INSTALL=(-e "$SPEC")
STAMPED="$SPEC"
STALE=false
for project in "${PROJECTS[@]}"; do
    INSTALL+=(-e "$project")
    STAMPED+=" $project"
    if [[ -f "$STAMP" && "$project/pyproject.toml" -nt "$STAMP" ]]; then
        STALE=true
    fi
done

if [[ ! -x "$VENV/bin/python" || ! -f "$STAMP" || pyproject.toml -nt "$STAMP" || $STALE == true \
    || "$(cat "$STAMP")" != "$STAMPED" ]]; then
    echo "bootstrapping $VENV with $STAMPED ..." >&2
    [[ -x "$VENV/bin/python" ]] || "$PYTHON" -m venv "$VENV"
    if ! "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${INSTALL[@]}" \
        >"$VENV/pip-install.log" 2>&1; then
        cat "$VENV/pip-install.log" >&2
        exit 1
    fi
    printf '%s' "$STAMPED" >"$STAMP"
fi
