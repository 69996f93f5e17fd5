#!/usr/bin/env bash
# Writes the lock files from pyproject.toml's ranges, keeping every pin that still satisfies them:
#   requirements/runtime.txt  what the image installs (the dependencies of `pip install .`)
#   requirements/all.txt      what scripts/setup.sh installs: runtime + the test, demo and report extras + uv
#   requirements/build.txt    uv alone, as all.txt pins it: the Dockerfile's build stage installs with it
# All three are hash-pinned requirements files (pip-tools' format, written by `uv pip compile`) resolved for
# every platform and Python >= 3.11; all.txt is constrained by runtime.txt, and build.txt by all.txt, so no
# two pin a package differently.
#   scripts/lock.sh                     after editing pyproject.toml's dependencies
#   scripts/lock.sh --upgrade           move every pin to the newest version the ranges allow
#   scripts/lock.sh --upgrade-package X move one package (repeatable)
#   scripts/lock.sh --check [--offline] exit 1 when the lock files are not what pyproject.toml gives
set -euo pipefail
cd "$(dirname "$0")/.."

uv=${UV:-.venv/bin/uv}
if ! "$uv" --version >/dev/null 2>&1; then
    bash scripts/setup.sh
fi

check=false
args=()
for arg in "$@"; do
    case "$arg" in
        --check) check=true ;;
        *) args+=("$arg") ;;
    esac
done

out=requirements
if $check; then
    out=$(mktemp -d)
    trap 'rm -rf "$out"' EXIT
    cp requirements/runtime.txt requirements/all.txt requirements/build.txt "$out"/
fi

compile() {
    "$uv" pip compile --quiet --universal --python-version 3.11 --generate-hashes \
        --custom-compile-command "scripts/lock.sh" "${args[@]}" "$@"
}
compile pyproject.toml -o "$out/runtime.txt"
compile pyproject.toml --all-extras --group pyproject.toml:tools -c "$out/runtime.txt" -o "$out/all.txt"
compile --group pyproject.toml:tools -c "$out/all.txt" -o "$out/build.txt"

if $check; then
    for name in runtime.txt all.txt build.txt; do
        # The constraint file's path is written into all.txt's annotations: compare with it named as committed.
        sed -i "s|$out/|requirements/|g" "$out/$name"
        if ! diff -u "requirements/$name" "$out/$name" >&2; then
            echo "lock: requirements/$name does not match pyproject.toml; run scripts/lock.sh and commit it" >&2
            exit 1
        fi
    done
fi
