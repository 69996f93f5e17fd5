#!/usr/bin/env bash
# The whole test suite: lint, then unit and integration tests (real Prometheus, Alertmanager, gRPC, HTTP on
# 127.0.0.1). Extra arguments go to pytest (`-n 0` runs in one process). Three workers (pytest-xdist): most
# tests wait on servers and subprocesses, so three keep a 2-core machine busy without starving the timing
# bounds some tests assert.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check .
exec .venv/bin/python -m pytest -n "${PYTEST_WORKERS:-3}" "$@"
