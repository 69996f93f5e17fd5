"""`gpu-autoscaler tune` (its entry point, in-process) on degenerate history from a server answering like
Prometheus' /api/v1/query_range: NaN at every step is no sample (exit 2, as the docs say), one sample in 121
steps is too little to recommend from, and an answer Prometheus never sends (points off the grid, more points
than steps, a million of them) is refused before a number is taken from it. A day of samples at every step
is the control: it gets a table and exit 0; with bursts over a slow scale-down it gets a recommendation whose
diff the real `patch` applies to the user's commented file."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import urllib.parse
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from autoscaler.config.rules import load_rules
from autoscaler.planning.tuning import candidates, tuned_fields
from tests.measure import Measured, run_captured
from tests.support import QuietHandler, http_server

pytestmark = pytest.mark.integration

CLI = str(Path(sys.executable).parent / "gpu-autoscaler")
RULES = """\
rules:
  - name: web
    target: {kind: Deployment, namespace: ml, name: web}
    maxReplicas: 10
    metrics: [{name: rps, query: 'sum(r)', type: Total, target: 10}]
"""
Points = Callable[[float, float, float], list[str]]
"""(start, end, step) of a range query -> its points, JSON text."""


def every_step(value: str) -> Points:
    return lambda start, end, step: [f'[{start + k * step}, "{value}"]'
                                     for k in range(int((end - start) // step) + 1)]


def handler(points: Points) -> type[BaseHTTPRequestHandler]:
    @functools.cache
    def body(start: float, end: float, step: float) -> bytes:
        """Made once per range: tune asks each of its queries over the same one, and a million points take
        seconds to write on a busy machine (the client's deadline is not what this test is about)."""
        values = ", ".join(points(start, end, step))
        return ('{"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {}, '
                f'"values": [{values}]}}]}}}}').encode()

    class Answer(QuietHandler):
        def do_GET(self) -> None:
            params = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
            start, end, step = (float(params[key][0]) for key in ("start", "end", "step"))
            self.answer(200, body(start, end, step))

    return Answer


def tune(tmp_path: Path, points: Points, *args: str) -> Measured:
    (tmp_path / "rules.yaml").write_text(RULES)
    with http_server(handler(points)) as url:
        return run_captured([CLI, "tune", "--rules", str(tmp_path / "rules.yaml"), "--prometheus", url,
                             "--startup-seconds", "0", "--since", "1d", "--step", "5m", *args])


def test_a_day_of_samples_gets_a_table(tmp_path: Path) -> None:
    result = tune(tmp_path, every_step("12"))
    assert result.returncode == 0, result.stderr
    assert "rule web: 289 syncs of 300s replayed" in result.stdout


def test_nan_at_every_step_is_no_sample(tmp_path: Path) -> None:
    result = tune(tmp_path, every_step("NaN"))
    assert result.returncode == 2 and result.stdout == "", result.stdout
    assert "no sample of rule 'web'" in result.stderr


def test_one_sample_in_121_steps_is_too_little(tmp_path: Path) -> None:
    def one(start: float, end: float, step: float) -> list[str]:
        return [f'[{end - 120 * step}, "12"]']

    result = tune(tmp_path, one, "--since", "10h")
    assert result.returncode == 2 and result.stdout == "", result.stdout
    assert "too little history to recommend from: samples at 1 of 121 steps (1 %)" in result.stderr
    result = tune(tmp_path, lambda start, end, step: [f'[{start}, "12"]'], "-o", "json")
    assert result.returncode == 2
    error = json.loads(result.stdout)  # under -o json the refusal is a document too, and a line on stderr
    assert error["exit_code"] == 2 and error["error"] in result.stderr
    assert "samples at 1 of 289 steps (0 %), the first 24.0 h before the end" in error["error"]
    assert "wait until the rule's metrics have a day of samples" in error["error"]


def test_half_the_steps_is_enough(tmp_path: Path) -> None:
    def every_other(start: float, end: float, step: float) -> list[str]:
        return every_step("12")(start, end, step)[::2]

    result = tune(tmp_path, every_other)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(("points", "expected"), [
    (lambda start, end, step: [f'[{start + 0.5}, "1"]'], "is not on the grid asked for"),
    (lambda start, end, step: [f'[{start + k * step / 7}, "1"]' for k in range(1000)],
     "more than the 289 steps of 300s asked for"),
    (lambda start, end, step: [f'[{start + k * 1e-3}, "1"]' for k in range(1_000_000)], "larger than"),
    (lambda start, end, step: [f'[{end + step}, "1"]'], "outside the range asked for"),
    (lambda start, end, step: ['[1e300, "1"]'], "outside the range asked for"),
], ids=["off-grid", "more-points-than-steps", "a-million-points", "after-the-end", "1e300"])
def test_an_answer_prometheus_never_sends_is_refused(tmp_path: Path, points: Points, expected: str) -> None:
    result = tune(tmp_path, points)
    assert result.returncode == 2 and result.stdout == "", result.stdout
    assert "malformed answer" in result.stderr or "larger than" in result.stderr
    assert expected in result.stderr and "Traceback" not in result.stderr


COMMENTED_RULES = """\
# our serving rules: keep this comment
rules:
  - name: web   # the chat front end
    target: {kind: Deployment, namespace: ml, name: web}
    maxReplicas: 10
    metrics:
      - name: rps
        query: 'sum(r)'
        type: Total
        target: 10   # requests per second a replica serves
    behavior:
      scaleDown:
        # an hour: the old, slow setting
        stabilizationWindowSeconds: 3600
        policies:
          - type: Pods
            value: 1
            periodSeconds: 600
"""


def test_the_diff_is_a_patch_of_the_users_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Bursts every 2 hours over a slow scale-down: tune recommends a change, and its diff, applied by the
    real `patch -p1` where tune ran, gives a file that loads as the recommended rule, comments and all."""
    def bursts(start: float, end: float, step: float) -> list[str]:
        return [f'[{start + k * step}, "{80 if k % 24 < 3 else 10}"]'
                for k in range(int((end - start) // step) + 1)]

    (tmp_path / "rules.yaml").write_text(COMMENTED_RULES)
    monkeypatch.chdir(tmp_path)
    with http_server(handler(bursts)) as url:
        result = run_captured([CLI, "tune", "--rules", "rules.yaml", "--prometheus", url, "--startup-seconds",
                               "0", "--since", "1d", "--step", "5m", "-o", "json"])
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    diff = answer["diff"]
    assert diff.startswith("--- a/rules.yaml\n+++ b/rules.yaml\n"), diff
    applied = subprocess.run(["patch", "-p1", "--no-backup-if-mismatch"], input=diff, text=True,
                             capture_output=True, cwd=tmp_path, timeout=60, check=False)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    patched = (tmp_path / "rules.yaml").read_text()
    for line in COMMENTED_RULES.splitlines():
        if "#" in line:
            assert line[line.index("#"):] in patched
    (tmp_path / "before.yaml").write_text(COMMENTED_RULES)
    before = load_rules(tmp_path / "before.yaml").get("web")
    [recommended] = [c.rule for c in candidates(before, 0.0) if c.label == answer["recommended"]["candidate"]]
    assert tuned_fields(load_rules(tmp_path / "rules.yaml").get("web")) == tuned_fields(recommended) \
        != tuned_fields(before)
