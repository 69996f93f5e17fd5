"""What the exporter costs on one node's NVML: sweep time per GPU, which NVML calls cost what, scrape latency.

Runs on the real NVML (`--backend real`, a GPU machine: scripts/gpu-check.sh) or the simulated one (the
default: as many simulated H100s as `--gpus`). With `--backend real --compare-simulated` the same
measurements run on as many simulated H100s right after, and the summary gives real / simulated ratios: how
far the simulator's timings are from the board's.

- sweep: `NvmlAdapter.read()` of every GPU, timed per GPU (`read_device`), `--sweeps` times;
- background: the passes the exporter's background thread makes per GPU (GPM, NVLink and counter health,
  PCIe, per-process utilization), `--passes` times, 0.1 s apart (NVML's minimum between GPM samples);
- calls: every NVML function the adapter calls in those sweeps and passes, through a timing wrapper around
  the NVML module handed to the adapter (the adapter takes any module-like object): count, median, p95;
- scrape: `GET /metrics` of a running exporter on 127.0.0.1 (`--min-interval 0`: every scrape sweeps),
  `--scrapes` times after the background passes ran once.

Medians and 95th percentiles in milliseconds; `--json FILE` writes the whole result (scripts/gpu-check.sh
reads it). Figures in docs/benchmarks.md.
Run: .venv/bin/python -m benchmarks.nvml_sweep [--backend real --compare-simulated] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import urllib.request
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from exporter.app import ExporterApp
from exporter.config import ExporterConfig, PodResourcesConfig
from exporter.nvml.adapter import NvmlAdapter, real_nvml
from exporter.simulator.config_file import parse_sim_config
from exporter.simulator.nvml import SimulatedNvml
from exporter.source import GPM_MIN_INTERVAL_SECONDS, SourceSettings

ABSENT_SOCKET = "/nonexistent/gpu-check/kubelet.sock"  # no kubelet: the pod-resources read fails fast


class TimedNvml:
    """The NVML module seen through a stopwatch: every `nvml*` function call is timed by name."""

    def __init__(self, nvml: Any) -> None:
        self._nvml = nvml
        self.seconds: dict[str, list[float]] = defaultdict(list)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._nvml, name)
        if not (name.startswith("nvml") and callable(value) and not isinstance(value, type)):
            return value

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return value(*args, **kwargs)
            finally:
                self.seconds[name].append(time.perf_counter() - start)

        return timed


def simulated(gpus: int) -> SimulatedNvml:
    """`gpus` H100s at a constant 60 % with one process each; PCIe counters answer at once, so the
    simulated figures are the simulator's own cost."""
    load = "load: {pattern: constant, value: 0.6, noise: 0}"
    processes = "processes: [{pid: 4242, memory_gib: 8}]"
    text = f"pcie_latency_seconds: 0\ngpus:\n  - {{model: H100, count: {gpus}, {load}, {processes}}}\n"
    return SimulatedNvml(parse_sim_config(text, "nvml_sweep.yaml"))


def _ms(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"median_ms": statistics.median(ordered) * 1e3, "p95_ms": p95 * 1e3, "count": len(ordered)}


def measure_sweeps(nvml: Any, sweeps: int, passes: int) -> dict[str, Any]:
    """Per-GPU sweep times, per-GPU background pass times (GPM, health, PCIe, per-process utilization,
    `GPM_MIN_INTERVAL_SECONDS` apart as the exporter's own passes are), and the cost of every NVML call."""
    timed = TimedNvml(nvml)
    adapter = NvmlAdapter(timed)
    adapter.init()
    try:
        count = adapter.device_count
        names = sorted({d.name for d in adapter.read().devices})
        timed.seconds.clear()  # the first sweep pays for what is read once per session
        per_gpu: list[float] = []
        whole: list[float] = []
        for _ in range(sweeps):
            start = time.perf_counter()
            for index in range(count):
                begin = time.perf_counter()
                adapter.read_device(index)
                per_gpu.append(time.perf_counter() - begin)
            whole.append(time.perf_counter() - start)
        background: list[float] = []
        for _ in range(passes + 1):  # what the background thread adds, off the scrape path
            time.sleep(GPM_MIN_INTERVAL_SECONDS)  # NVML refuses GPM samples closer than this
            for index in range(count):
                begin = time.perf_counter()
                adapter.read_background(index)
                adapter.read_pcie(index)
                adapter.process_utilization(index)
                background.append(time.perf_counter() - begin)
        background = background[count:]  # the first pass only takes the first GPM sample
        calls = {name: _ms(seconds) for name, seconds in timed.seconds.items()}  # before nvmlShutdown
    finally:
        adapter.shutdown()
    return {"gpus": count, "names": names, "driver": adapter.driver_version, "sweeps": sweeps,
            "passes": passes, "sweep_per_gpu": _ms(per_gpu), "sweep_all_gpus": _ms(whole),
            "background_per_gpu": _ms(background),
            "calls": dict(sorted(calls.items(), key=lambda item: -item[1]["median_ms"]))}


