#!/usr/bin/env bash
# The whole test suite: lint, then unit and integration tests (real Prometheus, Alertmanager, gRPC, HTTP on
# 127.0.0.1). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check .
exec .venv/bin/python -m pytest "$@"
