"""The test suite. Its tree mirrors the packages: tests/unit/<package>/ and tests/integration/<package>/ test
the modules of that package; `shipping/` tests what ships outside the packages (rules, dashboards,
manifests, docs, the image, the lock, the import layers). Shared helpers sit at this level."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
"""The repository's root directory, wherever a test module sits below tests/."""
