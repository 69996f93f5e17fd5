"""A value followed by a line end is not that value: Python's `$` matches before a final newline, so
`re.match(r"^...$")` took `gpu_id=0%0A` for GPU 0 and a DRA device `gpu-0\\n` for minor 0. Every validating
pattern is matched whole (`fullmatch`, `\\Z`); here each one is fed generated good values with a line end
added, through the function that uses it, and a scan of the production packages keeps `$` anchors out."""

from __future__ import annotations

import ast
import json
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.cli.tune import span
from autoscaler.config.rules import parse_rules
from autoscaler.errors import MalformedAnswerError, RulesError
from autoscaler.kube.answers import rfc3339
from autoscaler.kube.discovery import parse_resource_list
from exporter.health.history import GpuHistory
from exporter.nvml.snapshots import DeviceSnapshot
from exporter.pods.attribution import by_uuid, minor_of
from exporter.pods.podresources import DeviceAllocation, build_holder_map
from exporter.scrape.dra import dra_mig, dra_minor
from exporter.scrape.holders import PodRef
from exporter.serving.status_api import build_gpu_status, handle, quickstart
from fleet.reporting.timeline import parse_span
from fleet.reporting.usage import workload_of
from fleet.units import parse_bytes
from plumbing.cli import parse_duration
from plumbing.prometheus.answer import interpret_body
from plumbing.web import WebConfigError, load_web_config

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("exporter", "autoscaler", "plumbing", "fleet", "demo")
ENDS = st.sampled_from(["\n", "\r\n", "\n\n"])
indices = st.integers(min_value=0, max_value=999_999)


def gpu(index: int) -> object:
    return build_gpu_status(DeviceSnapshot(index=index, uuid=f"GPU-{index}", name="H100", up=True,
                                           pci_bus_id="", temperature_celsius=50.0, utilization=0.5,
                                           memory_used_bytes=1, memory_free_bytes=1, memory_total_bytes=2,
                                           power_watts=100.0))


@settings(max_examples=50, deadline=None)
@given(index=indices, end=ENDS)
def test_a_gpu_index_with_a_line_end_is_no_gpu(index: int, end: str) -> None:
    gpus = [gpu(index)]
    assert quickstart(f"gpu_id={index}", lambda: gpus)[0] == 200
    status, body = quickstart(f"gpu_id={quote(f'{index}{end}')}", lambda: gpus)
    assert (status, body["parameter"]) == (400, "gpu_id")
    status, body = handle(f"/api/v1/gpus/{index}{end}", "", lambda: gpus, GpuHistory())
    assert (status, body["parameter"]) == (400, "index")
    status, body = handle(f"/api/v1/gpus/{index}/trend", f"minutes={quote('5' + end)}", lambda: gpus,
                          GpuHistory())
    assert (status, body["parameter"]) == (400, "minutes")


@settings(max_examples=50, deadline=None)
@given(minor=st.integers(min_value=0, max_value=999), end=ENDS)
def test_a_device_name_with_a_line_end_names_no_gpu(minor: int, end: str) -> None:
    for name in (f"gpu-{minor}", f"nvidia{minor}", f"nvidia{minor}/gi1", f"gpu-{minor}-mig-1g10gb-19-0"):
        assert minor_of(name) == minor and minor_of(name + end) is None
    assert dra_minor(f"gpu-{minor}{end}") is None and dra_mig(f"gpu-{minor}-mig-19-0-1{end}") is None
    for device in (f"{minor}:1", f"nvidia{minor}/gi2", f"MIG-{minor}"):
        assert PodRef("ns", "p", "c", "nvidia.com/gpu", device).is_mig
        assert not PodRef("ns", "p", "c", "nvidia.com/gpu", device + end).is_mig
    # through the holder map: neither a DRA name nor an index id is filed under the GPU
    holders = build_holder_map([DeviceAllocation("ns", "p", "c", "gpu.nvidia.com", f"gpu-{minor}{end}"),
                                DeviceAllocation("ns", "q", "c", "nvidia.com/gpu", f"{minor}{end}")])
    assert sorted(by_uuid(holders, {minor: "GPU-a"}.get, {minor: "GPU-a"}.get)) == sorted(
        [f"gpu-{minor}{end}", f"{minor}{end}"])


