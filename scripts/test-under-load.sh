#!/usr/bin/env bash
# The whole suite while every core is also kept busy by other work, as on a shared machine: one busy loop per
# core at normal priority, each ending by itself after LOAD_SECONDS (default 1200) or when the suite ends,
# whichever comes first. Prints the suite's wall time. Arguments go to scripts/test.sh (and so to pytest).
# A test that passes alone and fails here waits on the clock where it should wait on the event.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${LOAD_SECONDS:-1200}
cores=$(nproc)
pids=()
for _ in $(seq "$cores"); do
    timeout "$seconds" sh -c 'while :; do :; done' &
    pids+=("$!")
done
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
echo "test-under-load: $cores busy loop(s) for at most ${seconds} s" >&2
start=$(date +%s)
status=0
./scripts/test.sh "$@" || status=$?
echo "test-under-load: the suite took $(( $(date +%s) - start )) s under load (exit $status)" >&2
exit "$status"
