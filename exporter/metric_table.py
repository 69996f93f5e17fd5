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
GPU_UP = _gauge("gpu_up", "1 if the GPU answered NVML on the last sweep, 0 if it is lost, needs a reset or "
                          "is gone (one failing call leaves only its own series out).")
UTILIZATION = _gauge("gpu_utilization_ratio",
                     "Fraction of the last sample period during which a kernel ran on the GPU (0..1).")
MEMORY_UTILIZATION = _gauge("gpu_memory_utilization_ratio",
                            "Fraction of the last sample period during which device memory was read or "
                            "written (memory controller busy, 0..1).")
MEMORY_USED = _gauge("gpu_memory_used_bytes", "Device memory in use, in bytes.")
MEMORY_FREE = _gauge("gpu_memory_free_bytes", "Device memory free, in bytes.")
MEMORY_TOTAL = _gauge("gpu_memory_total_bytes", "Total device memory, in bytes.")
MEMORY_RESERVED = _gauge("gpu_memory_reserved_bytes",
                         "Device memory the driver reserves for itself, in bytes (counted in "
                         "gpu_memory_used_bytes too).")
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
                         "holder's alone; claim is the DRA ResourceClaim (empty for a device plugin's GPU).",
                         "resource", "shared", "claim")
POD_UTILIZATION = _gauge("gpu_pod_utilization_ratio",
                         "GPU utilization of one holding container (0..1): the device value for an exclusive "
                         "GPU, the sum of its processes' SM shares for a shared one, scaled down where the "
                         "holders would add up to more than the device.")
POD_SM_UTILIZATION = _gauge("gpu_pod_sm_utilization_ratio",
                            "Fraction of time (0..1) kernels of one holding container ran on the GPU: the "
                            "sum of its processes' NVML per-process SM utilization over the last sampling "
                            "window (exclusive or shared GPU; none in MIG mode).")
POD_MEMORY_BANDWIDTH = _gauge("gpu_pod_memory_bandwidth_utilization_ratio",
                              "Fraction of time (0..1) device memory was read or written for one holding "
                              "container: the sum of its processes' NVML per-process memory utilization over "
                              "the last sampling window (none in MIG mode).")
POD_MEMORY_USED = _gauge("gpu_pod_memory_used_bytes",
                         "Device memory used by one holding container, in bytes: the device value for an "
                         "exclusive GPU, the sum of its processes' memory for a shared one.")
XID_ERRORS = _counter("gpu_xid_errors", "XID critical errors reported by the driver since the exporter "
                      "started, by XID code.", "xid")
XID_LAST = _gauge("gpu_xid_last_code", "Code of the last XID error the driver reported on the GPU since the "
                  "exporter started, also in the label xid (0 and no xid label: none yet).", "xid")
HEALTH_STATE = _gauge("gpu_health_state",
                      "1 for the GPU's current health state (from temperature and memory use), 0 for the "
                      "others.", "state")
SPEED_MULTIPLIER = _gauge("gpu_speed_multiplier",
                          "Speed multiplier of the health state: 1.0 optimal, 0.8 normal, 0.5 throttled, "
                          "0.0 critical.")
AVAILABILITY_SCORE = _gauge("gpu_availability_score",
                            "0.6 * free memory / total memory + 0.4 * (1 - utilization), 0..1: how much room "
                            "the GPU has for more work.")

# GPM profiling (Hopper and newer): DCGM's DCGM_FI_PROF_* fields, from two GPM samples one background pass
# apart.
GPM_SUPPORTED = _gauge("gpu_exporter_gpm_supported",
                       "1 if the GPU and driver give GPM profiling metrics (Hopper and newer), else 0.")
SM_ACTIVE = _gauge("gpu_sm_active_ratio",
                   "Fraction of time at least one warp was resident on an SM, averaged over the SMs (0..1).")
SM_OCCUPANCY = _gauge("gpu_sm_occupancy_ratio",
                      "Resident warps as a fraction of the SMs' maximum, averaged over time and SMs (0..1).")
TENSOR_ACTIVE = _gauge("gpu_tensor_active_ratio",
                       "Fraction of time the SMs' tensor pipes (any of them) were active (0..1).")
PIPE_ACTIVE = _gauge("gpu_pipe_active_ratio",
                     "Fraction of time one SM pipe was active, by pipe: the tensor pipes (hmma, imma, dmma, "
                     "dfma) and the non-tensor fp16, fp32, fp64 and int pipes (0..1).", "pipe")
DRAM_ACTIVE = _gauge("gpu_dram_active_ratio",
                     "Device memory bandwidth used as a fraction of the maximum (0..1).")
GRAPHICS_ENGINE_ACTIVE = _gauge("gpu_graphics_engine_active_ratio",
                                "Fraction of time the graphics or compute engine was active (0..1).")
NVLINK_TX = _gauge("gpu_nvlink_tx_bytes_per_second",
                   "NVLink transmit throughput over all links, in bytes per second (GPM).")
NVLINK_RX = _gauge("gpu_nvlink_rx_bytes_per_second",
                   "NVLink receive throughput over all links, in bytes per second (GPM).")
