#!/usr/bin/env bash
# The whole test suite: lint, then unit and integration tests (real Prometheus, Alertmanager, gRPC, HTTP on
# 127.0.0.1). Extra arguments go to pytest (`-n 0` runs in one process). Six pytest-xdist workers stealing
# work from each other: most tests wait on servers and subprocesses (under 2 cores of CPU over 3 minutes), so
# six keep a 2-core machine busy; worksteal keeps the long demo and benchmark tests from queueing at the end.
# It runs in .venv, installed from the lock by scripts/setup.sh; VENV=DIR runs it in a virtualenv prepared
# elsewhere (scripts/check-latest.sh), without set-up.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${VENV:-.venv}
if [ -z "${VENV:-}" ]; then
    bash scripts/setup.sh --for-tests
fi
"$venv/bin/ruff" check .
exec "$venv/bin/python" -m pytest -n "${PYTEST_WORKERS:-6}" --dist worksteal "$@"
