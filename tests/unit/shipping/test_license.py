"""LICENSE: the full Apache License 2.0 text, the licence pyproject.toml and the image label declare, and the
image carries it (setuptools puts a LICENSE found next to pyproject.toml in the wheel's dist-info/licenses/,
which the final stage copies with the virtualenv)."""

from __future__ import annotations

import shlex
import tomllib

from tests.unit.shipping.promql_names import ROOT
from tests.unit.shipping.test_dockerfile import dockerfile

LICENSE = ROOT / "LICENSE"
# Landmarks of the complete text, from the title to the appendix.
APACHE_2_0 = (
    "Apache License", "Version 2.0, January 2004", "http://www.apache.org/licenses/",
    "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION", "1. Definitions.",
    "2. Grant of Copyright License.", "3. Grant of Patent License.", "4. Redistribution.",
    "5. Submission of Contributions.", "6. Trademarks.", "7. Disclaimer of Warranty.",
    "8. Limitation of Liability.", "9. Accepting Warranty or Additional Liability.",
    "END OF TERMS AND CONDITIONS", "APPENDIX: How to apply the Apache License to your work.",
    'distributed under the License is distributed on an "AS IS" BASIS,',
)


def test_license_is_the_full_apache_2_0_text() -> None:
    text = LICENSE.read_text()
    positions = [text.find(landmark) for landmark in APACHE_2_0]
    assert -1 not in positions, [m for m, p in zip(APACHE_2_0, positions, strict=True) if p < 0]
    assert positions == sorted(positions), "sections out of order"
    assert 11000 < len(text) < 12000, "not the standard text (11,358 characters)"


def test_pyproject_and_image_label_declare_the_same_licence() -> None:
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"] == "Apache-2.0"
    labels = " ".join(dockerfile()[-1].args("LABEL"))
    assert 'org.opencontainers.image.licenses="Apache-2.0"' in labels


def test_dockerignore_lets_the_license_into_the_build_context() -> None:
    ignored = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    assert "LICENSE" not in ignored and "*" not in ignored


def test_build_stage_copies_the_license_next_to_pyproject() -> None:
    build = dockerfile()[0]
    copied = [shlex.split(arg) for arg in build.args("COPY") if not arg.startswith("--from=")]
    assert any("pyproject.toml" in sources and "LICENSE" in sources for sources in copied)