RULES = """rules:
  - name: {name}
    target: {{kind: {kind}, namespace: {namespace}, name: {target}}}
    minReplicas: 1
    maxReplicas: 3
    metrics:
      - {{name: util, query: 'avg(up)', type: Average, target: 0.5}}
"""
GOOD = {"name": "svc", "kind": "Deployment", "namespace": "ml", "target": "embed"}


@pytest.mark.parametrize("field", sorted(GOOD))
def test_a_rules_field_with_a_line_end_is_refused(field: str) -> None:
    parse_rules(RULES.format(**GOOD), "rules.yaml")
    bad = {**GOOD, field: json.dumps(GOOD[field] + "\n")}  # a quoted YAML scalar holding the line end
    with pytest.raises(RulesError):
        parse_rules(RULES.format(**bad), "rules.yaml")


def test_answers_with_a_line_end_are_refused() -> None:
    def scalar(value: str) -> object:
        return {"status": "success", "data": {"resultType": "scalar", "result": [1, value]}}

    assert interpret_body(scalar("0.5")).ok and not interpret_body(scalar("0.5\n")).ok
    assert rfc3339("2026-11-27T20:00:00Z") is not None and rfc3339("2026-11-27T20:00:00Z\n") is None
    good = {"name": "deployments", "kind": "Deployment", "namespaced": True, "verbs": ["get"]}
    def resources(entry: dict[str, object]) -> bytes:
        return json.dumps({"kind": "APIResourceList", "resources": [entry]}).encode()

    assert parse_resource_list(resources(good), "apps/v1", "apps/v1")
    bad = resources({**good, "name": "deployments\n"})
    with pytest.raises(MalformedAnswerError, match="is not a resource name"):
        parse_resource_list(bad, "apps/v1", "apps/v1")
    assert workload_of("train-x7k2p") == "train" and workload_of("train-x7k2p\n") == "train-x7k2p\n"


def test_a_web_config_header_name_with_a_line_end_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "web.yml"
    path.write_text('http_server_config:\n  headers:\n    "X-Frame-Options\\n": deny\n')
    with pytest.raises(WebConfigError):
        load_web_config(path)


@pytest.mark.parametrize(("parse", "text"), [
    (parse_duration, "1.5s"), (span(1, 1e9), "7d"), (parse_span, "2h"), (parse_bytes, "4GiB"),
], ids=["duration", "tune-span", "fleet-since", "fleet-bytes"])
def test_where_spaces_around_are_the_grammar_a_line_end_is_one_of_them(parse: Callable[[str], float],
                                                                          text: str) -> None:
    """These flags take spaces around a value on purpose; a line end there means the same, never another
    value."""
    assert parse(text + "\n") == parse(f" {text} ") == parse(text)


def _anchors(pattern: str) -> bool:
    """True when `pattern` has a `$` that is neither escaped nor inside a character class."""
    position, in_class = 0, False
    while position < len(pattern):
        char = pattern[position]
        if char == "\\":
            position += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
            position += 1 + pattern.startswith("^", position + 1)  # `[^`
            position += pattern.startswith("]", position)  # a `]` first in a class is literal
            continue
        elif char == "$":
            return True
        position += 1
    return False


def _literal(node: ast.expr) -> str | None:
    """The text of a string or f-string literal (its placeholders as `X`)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(part.value if isinstance(part, ast.Constant) else "X" for part in node.values)
    return None


def dollar_patterns(source: str) -> list[tuple[int, str]]:
    """(line, pattern) of every regex literal given to `re.*` with a `$` anchor."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "re" and node.args):
            text = _literal(node.args[0])
            if text is not None and _anchors(text):
                found.append((node.lineno, text))
    return found


def test_the_scan_finds_what_it_looks_for() -> None:
    assert dollar_patterns('import re\nA = re.compile(r"^a$")\nre.match(f"{x}b$", y)\n') == [
        (2, "^a$"), (3, "Xb$")]
    assert dollar_patterns('import re\nA = re.compile(r"[$]\\$a\\Z")\nB = re.compile(r"[^]$]")\n') == []


def test_no_production_regex_anchors_with_dollar() -> None:
    """`$` also matches before a final line end: write `\\Z`, or `fullmatch` without anchors."""
    offenders = [f"{path.relative_to(REPO)}:{line}: {pattern}"
                 for package in PACKAGES for path in sorted((REPO / package).rglob("*.py"))
                 for line, pattern in dollar_patterns(path.read_text())]
    assert offenders == []