NVDEC_UTILIZATION = _gauge("gpu_nvdec_utilization_ratio",
                           "Video decoder (NVDEC) utilization, the mean over the GPU's decoders (0..1, GPM).")
NVJPG_UTILIZATION = _gauge("gpu_nvjpg_utilization_ratio",
                           "JPEG decoder (NVJPG) utilization, the mean over the GPU's decoders (0..1, GPM).")

# Memory and link health.
REMAPPED_ROWS = _gauge("gpu_remapped_rows",
                       "Memory rows remapped since the GPU was manufactured, by the cause of the error.",
                       "cause")
ROW_REMAP_PENDING = _gauge("gpu_row_remap_pending",
                           "1 if a row remap waits for a GPU reset to take effect, else 0.")
ROW_REMAP_FAILED = _gauge("gpu_row_remap_failed",
                          "1 if a row remap failed (no spare row left: the GPU needs service), else 0.")
RETIRED_PAGES = _gauge("gpu_retired_pages",
                       "Memory pages retired (pre-Ampere page retirement), by cause.", "cause")
MEMORY_TEMPERATURE = _gauge("gpu_memory_temperature_celsius",
                            "Device memory (HBM) temperature, in degrees Celsius.")
NVLINK_UP = _gauge("gpu_nvlink_up", "1 if the NVLink link is active, else 0.", "link")
NVLINK_ERRORS = _counter("gpu_nvlink_errors",
                         "NVLink data-link errors of all the GPU's links since the driver was loaded, by "
                         "type (gpu_nvlink_up says which link is down).", "type")
POWER_VIOLATION = _counter("gpu_power_violation_seconds",
                           "Time the power limit held the clocks down, in seconds (NVML violation time).")
THERMAL_VIOLATION = _counter("gpu_thermal_violation_seconds",
                             "Time heat held the clocks down, in seconds (NVML violation time).")
PCIE_REPLAYS = _counter("gpu_pcie_replays",
                        "PCIe replays (link retransmissions) since the driver was loaded.")
NVLINK_BYTES = _counter("gpu_nvlink_bytes",
                        "NVLink traffic of all the GPU's links since the driver was loaded, header and "
                        "payload, in bytes, by direction (tx, rx).", "direction")
NVLINK_DATA_BYTES = _counter("gpu_nvlink_data_bytes",
                             "NVLink payload of all the GPU's links since the driver was loaded, without "
                             "protocol headers, in bytes, by direction (tx, rx).", "direction")
VGPU_LICENSED = _gauge("gpu_vgpu_license_status",
                       "1 if the vGPU's license is held, 0 if not; absent on a GPU that is not a vGPU.")

# MIG instances: one series per MIG device (GPU instance and its compute instance), pod labels = its holder.
MIG_LABELS: tuple[str, ...] = ("gpu_instance_id", "compute_instance_id", "mig_profile")
MIG_MEMORY_USED = _gauge("gpu_mig_memory_used_bytes", "Memory in use on one MIG device, in bytes.",
                         *MIG_LABELS)
MIG_MEMORY_FREE = _gauge("gpu_mig_memory_free_bytes", "Memory free on one MIG device, in bytes.",
                         *MIG_LABELS)
MIG_MEMORY_TOTAL = _gauge("gpu_mig_memory_total_bytes", "Total memory of one MIG device, in bytes.",
                          *MIG_LABELS)
MIG_SM_ACTIVE = _gauge("gpu_mig_sm_active_ratio", "gpu_sm_active_ratio of one MIG GPU instance (0..1).",
                       *MIG_LABELS)
MIG_SM_OCCUPANCY = _gauge("gpu_mig_sm_occupancy_ratio",
                          "gpu_sm_occupancy_ratio of one MIG GPU instance (0..1).", *MIG_LABELS)
MIG_TENSOR_ACTIVE = _gauge("gpu_mig_tensor_active_ratio",
                           "gpu_tensor_active_ratio of one MIG GPU instance (0..1).", *MIG_LABELS)
MIG_PIPE_ACTIVE = _gauge("gpu_mig_pipe_active_ratio", "gpu_pipe_active_ratio of one MIG GPU instance (0..1).",
                         *MIG_LABELS, "pipe")
MIG_DRAM_ACTIVE = _gauge("gpu_mig_dram_active_ratio", "gpu_dram_active_ratio of one MIG GPU instance (0..1).",
                         *MIG_LABELS)
MIG_GRAPHICS_ENGINE_ACTIVE = _gauge("gpu_mig_graphics_engine_active_ratio",
                                    "gpu_graphics_engine_active_ratio of one MIG GPU instance (0..1).",
                                    *MIG_LABELS)
MIG_NVDEC_UTILIZATION = _gauge("gpu_mig_nvdec_utilization_ratio",
                               "gpu_nvdec_utilization_ratio of one MIG GPU instance (0..1).", *MIG_LABELS)
MIG_NVJPG_UTILIZATION = _gauge("gpu_mig_nvjpg_utilization_ratio",
                               "gpu_nvjpg_utilization_ratio of one MIG GPU instance (0..1).", *MIG_LABELS)

