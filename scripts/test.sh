#!/usr/bin/env bash
# The whole test suite: lint, then unit and integration tests (real Prometheus, Alertmanager, gRPC, HTTP on
# 127.0.0.1). Extra arguments go to pytest (`-n 0` runs in one process). Six pytest-xdist workers stealing
# work from each other: most tests wait on servers and subprocesses, so six keep a 2-core machine busy; the
# long ones are placed at the heads of the workers' shares (tests/conftest.py), so they start at once.
# Bytecode is written and the packages compiled first, even where PYTHONDONTWRITEBYTECODE is set: the suite
# starts the CLIs hundreds of times, and each would otherwise compile every module it imports again.
# It runs in .venv, installed from the lock by scripts/setup.sh; VENV=DIR runs it in a virtualenv prepared
# elsewhere (scripts/check-latest.sh), without set-up.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${VENV:-.venv}
if [ -z "${VENV:-}" ]; then
    bash scripts/setup.sh --for-tests
fi
"$venv/bin/ruff" check .
unset PYTHONDONTWRITEBYTECODE
"$venv/bin/python" -m compileall -q exporter autoscaler plumbing fleet demo benchmarks
exec "$venv/bin/python" -m pytest -n "${PYTEST_WORKERS:-6}" --dist worksteal "$@"
