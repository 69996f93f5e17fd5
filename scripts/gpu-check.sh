#!/usr/bin/env bash
# The real-GPU check, for a GPU machine with no network: the `gpu` test tier (the exporter's contract on the
# real NVML) and the NVML benchmark (sweep time per GPU, which calls cost what, scrape latency, the ratio to
# the simulator), one summary printed and written to a file, in a few minutes (docs/development.md).
#
#   scripts/gpu-check.sh --wheelhouse DIR [--output FILE]   install the locked wheels in DIR, nothing else
#   scripts/gpu-check.sh --python PY [--output FILE]        use an environment that has them already
#   scripts/gpu-check.sh --simulate [...]                   the same on the simulated NVML (no GPU needed)
#
# The wheelhouse is made beforehand where there is network, for the GPU machine's Python and platform:
#   pip download --only-binary=:all: --require-hashes -r requirements/all.txt -d wheelhouse
# It is installed with --no-index into a fresh virtualenv under a temporary directory: no index, no download.
# Without --wheelhouse or --python, the repository's .venv is used. Exit 0 when the tier passed, 1 when it
# failed (or, on a GPU machine, found no GPU), 2 on a bad flag.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
    sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
}
fail() {
    echo "gpu-check: $1" >&2
    exit 2
}

backend=real
wheelhouse=""
python=""
output=gpu-check-summary.txt
sweeps=200
scrapes=200
while [ $# -gt 0 ]; do
    case "$1" in
        --simulate) backend=simulated ;;
        --wheelhouse) [ $# -ge 2 ] || fail "--wheelhouse needs a directory"; wheelhouse=$2; shift ;;
        --python) [ $# -ge 2 ] || fail "--python needs an interpreter"; python=$2; shift ;;
        --output) [ $# -ge 2 ] || fail "--output needs a file"; output=$2; shift ;;
        --sweeps) [ $# -ge 2 ] || fail "--sweeps needs a number"; sweeps=$2; shift ;;
        --scrapes) [ $# -ge 2 ] || fail "--scrapes needs a number"; scrapes=$2; shift ;;
        -h|--help) usage; exit 0 ;;
        *) fail "unknown argument: $1 (see --help)" ;;
    esac
    shift
done
case "$sweeps$scrapes" in *[!0-9]*) fail "--sweeps and --scrapes take whole numbers" ;; esac
if [ -n "$wheelhouse" ] && [ -n "$python" ]; then fail "--wheelhouse and --python exclude each other"; fi

if [ -n "$wheelhouse" ]; then
    [ -d "$wheelhouse" ] || fail "no wheelhouse directory: $wheelhouse"
    venv=$(mktemp -d -t gpu-check-XXXXXX)/venv
    echo "gpu-check: installing the locked wheels of $wheelhouse into $venv (no index)"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --no-index --find-links "$wheelhouse" -r requirements/all.txt
    python=$venv/bin/python
elif [ -z "$python" ]; then
    python=.venv/bin/python
fi
[ -x "$python" ] || command -v "$python" >/dev/null 2>&1 || fail "no Python at $python (--python or --wheelhouse)"

echo "gpu-check: the $backend NVML: the gpu tier, then the benchmark ($sweeps sweeps, $scrapes scrapes)"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"   # the repository as it is here, not installed
exec "$python" -m benchmarks.gpu_check --backend "$backend" --output "$output" --sweeps "$sweeps" \
    --scrapes "$scrapes"