NVML_UP = MetricSpec("gpu_exporter_nvml_up", "gauge",
                     "1 if the NVML library is loaded and answering, else 0 (no library, no driver).",
                     per_gpu=False)
SCRAPE_DURATION = MetricSpec("gpu_exporter_scrape_duration_seconds", "gauge",
                             "Time the last NVML collection sweep took, in seconds.", per_gpu=False)
LAST_COLLECT = MetricSpec("gpu_exporter_last_collect_timestamp_seconds", "gauge",
                          "Unix time when NVML last answered a sweep: the staleness signal.", per_gpu=False)
GPUS = MetricSpec("gpu_exporter_gpus", "gauge", "Number of GPUs NVML reports on this node.", per_gpu=False)
NVML_ERRORS = MetricSpec("gpu_exporter_nvml_errors", "counter",
                         "NVML calls that failed with an error costing only their own values (Unknown, "
                         "NoData, CorruptedInforom, ...): the GPU stays up, the call's series are left out "
                         "of that sweep or pass.", ("gpu", "call", "error"), per_gpu=False)
POD_RESOURCES_UP = MetricSpec("gpu_exporter_pod_resources_up", "gauge",
                              "1 if the last read of the kubelet pod-resources API succeeded, else 0 (the "
                              "last pod labels are kept for a grace period, then empty).", per_gpu=False)
POD_RESOURCES_ATTEMPTS = MetricSpec("gpu_exporter_pod_resources_refresh_attempts", "counter",
                                    "Reads of the kubelet pod-resources API attempted, successful or not.",
                                    per_gpu=False)

# Every family the exporter of this issue produces, in exposition order.
DEVICE_METRICS: tuple[MetricSpec, ...] = (
    GPU_INFO, GPU_UP, UTILIZATION, MEMORY_UTILIZATION, MEMORY_USED, MEMORY_FREE, MEMORY_TOTAL,
    MEMORY_RESERVED, TEMPERATURE, POWER_USAGE, POWER_LIMIT, ENERGY, SM_CLOCK, MEMORY_CLOCK, SM_CLOCK_MAX,
    MEMORY_CLOCK_MAX, FAN_SPEED, PERFORMANCE_STATE, CLOCKS_EVENT_REASON, ECC_ERRORS, PCIE_TX, PCIE_RX,
    ENCODER_UTILIZATION, DECODER_UTILIZATION, PROCESS_MEMORY,
)
EXPORTER_METRICS: tuple[MetricSpec, ...] = (NVML_UP, GPUS, SCRAPE_DURATION, LAST_COLLECT, NVML_ERRORS)
# Families the collector's extensions produce: pod attribution (exporter/pods/attribution.py), health and
# XID errors (exporter/health/state_families.py, exporter/health/xid.py).
EXTENSION_METRICS: tuple[MetricSpec, ...] = (
    ALLOCATION_INFO, POD_UTILIZATION, POD_SM_UTILIZATION, POD_MEMORY_BANDWIDTH, POD_MEMORY_USED, XID_ERRORS,
    XID_LAST, HEALTH_STATE, SPEED_MULTIPLIER, AVAILABILITY_SCORE, POD_RESOURCES_UP, POD_RESOURCES_ATTEMPTS,
)
# Families of exporter/profiling/ (GPM, per GPU and per MIG instance) and
# exporter/health/memory_link_families.py.
PROFILING_METRICS: tuple[MetricSpec, ...] = (
    GPM_SUPPORTED, SM_ACTIVE, SM_OCCUPANCY, TENSOR_ACTIVE, PIPE_ACTIVE, DRAM_ACTIVE, GRAPHICS_ENGINE_ACTIVE,
    NVLINK_TX, NVLINK_RX, NVDEC_UTILIZATION, NVJPG_UTILIZATION,
)
MIG_METRICS: tuple[MetricSpec, ...] = (
    MIG_MEMORY_USED, MIG_MEMORY_FREE, MIG_MEMORY_TOTAL, MIG_SM_ACTIVE, MIG_SM_OCCUPANCY, MIG_TENSOR_ACTIVE,
    MIG_PIPE_ACTIVE, MIG_DRAM_ACTIVE, MIG_GRAPHICS_ENGINE_ACTIVE, MIG_NVDEC_UTILIZATION,
    MIG_NVJPG_UTILIZATION,
)
RELIABILITY_METRICS: tuple[MetricSpec, ...] = (
    REMAPPED_ROWS, ROW_REMAP_PENDING, ROW_REMAP_FAILED, RETIRED_PAGES, MEMORY_TEMPERATURE, NVLINK_UP,
    NVLINK_ERRORS, POWER_VIOLATION, THERMAL_VIOLATION, PCIE_REPLAYS, NVLINK_BYTES, NVLINK_DATA_BYTES,
    VGPU_LICENSED,
)
ALL_METRICS: tuple[MetricSpec, ...] = (DEVICE_METRICS + EXPORTER_METRICS + EXTENSION_METRICS
                                       + PROFILING_METRICS + MIG_METRICS + RELIABILITY_METRICS)
