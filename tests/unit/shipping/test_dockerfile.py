"""Dockerfile, read as text: multi-stage on a slim Python 3.11 base, dependencies from the lock with hashes, a
final stage with no compiler that runs as non-root, carries the OCI source/version labels and starts the
console scripts; .dockerignore keeps the venv and VCS data out of the context. These fail fast and name the
line; tests/integration/shipping/test_image.py builds the image with buildah and runs it."""

from __future__ import annotations

import re
import shlex
import tomllib
from dataclasses import dataclass, field

from tests.unit.shipping.promql_names import ROOT

COMPILERS = ("build-essential", "gcc", "g++", "clang", "make", "python3-dev", "libc6-dev")


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def args(self, instruction: str) -> list[str]:
        return [arg for op, arg in self.instructions if op == instruction]


def parse(text: str) -> tuple[dict[str, str], list[Stage]]:
    """Global ARG defaults and the stages of a Dockerfile (continuation lines joined, comments dropped)."""
    logical = re.sub(r"\\\n", " ", "\n".join(line for line in text.splitlines()
                                              if not line.lstrip().startswith("#")))
    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in filter(None, (raw.strip() for raw in logical.splitlines())):
        op, _, arg = line.partition(" ")
        op = op.upper()
        if op == "FROM":
            words = arg.split()
            base = re.sub(r"\$\{(\w+)\}", lambda m: global_args.get(m.group(1), m.group(0)), words[0])
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            stages.append(Stage(base, name))
        elif not stages and op == "ARG":
            name_, _, default = arg.partition("=")
            global_args[name_] = default
        elif stages:
            stages[-1].instructions.append((op, arg.strip()))
    return global_args, stages


def dockerfile() -> list[Stage]:
    return parse((ROOT / "Dockerfile").read_text())[1]


def test_multi_stage_on_slim_python_311() -> None:
    stages = dockerfile()
    assert len(stages) >= 2
    for stage in stages:
        assert re.fullmatch(r"python:3\.11(\.\d+)?-slim(-\w+)?", stage.base), stage.base
    final = stages[-1]
    assert any(arg.startswith(f"--from={stages[0].name} ") for arg in final.args("COPY"))


def test_final_stage_has_no_compiler() -> None:
    final = dockerfile()[-1]
    commands = " ".join(final.args("RUN"))
    assert "apt-get install" not in commands and "apk add" not in commands
    for word in COMPILERS:
        assert not re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", commands), word
    sources = [shlex.split(arg)[0] for arg in final.args("COPY") if arg.startswith("--from=")]
    assert sources and all(s.startswith("--from=") for s in sources)


def test_final_stage_runs_as_non_root() -> None:
    (user,) = dockerfile()[-1].args("USER")
    uid = user.split(":")[0]
    assert uid not in ("root", "0") and (not uid.isdigit() or int(uid) > 0)


def test_oci_labels() -> None:
    labels = " ".join(dockerfile()[-1].args("LABEL"))
    for name in ("org.opencontainers.image.source", "org.opencontainers.image.version"):
        assert re.search(rf"{re.escape(name)}=\S+", labels), name


def test_every_console_script_is_installed_and_started() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert set(scripts) == {"gpu-exporter", "gpu-autoscaler", "gpu-fleet"}
    stages = dockerfile()
    assert any("pip install --no-deps /src" in run for run in stages[0].args("RUN"))
    final_runs = " ".join(stages[-1].args("RUN"))
    for script in scripts:
        assert f"{script} --help" in final_runs, f"the final stage never starts {script}"


def test_dependencies_come_from_the_lock_with_hashes() -> None:
    """The build installs requirements/runtime.txt hash-checked, then the project without resolving."""
    runs = dockerfile()[0].args("RUN")
    assert any("--require-hashes" in run and "-r requirements/runtime.txt" in run for run in runs)
    installs = [run for run in runs if "pip install" in run]
    assert all("--require-hashes" in run or "--no-deps" in run for run in installs), installs


def test_parser_sees_a_root_user_and_a_compiler() -> None:
    """The checks above can fail: the parser reads continuation lines and the final stage's USER."""
    _, stages = parse("FROM python:3.11-slim AS a\nRUN echo\nFROM python:3.11-slim\n"
                      "RUN apt-get install -y \\\n    gcc\nUSER root\n")
    assert stages[-1].args("USER") == ["root"]
    assert "gcc" in stages[-1].args("RUN")[0]


def test_dockerignore_keeps_local_state_out() -> None:
    ignored = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    assert {".git", ".venv", "tests"} <= ignored
    copied = {source.rstrip("/") for stage in dockerfile() for arg in stage.args("COPY")
              if not arg.startswith("--from=") for source in shlex.split(arg)[:-1]}
    assert {"exporter", "autoscaler", "pyproject.toml"} <= copied
    assert not copied & ignored, "the Dockerfile copies something .dockerignore leaves out"


def test_the_image_gets_every_package_the_wheel_ships() -> None:
    """A package pyproject.toml installs but the build stage never copies would be missing from the image."""
    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"][
        "include"]
    packages = {pattern.rstrip("*") for pattern in include}
    copied = {source.rstrip("/") for stage in dockerfile() for arg in stage.args("COPY")
              if not arg.startswith("--from=") for source in shlex.split(arg)[:-1]}
    assert packages <= copied, f"not copied into the build stage: {sorted(packages - copied)}"
