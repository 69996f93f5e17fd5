#!/usr/bin/env bash
# The whole test suite: lint, then unit and integration tests (real Prometheus, Alertmanager, gRPC, HTTP on
# 127.0.0.1). Extra arguments go to pytest (`-n 0` runs in one process). Six pytest-xdist workers stealing
# work from each other: most tests wait on servers and subprocesses, so six keep a 2-core machine busy; the
# long ones are placed at the heads of the workers' shares (tests/conftest.py), so they start at once.
# Bytecode is written and the packages compiled first, even where PYTHONDONTWRITEBYTECODE is set: the suite
# starts the CLIs hundreds of times, and each would otherwise compile every module it imports again. The whole
# suite (no arguments) is collected once first, in two processes, for the same reason (see below).
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
if [ $# -eq 0 ]; then
    # One collection first, in two processes (unit, integration): it writes the bytecode of every module the
    # tests import (the test modules rewritten by pytest, the dependencies) that the workers, started
    # together on a fresh clone, would each compile again (about 7 s of CPU per worker). Errors show in the
    # run itself.
    for half in tests/unit tests/integration; do
        "$venv/bin/python" -m pytest --collect-only -q -p no:cacheprovider "$half" >/dev/null 2>&1 &
    done
    wait || true
fi
exec "$venv/bin/python" -m pytest -n "${PYTEST_WORKERS:-6}" --dist worksteal "$@"
