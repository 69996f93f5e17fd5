"""Hot reload of a hostile rules file, end to end: `gpu-autoscaler run` as a real process against the fake
API server and a real Prometheus. Each bomb swapped in is refused like any invalid file: the previous rules
keep running (and keep scaling), gpu_autoscaler_rules_valid is 0, syncs go on, SIGTERM still exits 0 at once.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import requests

from demo.processes import free_port
from tests.fake_kube.apiserver import FakeApiServer
from tests.hostile import YAML_HOSTILE
from tests.integration.autoscaler.cli.test_run_process import write_files
from tests.prom import Prom
from tests.support import reap, start_process, stop_process, wait_for

pytestmark = pytest.mark.integration

SWAPPED_IN = ("billion-laughs", "recursive-merge", "100000-brackets", "5000-digit-integer", "50-MB",
              "not-utf8")
LAST_SYNC = "gpu_autoscaler_last_successful_sync_timestamp_seconds"


def metric(port: int, name: str) -> float | None:
    """The value of an unlabelled series on the controller's /metrics, None when unreachable or absent."""
    try:
        text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=1).text
    except requests.RequestException:
        return None
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def swap(rules: Path, content: bytes) -> None:
    """Replace the file atomically, as a ConfigMap update or an editor's save does."""
    staged = rules.with_suffix(".new")
    staged.write_bytes(content)
    os.replace(staged, rules)


def test_hostile_rules_files_are_refused_and_the_previous_rules_keep_scaling(
    apiserver: FakeApiServer, prom: Prom, tmp_path: Path
) -> None:
    apiserver.add("web", 2)
    prom.target.set("reload-web", 160)
    query = 'test_load{series="reload-web"}'
    prom.wait_value(query, 160)
    rules, kubeconfig = write_files(tmp_path, apiserver, query)
    valid = rules.read_bytes()
    port = free_port()
    proc = start_process(
        [sys.executable, "-m", "autoscaler.cli.main", "run", "--rules", str(rules), "--prometheus", prom.url,
         "--kubeconfig", str(kubeconfig), "--interval", "1s", "--metrics-port", str(port)],
    )
    try:
        wait_for(lambda: apiserver.replicas("web") == 4, 60, "the first sync to scale 2 -> 4")
        wait_for(lambda: metric(port, "gpu_autoscaler_rules_valid") == 1.0, 30, "rules_valid 1")
        hostile = {h.id: h for h in YAML_HOSTILE}
        for name in SWAPPED_IN:
            swap(rules, hostile[name].content)
            wait_for(lambda: metric(port, "gpu_autoscaler_rules_valid") == 0.0, 30, f"rules_valid 0 ({name})")
            synced = metric(port, LAST_SYNC) or 0.0
            wait_for(lambda after=synced: (metric(port, LAST_SYNC) or 0.0) > after, 10,
                     f"a sync after the swap ({name})")
            assert metric(port, "gpu_autoscaler_rules_loaded") == 1.0
            assert proc.poll() is None, f"the controller died on {name}"
            swap(rules, valid)  # back to valid: rules_valid 1, so the next bomb's 0 is its own
            wait_for(lambda: metric(port, "gpu_autoscaler_rules_valid") == 1.0, 30, f"valid again ({name})")
        swap(rules, hostile["billion-laughs"].content)
        wait_for(lambda: metric(port, "gpu_autoscaler_rules_valid") == 0.0, 30, "rules_valid 0 (last bomb)")
        prom.target.set("reload-web", 320)  # the previous rule must still act on new load: 4 -> 8
        # a hang guard: the policy allows 100 % per 15 s after the first scale-up, on a loaded machine
        wait_for(lambda: apiserver.replicas("web") == 8, 45, "the previous rules to scale 4 -> 8")
        # a hang guard only: that a stop never waits out an interval is test_run_process's, with a long one
        assert stop_process(proc, timeout=30) == 0
    finally:
        stderr = reap(proc, timeout=5)
    assert "Traceback" not in stderr, stderr[-3000:]
    refused = "is invalid; keeping the previous rules running"
    refusals = [text for text in stderr.splitlines() if refused in text]
    assert len(refusals) == len(SWAPPED_IN) + 1, stderr[-3000:]  # once per swap, not once per sync
    assert "alias bomb" in stderr and "nested more than 64 levels" in stderr and "not UTF-8" in stderr
    assert "larger than 4,194,304 bytes" in stderr and "recursive alias" in stderr
    patches = apiserver.patches("web")
    assert patches[0] == 4 and patches[-1] == 8 and patches == sorted(patches)  # up only, never reverted
