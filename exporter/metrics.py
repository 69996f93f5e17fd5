"""The one place that names every exporter metric, its type, its labels and its help text.

The collector, the tests and the README's metrics reference all read this table, so a name is spelled once.
Names follow Prometheus conventions: base units, `_total` on counters, `_info` for metadata.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# Labels on every per-GPU series. namespace/pod/container hold the single container that holds the GPU
# (empty when the GPU is unallocated or shared), filled by an attribution provider.
GPU_LABELS: tuple[str, ...] = ("gpu", "uuid", "model", "node", "namespace", "pod", "container")


@dataclass(frozen=True)
class MetricSpec:
    """One metric family: name (without the `_total` suffix client_python adds), type, extra labels, help."""

    name: str
    kind: Literal["gauge", "counter"]
    help: str
    extra_labels: tuple[str, ...] = ()
    per_gpu: bool = True

    @property
    def labels(self) -> tuple[str, ...]:
        return (*GPU_LABELS, *self.extra_labels) if self.per_gpu else self.extra_labels

    @property
    def exposed_name(self) -> str:
        """The sample name as scraped (counters get `_total`)."""
        return f"{self.name}_total" if self.kind == "counter" else self.name


def _gauge(name: str, help_: str, *extra: str) -> MetricSpec:
    return MetricSpec(name, "gauge", help_, extra)


def _counter(name: str, help_: str, *extra: str) -> MetricSpec:
    if name.endswith("_total"):
        name = name[: -len("_total")]
    return MetricSpec(name, "counter", help_, extra)


GPU_INFO = _gauge("gpu_info", "GPU metadata, value 1: driver and CUDA driver versions, PCI bus id.",
                  "driver_version", "cuda_version", "pci_bus_id")
GPU_UP = _gauge("gpu_up", "1 if the GPU answered NVML on the last sweep, 0 if it is lost or failing.")
UTILIZATION = _gauge("gpu_utilization_ratio",
                     "Fraction of the last sample period during which a kernel ran on the GPU (0..1).")
MEMORY_UTILIZATION = _gauge("gpu_memory_utilization_ratio",
                            "Fraction of the last sample period during which device memory was read or "
                            "written (memory controller busy, 0..1).")
MEMORY_USED = _gauge("gpu_memory_used_bytes", "Device memory in use, in bytes.")
MEMORY_FREE = _gauge("gpu_memory_free_bytes", "Device memory free, in bytes.")
MEMORY_TOTAL = _gauge("gpu_memory_total_bytes", "Total device memory, in bytes.")
TEMPERATURE = _gauge("gpu_temperature_celsius", "GPU core temperature, in degrees Celsius.")
POWER_USAGE = _gauge("gpu_power_usage_watts", "Power drawn by the board, in watts.")
POWER_LIMIT = _gauge("gpu_power_limit_watts", "Enforced power limit, in watts.")
ENERGY = _counter("gpu_energy_consumption_joules",
                  "Energy consumed since the driver was loaded, in joules.")
SM_CLOCK = _gauge("gpu_sm_clock_hertz", "Current SM clock, in hertz.")
MEMORY_CLOCK = _gauge("gpu_memory_clock_hertz", "Current memory clock, in hertz.")
SM_CLOCK_MAX = _gauge("gpu_sm_clock_max_hertz", "Maximum SM clock, in hertz.")
MEMORY_CLOCK_MAX = _gauge("gpu_memory_clock_max_hertz", "Maximum memory clock, in hertz.")
FAN_SPEED = _gauge("gpu_fan_speed_ratio",
                   "Intended fan speed as a fraction of the maximum (NVML may report above 1).")
PERFORMANCE_STATE = _gauge("gpu_performance_state",
                           "Performance state: 0 (P0, maximum) to 15 (P15, minimum).")
CLOCKS_EVENT_REASON = _gauge("gpu_clocks_event_reason_active",
                             "1 if this reason currently holds the clocks down (throttling), else 0.",
                             "reason")
ECC_ERRORS = _counter("gpu_ecc_errors",
                      "ECC memory errors since the driver was loaded (volatile counter), by type.", "type")
PCIE_TX = _gauge("gpu_pcie_tx_bytes_per_second",
                 "PCIe transmit throughput, in bytes per second (sampled in the background).")
PCIE_RX = _gauge("gpu_pcie_rx_bytes_per_second",
                 "PCIe receive throughput, in bytes per second (sampled in the background).")
ENCODER_UTILIZATION = _gauge("gpu_encoder_utilization_ratio", "Video encoder utilization (0..1).")
DECODER_UTILIZATION = _gauge("gpu_decoder_utilization_ratio", "Video decoder utilization (0..1).")
PROCESS_MEMORY = _gauge("gpu_process_memory_used_bytes",
                        "Device memory used by one compute process, in bytes.", "pid")

# Issue 4: pods, XID errors, health.
ALLOCATION_INFO = _gauge("gpu_allocation_info",
                         "Value 1 per container holding (a share or a MIG slice of) the GPU, from the "
                         "kubelet pod-resources API; shared is true when the device series are not this "
                         "holder's alone.", "resource", "shared")
POD_UTILIZATION = _gauge("gpu_pod_utilization_ratio",
                         "GPU utilization of one holding container (0..1): the device value for an exclusive "
                         "GPU, the sum of its processes' SM shares for a shared one.")
POD_MEMORY_USED = _gauge("gpu_pod_memory_used_bytes",
                         "Device memory used by one holding container, in bytes: the device value for an "
                         "exclusive GPU, the sum of its processes' memory for a shared one.")
XID_ERRORS = _counter("gpu_xid_errors", "XID critical errors reported by the driver since the exporter "
                      "started, by XID code.", "xid")
HEALTH_STATE = _gauge("gpu_health_state",
                      "1 for the GPU's current health state (from temperature and memory use), 0 for the "
                      "others.", "state")
SPEED_MULTIPLIER = _gauge("gpu_speed_multiplier",
                          "Speed multiplier of the health state: 1.0 optimal, 0.8 normal, 0.5 throttled, "
                          "0.0 critical.")
AVAILABILITY_SCORE = _gauge("gpu_availability_score",
                            "0.6 * free memory / total memory + 0.4 * (1 - utilization), 0..1: how much room "
                            "the GPU has for more work.")

NVML_UP = MetricSpec("gpu_exporter_nvml_up", "gauge",
                     "1 if the NVML library is loaded and answering, else 0 (no library, no driver).",
                     per_gpu=False)
SCRAPE_DURATION = MetricSpec("gpu_exporter_scrape_duration_seconds", "gauge",
                             "Time the last NVML collection sweep took, in seconds.", per_gpu=False)
LAST_COLLECT = MetricSpec("gpu_exporter_last_collect_timestamp_seconds", "gauge",
                          "Unix time when NVML last answered a sweep: the staleness signal.", per_gpu=False)
GPUS = MetricSpec("gpu_exporter_gpus", "gauge", "Number of GPUs NVML reports on this node.", per_gpu=False)
POD_RESOURCES_UP = MetricSpec("gpu_exporter_pod_resources_up", "gauge",
                              "1 if the last read of the kubelet pod-resources API succeeded, else 0 (the "
                              "last pod labels are kept for a grace period, then empty).", per_gpu=False)
POD_RESOURCES_ATTEMPTS = MetricSpec("gpu_exporter_pod_resources_refresh_attempts", "counter",
                                    "Reads of the kubelet pod-resources API attempted, successful or not.",
                                    per_gpu=False)

# Every family the exporter of this issue produces, in exposition order.
DEVICE_METRICS: tuple[MetricSpec, ...] = (
    GPU_INFO, GPU_UP, UTILIZATION, MEMORY_UTILIZATION, MEMORY_USED, MEMORY_FREE, MEMORY_TOTAL, TEMPERATURE,
    POWER_USAGE, POWER_LIMIT, ENERGY, SM_CLOCK, MEMORY_CLOCK, SM_CLOCK_MAX, MEMORY_CLOCK_MAX, FAN_SPEED,
    PERFORMANCE_STATE, CLOCKS_EVENT_REASON, ECC_ERRORS, PCIE_TX, PCIE_RX, ENCODER_UTILIZATION,
    DECODER_UTILIZATION, PROCESS_MEMORY,
)
EXPORTER_METRICS: tuple[MetricSpec, ...] = (NVML_UP, GPUS, SCRAPE_DURATION, LAST_COLLECT)
# Families the collector extensions of issue 4 produce (exporter/pods/attribution.py,
# exporter/health/metrics.py and exporter/health/xid.py).
EXTENSION_METRICS: tuple[MetricSpec, ...] = (
    ALLOCATION_INFO, POD_UTILIZATION, POD_MEMORY_USED, XID_ERRORS, HEALTH_STATE, SPEED_MULTIPLIER,
    AVAILABILITY_SCORE, POD_RESOURCES_UP, POD_RESOURCES_ATTEMPTS,
)
ALL_METRICS: tuple[MetricSpec, ...] = DEVICE_METRICS + EXPORTER_METRICS + EXTENSION_METRICS
