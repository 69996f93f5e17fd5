"""The exporter's contract on a GPU, the same test on two backends: the simulated NVML (every run) and the
real NVML (marker `gpu`: skipped with the reason where no GPU answers; `scripts/gpu-check.sh` runs it on a GPU
machine). So no code path the real GPU takes goes untested here, and the real GPU checks what the simulator's
tests check.

One GPU is time-sliced between two pods; the test starts a process of its own on it (the real backend: a
context, 256 MiB and a spinning kernel through libcuda alone, tests/cuda_process.py; the simulated one: a
live process the simulator lists with 256 MiB) that a fake /proc puts in the first pod. Then, over real HTTP:
the core families for every GPU with the GPU labels, GPM after two background passes where the board has it,
the process's memory by its PID, its pod's memory and utilization, and not one WARNING or ERROR logged.
"""

from __future__ import annotations

import logging
import math
import os
import select
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from exporter.app import ExporterApp
from exporter.config import ExporterConfig, PodResourcesConfig
from exporter.metric_table import GPU_LABELS
from exporter.nvml.adapter import real_nvml
from exporter.simulator.config_file import parse_sim_config
from exporter.simulator.nvml import SimulatedNvml
from exporter.simulator.physics import gpu_uuid
from exporter.source import SourceSettings
from tests.kubelet import GPU, KubeletServer
from tests.scrape import Samples, fetch, samples
from tests.support import wait_for

pytestmark = pytest.mark.integration

CUDA_PROCESS = Path(__file__).resolve().parents[2] / "cuda_process.py"
PROCESS_MIB = 256
NAMESPACE, POD, NEIGHBOUR, CONTAINER = "gpu-check", "probe", "neighbour", "main"
POD_UID = "7e57c0de-0000-4a8e-9d3c-000000000001"
# Served for every GPU that answers, on every board the exporter supports (NVLink, fan, retired pages, ECC
# and MIG are board-dependent and left out where NVML says NotSupported).
CORE_FAMILIES = ("gpu_info", "gpu_up", "gpu_utilization_ratio", "gpu_memory_used_bytes",
                 "gpu_memory_free_bytes", "gpu_memory_total_bytes", "gpu_temperature_celsius",
                 "gpu_power_usage_watts", "gpu_sm_clock_hertz", "gpu_clocks_event_reason_active",
                 "gpu_health_state", "gpu_speed_multiplier", "gpu_exporter_gpm_supported")
SIMULATED = """
pcie_latency_seconds: 0
gpus:
  - {model: H100, count: 2, load: {pattern: constant, value: 0.5, noise: 0}}
"""


@dataclass
class Backend:
    """An NVML backend with a process of the test's own on GPU `index`."""

    name: str
    nvml: Any
    index: int
    uuid: str
    process: subprocess.Popen[str]
    settings: SourceSettings
    timeout: float  # seconds to wait for the first complete scrape (GPM needs two background passes)


def _start_simulated() -> Backend:
    config = parse_sim_config(SIMULATED, "contract.yaml")
    nvml = SimulatedNvml(config)
    process = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE,
                               text=True)
    # the simulator's process holds 85-100 % of this with the load: at least the 256 MiB a real one does
    nvml.set_processes(0, [(process.pid, math.ceil((PROCESS_MIB << 20) / 0.85))])
    uuid = gpu_uuid(config.seed, 0)
    settings = SourceSettings(min_interval=0.0, pcie_interval=0.05, profiling_interval=0.05)
    return Backend("simulated", nvml, 0, uuid, process, settings, timeout=15.0)


