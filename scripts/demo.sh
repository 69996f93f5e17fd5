#!/usr/bin/env bash
# The demo: the whole system on the simulated GPU backend, no cluster and no GPU needed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m demo "$@"
