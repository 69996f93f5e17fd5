"""The target learned from a latency objective, end to end: a real Prometheus backfilled with a week of an
LLM service whose TTFT is flat then rising past a knee (tests/slo_history.py), the official Kubernetes client
against the fake API server. The controller learns a target near the knee, publishes it, and scales on it;
in observe mode it only publishes it."""

from __future__ import annotations

import json
import math
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from autoscaler.config.rules import parse_rules
from autoscaler.controller.loop import Controller
from plumbing.prometheus.config import endpoint_from_url
from plumbing.prometheus.runner import PromQLSettings
from tests.fake_kube.apiserver import FakeApiServer
from tests.history import BackfilledPrometheus, HistorySpec, start_backfilled_prometheus
from tests.integration.autoscaler.controller.conftest import RealController
from tests.measure import run_in_process
from tests.slo_history import DAYS, KNEE_AT_OBJECTIVE, RATE_QUERY, REPLICAS, TTFT_QUERY, backfilled_blocks
from tests.unit.autoscaler.controller.fakes import sample

pytestmark = pytest.mark.integration

CURRENT = 6
CONFIGURED = 10.0
TOLERANCE = 0.1  # the HPA's


def rules(mode: str) -> str:
    return f"""\
rules:
  - name: chat
    target: {{kind: Deployment, namespace: ml, name: vllm-chat}}
    minReplicas: 1
    maxReplicas: 40
    metrics:
      - {{name: requests_per_second, query: '{RATE_QUERY}', type: Total, target: {CONFIGURED:g}}}
    slo:
      latency: '{TTFT_QUERY}'
      objectiveSeconds: 0.5
      learn: requests_per_second
      lookback: 7d
      bounds: {{min: 2, max: 40}}
      mode: {mode}
"""


@pytest.fixture(scope="module")
def week() -> Iterator[BackfilledPrometheus]:
    with tempfile.TemporaryDirectory(prefix="gpu-slo-history-") as tmp:
        spec = HistorySpec(end=int(time.time() // 60) * 60, days=DAYS)
        blocks = backfilled_blocks(spec, Path(tmp) / "write")
        (Path(tmp) / "serve").mkdir()
        prom = start_backfilled_prometheus(spec, Path(tmp) / "serve", blocks)
        try:
            yield prom
        finally:
            prom.process.stop()


@pytest.fixture
def make(real_controller: RealController, week: BackfilledPrometheus) -> Callable[[str], Controller]:
    def build(mode: str) -> Controller:
        return real_controller(parse_rules(rules(mode), "rules.yaml"),
                               PromQLSettings(week.url, query_timeout=20.0, budget=30.0),
                               endpoint=endpoint_from_url(week.url))

    return build


def test_learns_the_knee_from_a_week_publishes_it_and_scales_on_it(
        make: Callable[[str], Controller], apiserver: FakeApiServer) -> None:
    apiserver.add("vllm-chat", CURRENT)
    c = make("scale")
    outcome = c.sync_once().outcomes[0]
    learned = sample(c, "gpu_autoscaler_learned_target", rule="chat", metric="requests_per_second")
    assert learned is not None, outcome.message
    assert KNEE_AT_OBJECTIVE - 4 <= learned <= KNEE_AT_OBJECTIVE, outcome.message
    [observation] = outcome.observations
    assert observation.value is not None
    assert observation.value == pytest.approx(40.0 * REPLICAS, rel=0.05)  # the top of the day's wave
    ratio = observation.value / (CURRENT * learned)
    expected = CURRENT if abs(ratio - 1) <= TOLERANCE else math.ceil(observation.value / learned)
    assert outcome.desired == expected and "learned (used" in outcome.message
    assert apiserver.replicas("vllm-chat") == expected
    assert "LearnedTargetChanged" in apiserver.event_reasons("vllm-chat")


def test_observe_mode_publishes_the_learned_target_and_scales_on_the_configured_one(
        make: Callable[[str], Controller], apiserver: FakeApiServer) -> None:
    apiserver.add("vllm-chat", CURRENT)
    c = make("observe")
    outcome = c.sync_once().outcomes[0]
    assert sample(c, "gpu_autoscaler_learned_target", rule="chat", metric="requests_per_second") is not None
    assert outcome.desired == 2 * CURRENT  # 160 / 10 wanted, at most double at once (the HPA's default)
    assert "observed only" in outcome.message


def test_tune_shows_the_learned_target(week: BackfilledPrometheus, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "rules.yaml").write_text(rules("scale"))
    cli = str(Path(sys.executable).parent / "gpu-autoscaler")
    args = [cli, "tune", "--rules", str(tmp_path / "rules.yaml"), "--since", "2d", "--step", "10m",
            "--startup-seconds", "60s", "--prometheus", week.url]
    result = run_in_process([*args, "--json"], capsys)
    assert result.returncode == 0, result.stderr
    slo = json.loads(result.stdout)["slo"]
    assert slo["metric"] == "requests_per_second" and slo["reason"] == "Learned"
    assert KNEE_AT_OBJECTIVE - 4 <= slo["learned_target"] <= KNEE_AT_OBJECTIVE
    text = run_in_process(args, capsys)
    assert text.returncode == 0, text.stderr
    assert "slo: requests_per_second target " in text.stdout


def test_status_shows_the_learned_target(week: BackfilledPrometheus, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "rules.yaml").write_text(rules("scale"))
    cli = str(Path(sys.executable).parent / "gpu-autoscaler")
    args = [cli, "status", "--rules", str(tmp_path / "rules.yaml"), "--prometheus", week.url,
            "--assume-replicas", str(CURRENT)]
    result = run_in_process(args, capsys)
    assert result.returncode == 0, result.stderr
    assert "slo: requests_per_second target " in result.stdout and "learned (used" in result.stdout
    as_json = run_in_process([*args, "-o", "json"], capsys)
    assert as_json.returncode == 0, as_json.stderr
    (chat,) = json.loads(as_json.stdout)["rules"]
    slo = chat["slo"]
    assert (slo["metric"], slo["configured_target"], slo["mode"], slo["reason"]) == (
        "requests_per_second", CONFIGURED, "scale", None)
    assert KNEE_AT_OBJECTIVE - 4 <= slo["learned_target"] <= KNEE_AT_OBJECTIVE
