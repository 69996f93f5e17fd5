"""The GPU manager's `GET /api/gpu/status?gpu_id=N` served by a running exporter, beside /api/v1, and
agreeing with it: the same GPU in MB (MiB) and percent."""

from __future__ import annotations

import json

from tests.integration.exporter.conftest import StartExporter, get
from tests.integration.exporter.test_units_agree import FLEET  # one H100 at a constant 58 %


def test_the_quickstart_status_answers_next_to_api_v1(start_exporter: StartExporter) -> None:
    base, _, _ = start_exporter(FLEET)
    status, body, _ = get(f"{base}/api/gpu/status?gpu_id=0")
    assert status == 200
    answer = json.loads(body)
    assert answer["success"] is True
    data = answer["data"]
    _, v1_body, _ = get(f"{base}/api/v1/gpus/0")
    v1 = json.loads(v1_body)
    assert (data["gpu_id"], data["name"], data["available"]) == (0, v1["name"], True)
    assert data["load_percent"] == v1["utilization_percent"] == 58.0
    assert data["memory"]["used_mb"] == v1["memory"]["used_bytes"] // 2**20 > 0
    assert data["memory"]["total_mb"] == v1["memory"]["total_bytes"] // 2**20
    assert data["throttling"]["speed_multiplier"] == v1["speed_multiplier"]
    assert data["throttling"]["is_throttled"] is (v1["state"] in ("throttled", "critical"))
    assert data["nvml_clock_throttle_reasons"] == v1["nvml_clock_throttle_reasons"]
    missing, missing_body, _ = get(f"{base}/api/gpu/status?gpu_id=3")
    assert missing == 404 and json.loads(missing_body)["success"] is False
    assert get(f"{base}/api/gpu/other")[0] == 404
