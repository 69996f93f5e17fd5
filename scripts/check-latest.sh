#!/usr/bin/env bash
# The suite on the newest versions pyproject.toml's ranges allow, instead of the locked ones: finds the
# upstream release that would break a fresh `pip install .` before a user does. It resolves into a scratch
# virtualenv (.venv-latest, made anew each run; .venv and the lock are not touched), prints every version
# that differs from requirements/all.txt, then runs ./scripts/test.sh there. Extra arguments go to pytest.
# When it passes, scripts/lock.sh --upgrade moves the lock to those versions.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --for-tests   # Debian packages, and the locked uv that resolves here
venv=.venv-latest
python=$(.venv/bin/python -c 'import sys; print(sys.executable)')
export UV_SYSTEM_CERTS=${UV_SYSTEM_CERTS:-1} UV_PYTHON_DOWNLOADS=never
echo "check-latest: resolving the newest allowed versions into $venv" >&2
.venv/bin/uv venv --quiet --clear --python "$python" "$venv"
.venv/bin/uv pip install --quiet --python "$venv/bin/python" --upgrade --group pyproject.toml:tools \
    -e ".[test,demo,report]"
echo "check-latest: versions that differ from requirements/all.txt (locked -> newest):" >&2
"$venv/bin/python" - <<'PY' >&2
import importlib.metadata, re
from packaging.markers import Marker
from packaging.utils import canonicalize_name
locked, current = {}, None
for line in open("requirements/all.txt"):
    if m := re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)(?: ; (.*?))?(?: \\)?$", line):
        if m.group(3) is None or Marker(m.group(3)).evaluate():
            locked[canonicalize_name(m.group(1))] = m.group(2)
newer = []
for name, version in sorted(locked.items()):
    try:
        now = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        now = "(not installed)"
    if now != version:
        newer.append(f"  {name} {version} -> {now}")
print("\n".join(newer) or "  none: the lock is at the newest versions")
PY
# npm packages too: the dashboards' type check takes the newest @grafana/schema and typescript, not its lock.
LATEST_NPM_PACKAGES=1 VENV="$venv" exec ./scripts/test.sh "$@"
