"""Scrape latency of `gpu-exporter` on an 8-GPU H100 node (3 processes per GPU, pods attached, GPM
profiling, NVLink and memory health, GPU 7 in MIG mode with 7 MIG devices) against prometheus_client alone.

Pods are attached as on a real node: a gRPC PodResourcesLister on a temp unix socket (served by this process,
not the measured one) hands GPUs 0-3 to one pod each, time-slices GPUs 4-6 between three pods each and gives
each of GPU 7's seven MIG devices to its own pod, and a fake proc tree
(`--proc-root`) names every GPU process's pod, so the measured scrape includes attribution,
the per-holder series, health and availability (and the exporter's RSS includes grpc).

The baseline is prometheus_client serializing the very same samples from a pre-filled registry (Gauge and
Counter objects holding the values of one exporter scrape), measured in the same run, interleaved with the
exporter's scrapes so machine noise hits both alike. Three comparisons:

- HTTP: the exporter process (the default min interval, 1 s: one NVML sweep per second at most, the body
  rendered once per sweep and served as bytes until the next) against prometheus_client's own
  `start_http_server` serving the pre-filled registry in another process; plain, then with
  `Accept-Encoding: gzip` as Prometheus sends it (both servers compress; ours once per sweep).
- in-process, a new sweep on every scrape (min interval 0: the worst case, every scrape renders): sweep +
  collect + serialize of the exporter against `generate_latest` of the pre-filled registry.

Targets: median HTTP scrape <= 1.0x the baseline, plain and gzip; exporter resident memory <= 60 MiB. The
in-process render of a new sweep is reported against 1.5x (what a sweep costs, once per second at most).
Run: .venv/bin/python -m benchmarks.exporter_scrape [--scrapes 400]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest, start_http_server
from prometheus_client.parser import text_string_to_metric_families

from demo.processes import free_port, wait_http_ok
from exporter.simulator.mig import mig_uuid
from exporter.simulator.physics import gpu_uuid

GPUS = 8
PROCESSES_PER_GPU = 3
RATIO_TARGET = 1.0  # a scrape served between sweeps against prometheus_client serving the same samples
RENDER_RATIO_TARGET = 1.5  # a scrape that renders a new sweep
RSS_TARGET_MIB = 60.0
MIG_GPU, MIG_DEVICES = 7, 7  # GPU 7 is in MIG mode with seven 1g.10gb MIG devices, one pod each
# every family is in the first timed scrape: background PCIe, pods, GPM (two passes, 5 s) per GPU and instance
READY_MARKERS = (b"gpu_pcie_rx_bytes_per_second{", b"gpu_exporter_pod_resources_up 1.0",
                 b'gpu_pod_utilization_ratio{container="main",gpu="6"', b"gpu_sm_active_ratio{",
                 b"gpu_mig_sm_active_ratio{", b"gpu_nvlink_errors_total{")


def fleet_yaml() -> str:
    lines = ["pcie_latency_seconds: 0.02", "gpus:"]
    for gpu in range(GPUS):
        procs = ", ".join(f"{{pid: {10_000 + gpu * 10 + p}, memory_gib: {8 + 4 * p}}}"
                          for p in range(PROCESSES_PER_GPU))
        mig = f", mig: {MIG_DEVICES}" if gpu == MIG_GPU else ""
        lines.append(f"  - {{model: H100, count: 1{mig}, processes: [{procs}]}}")
    return "\n".join(lines) + "\n"


SHARED_FROM = 4  # GPUs from this index on (but the MIG GPU) are time-sliced between one pod per process


def pod_of(gpu: int, process: int) -> str:
    """The pod of a process; on the MIG GPU process p runs on MIG device p (the simulator's placement)."""
    if gpu == MIG_GPU:
        return f"mig-{gpu}-{process}"
    return f"llm-{gpu}-{process}" if gpu >= SHARED_FROM else f"trainer-{gpu}"


def start_kubelet(socket_path: str) -> object:
    """A gRPC PodResourcesLister answering this node's allocations (grpc lives in this process only)."""
    from concurrent import futures

    import grpc

    from exporter.pods.podresources import api_pb2, api_pb2_grpc

    response = api_pb2.ListPodResourcesResponse()
    for slot in range(MIG_DEVICES):
        pod = response.pod_resources.add(name=pod_of(MIG_GPU, slot), namespace="bench")
        container = pod.containers.add(name="main")
        container.devices.add(resource_name="nvidia.com/mig-1g.10gb", device_ids=[mig_uuid(1, MIG_GPU, slot)])
    for gpu in range(GPUS):
        if gpu == MIG_GPU:
            continue
        uuid = gpu_uuid(1, gpu)
        pods = range(PROCESSES_PER_GPU) if gpu >= SHARED_FROM else range(1)
        for process in pods:
            pod = response.pod_resources.add(name=pod_of(gpu, process), namespace="bench")
            container = pod.containers.add(name="main")
            container.devices.add(resource_name="nvidia.com/gpu", device_ids=[f"{uuid}::{process}"])

    class Lister(api_pb2_grpc.PodResourcesListerServicer):
        def List(self, request: object, context: object) -> object:
            return response

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    api_pb2_grpc.add_PodResourcesListerServicer_to_server(Lister(), server)
    server.add_insecure_port("unix:" + socket_path)
    server.start()
    return server


def write_proc_tree(root: Path) -> None:
    """<pid>/cgroup (a pod cgroup) and <pid>/environ (HOSTNAME = the pod name) for every GPU process."""
    for gpu in range(GPUS):
        for process in range(PROCESSES_PER_GPU):
            pid = 10_000 + gpu * 10 + process
            directory = root / str(pid)
            directory.mkdir(parents=True)
            uid = f"{pid:08x}-0000-4000-8000-000000000000"
            (directory / "cgroup").write_text(f"0::/kubepods/burstable/pod{uid}/{pid:064x}\n")
            (directory / "environ").write_bytes(b"HOSTNAME=" + pod_of(gpu, process).encode() + b"\0")


def prefilled_registry(exposition: str) -> CollectorRegistry:
    """A registry of plain Gauge/Counter objects holding exactly the samples of `exposition`."""
    registry = CollectorRegistry()
    for family in text_string_to_metric_families(exposition):
        label_names = sorted({name for sample in family.samples for name in sample.labels})
        if family.type == "counter":
            counter = Counter(family.name, family.documentation, label_names, registry=registry)
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    (counter.labels(**sample.labels) if label_names else counter).inc(sample.value)
        else:
            gauge = Gauge(family.name, family.documentation, label_names, registry=registry)
            for sample in family.samples:
                (gauge.labels(**sample.labels) if label_names else gauge).set(sample.value)
    return registry


def serve_baseline(exposition_file: str, port: int) -> None:
    """Child process: prometheus_client alone, serving the pre-filled registry until killed."""
    registry = prefilled_registry(Path(exposition_file).read_text())
    start_http_server(port, addr="127.0.0.1", registry=registry)
    while True:
        time.sleep(3600)


def fetch(url: str, gzip: bool = False) -> bytes:
    request = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"} if gzip else {})
    with urllib.request.urlopen(request, timeout=10) as response:
        body: bytes = response.read()
        if gzip and response.headers.get("Content-Encoding") != "gzip":
            raise RuntimeError(f"{url} did not answer gzip")
        return body


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def rss_mib(pid: int) -> tuple[float, float]:
    """(current, peak) resident memory of `pid` in MiB, from /proc."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0]) / 1024
    return values["VmRSS"], values["VmHWM"]


def interleaved(a: Callable[[], object], b: Callable[[], object], n: int) -> tuple[list[float], list[float]]:
    times_a, times_b = [], []
    for _ in range(n):
        times_a.append(timed(a))
        times_b.append(timed(b))
    return times_a, times_b


def report(title: str, exporter: list[float], baseline: list[float], target: float = RATIO_TARGET) -> float:
    med_e, med_b = statistics.median(exporter), statistics.median(baseline)
    ratio = med_e / med_b
    p95_e, p95_b = (statistics.quantiles(times, n=20)[-1] for times in (exporter, baseline))
    print(f"{title}: exporter median {med_e * 1e3:.2f} ms (p95 {p95_e * 1e3:.2f}), baseline median "
          f"{med_b * 1e3:.2f} ms (p95 {p95_b * 1e3:.2f}), ratio {ratio:.2f} (target <= {target}) "
          f"{'OK' if ratio <= target else 'MISSED'}")
    return ratio


def in_process(scrapes: int, socket_path: str, proc_root: Path) -> float:
    from exporter.app import ExporterApp
    from exporter.simulator.config_file import parse_sim_config
    from exporter.simulator.nvml import SimulatedNvml
    from exporter.source import SourceSettings

    app = ExporterApp(SimulatedNvml(parse_sim_config(fleet_yaml(), "bench.yaml")), "bench-node",
                      SourceSettings(min_interval=0.0), pod_resources_socket=socket_path, proc_root=proc_root)
    app.source.start()
    app.pod_resources.refresh()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not all(
                marker in generate_latest(app.registry) for marker in READY_MARKERS):
            time.sleep(0.2)
        baseline = prefilled_registry(generate_latest(app.registry).decode())
        interleaved(lambda: generate_latest(app.registry), lambda: generate_latest(baseline), 20)
        exporter_times, baseline_times = interleaved(
            lambda: generate_latest(app.registry), lambda: generate_latest(baseline), scrapes)
    finally:
        app.stop()
    return report("in-process, a new sweep every scrape (sweep + collect + serialize)", exporter_times,
                  baseline_times, RENDER_RATIO_TARGET)


def over_http(scrapes: int, workdir: Path, socket_path: str) -> tuple[float, float, float, float]:
    config = workdir / "fleet.yaml"
    config.write_text(fleet_yaml())
    exporter_port, baseline_port = free_port(), free_port()
    exporter_bin = str(Path(sys.executable).parent / "gpu-exporter")
    exporter = subprocess.Popen(
        [exporter_bin, "--simulate-config", str(config), "--address", "127.0.0.1",
         "--port", str(exporter_port), "--log-level", "WARNING",
         "--node-name", "bench-node", "--pod-resources-socket", socket_path, "--proc-root",
         str(workdir / "proc")])
    baseline: subprocess.Popen[bytes] | None = None
    try:
        exporter_url = f"http://127.0.0.1:{exporter_port}/metrics"
        wait_http_ok(f"http://127.0.0.1:{exporter_port}/readyz", 30, exporter)
        # wait for the background passes (PCIe, GPM) so every scrape has the same series
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not all(
                marker in fetch(exporter_url) for marker in READY_MARKERS):
            time.sleep(0.1)
        exposition = workdir / "scrape.txt"
        body = fetch(exporter_url)
        exposition.write_bytes(body)
        samples = sum(1 for line in body.decode().splitlines() if line and not line.startswith("#"))
        print(f"one scrape: {samples} samples, {len(body)} bytes")
        baseline = subprocess.Popen([sys.executable, "-m", "benchmarks.exporter_scrape", "--serve-baseline",
                                     str(exposition), "--port", str(baseline_port)])
        baseline_url = f"http://127.0.0.1:{baseline_port}/metrics"
        wait_http_ok(baseline_url, 30, baseline)
        interleaved(lambda: fetch(exporter_url), lambda: fetch(baseline_url), 20)
        exporter_times, baseline_times = interleaved(
            lambda: fetch(exporter_url), lambda: fetch(baseline_url), scrapes)
        ratio = report("HTTP scrape (exporter process vs prometheus_client start_http_server)",
                       exporter_times, baseline_times)
        exporter_times, baseline_times = interleaved(
            lambda: fetch(exporter_url, gzip=True), lambda: fetch(baseline_url, gzip=True), scrapes)
        gzip_ratio = report("HTTP scrape, Accept-Encoding: gzip", exporter_times, baseline_times)
        rss, peak = rss_mib(exporter.pid)
        verdict = "OK" if peak <= RSS_TARGET_MIB else "MISSED"
        print(f"exporter resident memory: {rss:.1f} MiB (peak {peak:.1f} MiB; "
              f"target <= {RSS_TARGET_MIB:.0f} MiB) {verdict}")
        return ratio, gzip_ratio, rss, peak
    finally:
        for proc in (exporter, baseline):
            if proc is not None:
                proc.terminate()
                proc.wait(10)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.exporter_scrape",
                                     description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--scrapes", type=int, default=400, help="timed scrapes per side (default 400)")
    parser.add_argument("--serve-baseline", metavar="FILE", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_baseline:
        serve_baseline(args.serve_baseline, args.port)
        return 0
    print(f"{GPUS} simulated H100 (GPM, NVLink; GPU {MIG_GPU} with {MIG_DEVICES} MIG devices), "
          f"{PROCESSES_PER_GPU} processes per GPU, {args.scrapes} scrapes per side")
    with tempfile.TemporaryDirectory(prefix="gpu-exporter-bench-", dir="/tmp") as tmp:
        socket_path = str(Path(tmp) / "kubelet.sock")
        kubelet = start_kubelet(socket_path)
        write_proc_tree(Path(tmp) / "proc")
        try:
            http_ratio, gzip_ratio, _, peak = over_http(args.scrapes, Path(tmp), socket_path)
            process_ratio = in_process(args.scrapes, socket_path, Path(tmp) / "proc")
        finally:
            kubelet.stop(None)  # type: ignore[attr-defined]
    ok = (max(http_ratio, gzip_ratio) <= RATIO_TARGET and process_ratio <= RENDER_RATIO_TARGET
          and peak <= RSS_TARGET_MIB)
    print("all targets met" if ok else "TARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