def measure_scrapes(nvml: Any, scrapes: int, timeout: float = 120.0) -> dict[str, Any]:
    """`GET /metrics` latency of a running exporter whose every scrape sweeps (min interval 0)."""
    settings = SourceSettings(min_interval=0.0, pcie_interval=1.0, profiling_interval=1.0)
    config = ExporterConfig(pod_resources=PodResourcesConfig(socket=ABSENT_SOCKET))
    app = ExporterApp(nvml, "bench-node", settings, config=config)
    server = app.start("127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.port}/metrics"
    try:
        body = b""
        deadline = time.monotonic() + timeout
        while b"gpu_pcie_tx_bytes_per_second{" not in body and time.monotonic() < deadline:
            with urllib.request.urlopen(url, timeout=10) as response:  # until the background ran once
                body = response.read()
            time.sleep(0.1)
        latencies = []
        for _ in range(scrapes):
            start = time.perf_counter()
            with urllib.request.urlopen(url, timeout=10) as response:
                body = response.read()
            latencies.append(time.perf_counter() - start)
    finally:
        app.stop()
    return {"scrapes": scrapes, "bytes": len(body), **_ms(latencies)}


def run(backend: str, gpus: int, sweeps: int, scrapes: int, compare: bool,
        passes: int = 20) -> dict[str, Any]:
    make: Callable[[], Any] = real_nvml if backend == "real" else (lambda: simulated(gpus))
    result: dict[str, Any] = {"backend": backend, **measure_sweeps(make(), sweeps, passes),
                              "scrape": measure_scrapes(make(), scrapes)}
    if compare and backend == "real":
        sim = run("simulated", result["gpus"], sweeps, scrapes, compare=False, passes=passes)
        result["simulated"] = sim
        result["ratio_to_simulated"] = {
            "sweep_per_gpu": result["sweep_per_gpu"]["median_ms"] / sim["sweep_per_gpu"]["median_ms"],
            "background_per_gpu": (result["background_per_gpu"]["median_ms"]
                                   / sim["background_per_gpu"]["median_ms"]),
            "scrape": result["scrape"]["median_ms"] / sim["scrape"]["median_ms"],
        }
    return result


def report(result: dict[str, Any], top: int = 12) -> str:
    """The result for people: a few lines and the costliest calls."""
    background = result["background_per_gpu"]
    lines = [f"{result['backend']} NVML: {result['gpus']} GPU(s) {', '.join(result['names'])}, "
             f"driver {result['driver'] or '?'}",
             f"sweep per GPU: median {result['sweep_per_gpu']['median_ms']:.2f} ms, "
             f"p95 {result['sweep_per_gpu']['p95_ms']:.2f} ms ({result['sweeps']} sweeps); all GPUs: median "
             f"{result['sweep_all_gpus']['median_ms']:.2f} ms",
             f"background pass per GPU (GPM, health, PCIe, per-process utilization): median "
             f"{background['median_ms']:.2f} ms, p95 {background['p95_ms']:.2f} ms "
             f"({result['passes']} passes)",
             f"scrape (GET /metrics, every scrape sweeps): median {result['scrape']['median_ms']:.2f} ms, "
             f"p95 {result['scrape']['p95_ms']:.2f} ms, {result['scrape']['bytes']} bytes",
             "costliest NVML calls (median ms x calls):"]
    for name, cost in list(result["calls"].items())[:top]:
        lines.append(f"  {name:48} {cost['median_ms']:8.3f} x {cost['count']}")
    if "ratio_to_simulated" in result:
        ratio = result["ratio_to_simulated"]
        lines.append(f"ratio to the simulator: sweep per GPU {ratio['sweep_per_gpu']:.1f}x, background pass "
                     f"{ratio['background_per_gpu']:.1f}x, scrape {ratio['scrape']:.1f}x")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.nvml_sweep",
                                     description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--backend", choices=("simulated", "real"), default="simulated")
    parser.add_argument("--gpus", type=int, default=8, help="simulated GPUs (default 8)")
    parser.add_argument("--sweeps", type=int, default=200, help="timed sweeps (default 200)")
    parser.add_argument("--scrapes", type=int, default=200, help="timed scrapes (default 200)")
    parser.add_argument("--passes", type=int, default=20,
                        help="timed background passes, 0.1 s apart (default 20)")
    parser.add_argument("--compare-simulated", action="store_true",
                        help="with --backend real: the same on simulated H100s, and the ratios")
    parser.add_argument("--json", metavar="FILE", help="write the whole result as JSON")
    args = parser.parse_args(argv)
    if min(args.gpus, args.sweeps, args.scrapes, args.passes) < 1:
        parser.error("--gpus, --sweeps, --scrapes and --passes must be at least 1")
    result = run(args.backend, args.gpus, args.sweeps, args.scrapes, args.compare_simulated, args.passes)
    print(report(result))
    if "simulated" in result:
        print(report(result["simulated"]))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(result, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