def _start_real() -> Backend:
    nvml = real_nvml()
    nvml.nvmlInit()
    try:
        raw = nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetHandleByIndex(0))
    finally:
        nvml.nvmlShutdown()
    uuid = raw.decode() if isinstance(raw, bytes) else str(raw)
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": uuid}  # CUDA's device 0 is NVML's GPU 0
    process = subprocess.Popen([sys.executable, str(CUDA_PROCESS), "--mib", str(PROCESS_MIB)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    assert process.stdout is not None
    readable, _, _ = select.select([process.stdout], [], [], 60.0)
    line = process.stdout.readline() if readable else ""
    assert line.startswith("ready "), f"tests/cuda_process.py did not start: {line!r} (exit {process.poll()})"
    # GPM samples need a gap NVML can measure; one background pass a second, as a busy node would run
    settings = SourceSettings(min_interval=0.0, pcie_interval=1.0, profiling_interval=1.0)
    return Backend("real", nvml, 0, uuid, process, settings, timeout=60.0)


STARTERS: dict[str, Callable[[], Backend]] = {"simulated": _start_simulated, "real": _start_real}


@pytest.fixture(params=[pytest.param("simulated"), pytest.param("real", marks=pytest.mark.gpu)],
                ids=["simulated-nvml", "real-nvml"])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    started = STARTERS[request.param]()
    yield started
    assert started.process.stdin is not None
    started.process.stdin.close()  # the process frees its memory and exits
    try:
        started.process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        started.process.kill()
        started.process.wait(timeout=10)


def _write_proc(root: Path, pid: int) -> None:
    """/proc/<pid>/cgroup and environ as containerd under the kubelet's systemd driver would write them."""
    directory = root / str(pid)
    directory.mkdir(parents=True)
    container = f"{pid:064x}"
    (directory / "cgroup").write_text(
        "0::/kubepods.slice/kubepods-burstable.slice/"
        f"kubepods-burstable-pod{POD_UID.replace('-', '_')}.slice/cri-containerd-{container}.scope\n")
    (directory / "environ").write_bytes(b"PATH=/usr/bin\0HOSTNAME=" + POD.encode() + b"\0")


def _one(found: Samples, name: str, **match: str) -> float | None:
    values = [v for labels, v in found.get(name, []) if all(labels.get(k) == x for k, x in match.items())]
    assert len(values) <= 1, (name, match, values)
    return values[0] if values else None


def _complete(found: Samples, backend: Backend) -> bool:
    """Everything the contract asserts has been sampled: the background passes ran, the pods are read."""
    gpu, pid = str(backend.index), str(backend.process.pid)
    gpm = _one(found, "gpu_exporter_gpm_supported", gpu=gpu)
    return (_one(found, "gpu_exporter_pod_resources_up") == 1.0
            and _one(found, "gpu_process_memory_used_bytes", gpu=gpu, pid=pid) is not None
            and _one(found, "gpu_pod_memory_used_bytes", gpu=gpu, pod=POD) is not None
            and _one(found, "gpu_pod_utilization_ratio", gpu=gpu, pod=POD) is not None
            and gpm is not None and (gpm == 0.0 or _one(found, "gpu_sm_active_ratio", gpu=gpu) is not None))


def test_the_exporter_contract_on_one_gpu(backend: Backend, kubelet: KubeletServer, tmp_path: Path,
                                          caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    proc_root = tmp_path / "proc"
    _write_proc(proc_root, backend.process.pid)
    kubelet.set_pods([(NAMESPACE, POD, [(CONTAINER, [(GPU, [f"{backend.uuid}::0"])])]),
                      (NAMESPACE, NEIGHBOUR, [(CONTAINER, [(GPU, [f"{backend.uuid}::1"])])])])
    config = ExporterConfig(pod_resources=PodResourcesConfig(refresh_interval_seconds=0.1))
    app = ExporterApp(backend.nvml, "contract-node", backend.settings, config=config,
                      pod_resources_socket=kubelet.socket_path, proc_root=proc_root)
    server = app.start("127.0.0.1", 0)
    try:
        url = f"http://127.0.0.1:{server.port}/metrics"
        found = wait_for(lambda: (lambda s: s if _complete(s, backend) else None)(samples(fetch(url))),
                         timeout=backend.timeout, what=f"a complete scrape on the {backend.name} NVML")
    finally:
        app.stop()

    gpus = int(_one(found, "gpu_exporter_gpus") or 0)
    assert gpus >= 1 and _one(found, "gpu_exporter_nvml_up") == 1.0
    for family in CORE_FAMILIES:  # every family, for every GPU, with the GPU labels
        series = found.get(family, [])
        assert {labels["gpu"] for labels, _ in series} == {str(i) for i in range(gpus)}, family
        assert all(set(GPU_LABELS) <= set(labels) and labels["node"] == "contract-node"
                   and labels["uuid"].startswith("GPU-") for labels, _ in series), family
    assert all(value == 1.0 for _, value in found["gpu_up"])

    gpu, pid = str(backend.index), str(backend.process.pid)
    if _one(found, "gpu_exporter_gpm_supported", gpu=gpu) == 1.0:  # Hopper and newer: GPM after two passes
        assert 0.0 <= (_one(found, "gpu_sm_active_ratio", gpu=gpu) or -1.0) <= 1.0

    process_bytes = _one(found, "gpu_process_memory_used_bytes", gpu=gpu, pid=pid) or 0.0
    assert process_bytes >= PROCESS_MIB << 20  # the allocation, plus the context on a real GPU
    pod_bytes = _one(found, "gpu_pod_memory_used_bytes", gpu=gpu, namespace=NAMESPACE, pod=POD)
    assert pod_bytes == process_bytes  # the pod's one process
    used = _one(found, "gpu_memory_used_bytes", gpu=gpu) or 0.0
    assert process_bytes <= used

    pod_util = _one(found, "gpu_pod_utilization_ratio", gpu=gpu, namespace=NAMESPACE, pod=POD)
    device_util = _one(found, "gpu_utilization_ratio", gpu=gpu)
    assert pod_util is not None and device_util is not None
    assert 0.0 < pod_util <= device_util  # its kernels ran, and a holder never exceeds the device
    neighbour = _one(found, "gpu_pod_utilization_ratio", gpu=gpu, namespace=NAMESPACE, pod=NEIGHBOUR)
    assert neighbour in (None, 0.0)  # no process of its own

    loud = [f"{r.levelname} {r.name}: {r.getMessage()}" for r in caplog.records
            if r.levelno >= logging.WARNING]
    assert loud == []
