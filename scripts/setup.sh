#!/usr/bin/env bash
# Shared set-up for the two README commands: Debian packages (when root), a virtualenv, the locked dependency
# set (requirements/all.txt, hash-pinned) installed into it by uv, then the project itself (editable).
# Idempotent and quick on a second run: nothing is installed again until a lock file or pyproject.toml changes.
# Every step that takes time says what it installs first. VENV=DIR sets another virtualenv (default .venv).
# `setup.sh --for-tests` also installs the Debian packages only the suite needs (scripts/test.sh passes it).
set -euo pipefail
for_tests=false
if [ "${1:-}" = --for-tests ]; then for_tests=true; fi
cd "$(dirname "$0")/.."

python=${PYTHON:-}
if [ -z "$python" ]; then
    for candidate in python3.11 python3.12 python3.13 python3; do
        if command -v "$candidate" >/dev/null 2>&1 \
            && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            python=$candidate
            break
        fi
    done
fi
if [ -z "$python" ]; then
    echo "setup: Python >= 3.11 is required" >&2
    exit 2
fi

venv=${VENV:-.venv}
lock=requirements/all.txt
# uv installs the lock; its own version is the one the lock pins, bootstrapped with the venv's pip.
uv_pin=$(grep -m1 '^uv==' "$lock" 2>/dev/null | cut -d' ' -f1 || true)
if [ -z "$uv_pin" ]; then
    echo "setup: $lock pins no uv; run scripts/lock.sh" >&2
    exit 2
fi
uv_works() { "$venv/bin/uv" --version >/dev/null 2>&1; }
# A venv is usable when its python runs pip. Debian's python3 comes without ensurepip (package python3-venv):
# `python3 -m venv` then fails but leaves $venv/bin/python behind, so bin/python alone proves nothing.
pip_works() { "$venv/bin/python" -m pip --version >/dev/null 2>&1; }

# The Debian package that brings ensurepip for $python: python3-venv for Debian's own python3, else
# python3.X-venv.
venv_package() {
    local version default
    version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    default=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || true)
    if [ "$version" = "$default" ]; then echo python3-venv; else echo "python$version-venv"; fi
}

need_apt=()
command -v prometheus >/dev/null 2>&1 || need_apt+=(prometheus)
command -v promtool >/dev/null 2>&1 || need_apt+=(prometheus)
command -v prometheus-alertmanager >/dev/null 2>&1 || need_apt+=(prometheus-alertmanager)
command -v curl >/dev/null 2>&1 || need_apt+=(curl)          # the docs' examples
if $for_tests; then
    command -v ip >/dev/null 2>&1 || need_apt+=(iproute2)          # the docs test: loopback in a namespace
    command -v buildah >/dev/null 2>&1 || need_apt+=(buildah)       # the image test builds the Dockerfile
    command -v mmdebstrap >/dev/null 2>&1 || need_apt+=(mmdebstrap)     # ... on a Debian base made here
    command -v npm >/dev/null 2>&1 || need_apt+=(npm)                   # dashboards checked with @grafana/schema
fi
if ! uv_works && ! pip_works && ! "$python" -c 'import ensurepip' >/dev/null 2>&1; then
    package=$(venv_package)
    if [ "$(id -u)" != 0 ]; then
        echo "setup: $python cannot create the virtualenv $venv (no ensurepip); run as root or:" \
             "sudo apt-get install $package" >&2
        exit 2
    fi
    need_apt+=("$package")
fi
if [ ${#need_apt[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ]; then
        echo "setup: installing Debian packages: ${need_apt[*]}" >&2
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
    else
        echo "setup: missing ${need_apt[*]}; run as root or: sudo apt-get install ${need_apt[*]}" >&2
    fi
fi

if ! uv_works; then
    if ! pip_works; then
        # Create it, or complete one a failed run left without pip: `venv` over an existing directory adds
        # what is missing and deletes nothing. Its packages are then installed again.
        echo "setup: creating the virtualenv $venv with $python" >&2
        "$python" -m venv "$venv"
        if ! pip_works; then
            echo "setup: $venv/bin/python cannot run pip even after '$python -m venv $venv'; remove $venv and" \
                 "run this again" >&2
            exit 2
        fi
    fi
    echo "setup: installing $uv_pin into $venv (it installs the locked dependencies)" >&2
    "$venv/bin/python" -m pip install -q --disable-pip-version-check "$uv_pin"
    rm -f "$venv"/.installed-*
fi

stamp="$venv/.installed-$(cat "$lock" pyproject.toml | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
    count=$(grep -c '^[A-Za-z0-9]' "$lock")
    echo "setup: installing $count locked packages ($lock: runtime, test, demo, report) into $venv" >&2
    # uv reads the system's trust store (as pip here does), so a proxy with its own CA needs no flag; it
    # never downloads a Python of its own. Its list of installed packages is left out (one line each).
    export UV_SYSTEM_CERTS=${UV_SYSTEM_CERTS:-1} UV_PYTHON_DOWNLOADS=never
    "$venv/bin/uv" pip sync --python "$venv/bin/python" --require-hashes "$lock" 2>&1 \
        | sed -u '/^ [-+~] /d' >&2
    echo "setup: installing gpu-autoscaler itself (editable) into $venv" >&2
    "$venv/bin/uv" pip install --quiet --python "$venv/bin/python" --no-deps -e .
    rm -f "$venv"/.installed-*
    touch "$stamp"
fi
