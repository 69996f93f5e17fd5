"""The report's workload rule: the owner's name from a pod name (docs/fleet.md)."""

from __future__ import annotations

import pytest

from fleet.usage import workload_of


@pytest.mark.parametrize(("pod", "workload"), [
    ("embed-7d9f8c6b5d-x7k2p", "embed"),
    ("embed-7d9f8-0", "embed"),
    ("train-0", "train"),
    ("batch-job-x7k2p", "batch-job"),
    ("vllm-llama-70b-6c5b8d9f47-qzx2m", "vllm-llama-70b"),
    ("notebook", "notebook"),
    ("web-server", "web-server"),
    ("cache-redis-12", "cache-redis"),
], ids=lambda value: value)
def test_workload_of(pod: str, workload: str) -> None:
    assert workload_of(pod) == workload
