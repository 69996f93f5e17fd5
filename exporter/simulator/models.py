"""The simulated GPU models: what each board reports to NVML, and what it does not support.

What a model lacks is what real NVML refuses on that board with NVMLError_NotSupported, so the exporter's
"left out, never 0" paths run in the demo and the tests: GPM (GPU performance monitoring, Hopper and newer),
NVLink, MIG, HBM memory temperature, row remapping (Ampere and newer datacenter boards) and page retirement
(pre-Ampere: row remapping replaced it, NVML reports no retired pages on A100/H100).
"""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1024**2
GB_IN_MIB = 1e9 / MIB  # NVLink bandwidth is quoted in GB/s, GPM reports MiB/s
MAX_MIG_SLICES = 7  # compute slices of a MIG-capable GPU (A100, H100)


@dataclass(frozen=True)
class MigProfile:
    """A MIG GPU-instance profile: `name` as nvidia-smi and the device plugin spell it (`1g.10gb`)."""

    name: str
    slices: int  # compute slices (the `1g` of `1g.10gb`)
    memory_eighths: int  # memory slices out of 8
    first_gpu_instance_id: int  # NVML's GPU instance ids for this profile start here (placement order)
    nvml_profile: int  # NVML_GPU_INSTANCE_PROFILE_*: the index nvmlDeviceGetGpuInstanceProfileInfo takes
    # the profile's id (nvidia-smi's "ID"): what nvmlGpuInstanceGetInfo().profileId says and what
    # nvmlDeviceGetGpuInstanceProfileInfoById takes; a different number from nvml_profile, as on the board
    profile_id: int


# The A100 80GB and H100 80GB profiles (same names on both boards; ids as `nvidia-smi mig -lgip` lists them).
MIG_PROFILES_80GB: tuple[MigProfile, ...] = (
    MigProfile("1g.10gb", 1, 1, 7, 0x0, 19),
    MigProfile("1g.20gb", 1, 2, 7, 0x9, 15),
    MigProfile("2g.20gb", 2, 2, 3, 0x1, 14),
    MigProfile("3g.40gb", 3, 4, 1, 0x2, 9),
    MigProfile("4g.40gb", 4, 4, 1, 0x3, 5),
    MigProfile("7g.80gb", 7, 8, 0, 0x4, 0),
)


@dataclass(frozen=True)
class MigLayout:
    """A GPU's MIG layout: `gpu_instances` GPU instances of one profile, each split into `compute_instances`
    compute instances sharing its memory; every compute instance is one MIG device (its own `MIG-` UUID).
    0 GPU instances is MIG mode on with no instance yet (what a GPU looks like before NVIDIA's DRA driver
    creates one for a claim)."""

    profile: MigProfile
    gpu_instances: int
    compute_instances: int = 1

    @property
    def devices(self) -> int:
        return self.gpu_instances * self.compute_instances

    def fits(self) -> str | None:
        """Why this layout cannot be made on one GPU; None when it can."""
        name, slices = self.profile.name, self.profile.slices
        fits = min(MAX_MIG_SLICES // slices, 8 // self.profile.memory_eighths)
        if not 0 <= self.gpu_instances <= fits:
            return f"expected 1..{fits} {name} GPU instances on one GPU (got {self.gpu_instances})"
        if not 1 <= self.compute_instances <= slices:
            computes = self.compute_instances
            return f"expected 1..{slices} compute instances in a {name} GPU instance (got {computes})"
        return None


@dataclass(frozen=True)
class MigInstance:
    """One GPU instance on a simulated GPU now: where it sits, its compute instances' MIG device UUIDs, and
    the serial its handles carry (a handle answers while an instance with its serial exists)."""

    profile: MigProfile
    gpu_instance_id: int
    placement_start: int
    uuids: tuple[str, ...]  # one MIG device per compute instance
    serial: int


@dataclass(frozen=True)
class Thermal:
    """How a board heats and what it answers to nvmlDeviceGetTemperatureThreshold (°C; None: NotSupported).

    It settles at `ambient_celsius + celsius_per_watt * watts` with the time constant `tau_seconds`.
    `celsius_per_watt` None is the simulator's generic board: 0.075 °C/W scaled up for small boards. Past
    `gpu_max_celsius` the driver slows the clocks (sw_thermal), past `slowdown_celsius` the hardware too."""

    ambient_celsius: float = 28.0
    celsius_per_watt: float | None = None
    tau_seconds: float = 30.0
    shutdown_celsius: float | None = 95.0
    slowdown_celsius: float | None = 90.0
    gpu_max_celsius: float | None = 87.0


# The H100 80GB HBM3 as measured (driver 580.159.04): 41 °C idle at 74 W, 68 °C 50 s into 697 W; with the
# simulator's 30 s time constant those fit 37.05 °C + 0.05343 °C/W (it would settle near 74 °C at 697 W:
# the time constant is the simulator's, not measured). NVML answered shutdown 95, slowdown 89, GPU max 87.
H100_THERMAL = Thermal(ambient_celsius=37.05, celsius_per_watt=0.05343, shutdown_celsius=95.0,
                       slowdown_celsius=89.0, gpu_max_celsius=87.0)
# The other boards keep the simulator's generic heating and thermal points (not measured); the V100 answers
# no GPU max operating temperature, so a board with part of the thresholds is simulated too.
GENERIC_THERMAL = Thermal()
V100_THERMAL = Thermal(gpu_max_celsius=None)


@dataclass(frozen=True)
class GpuModel:
    """Static facts of a simulated GPU model (what NVML reports on the real board)."""

    key: str
    name: str
    memory_bytes: int
    power_limit_watts: float
    idle_power_watts: float
    sm_clock_max_mhz: int
    memory_clock_max_mhz: int
    has_fan: bool
    pcie_max_kb_per_second: int
    gpm: bool = False  # nvmlGpmQueryDeviceSupport says isSupportedDevice=1 (Hopper and newer)
    nvlinks: int = 0  # NVLink links; 0 = nvmlDeviceGetNvLinkState is NotSupported
    nvlink_mib_per_second: float = 0.0  # per direction, all links together, at full load
    mig_profiles: tuple[MigProfile, ...] = ()  # () = not MIG-capable
    hbm: bool = False  # NVML_FI_DEV_MEMORY_TEMP answers (HBM boards)
    row_remapping: bool = False  # nvmlDeviceGetRemappedRows answers (Ampere and newer datacenter boards)
    page_retirement: bool = False  # nvmlDeviceGetRetiredPages answers (pre-Ampere)
    nvdec_engines: int = 0
    nvjpg_engines: int = 0
    mig_sms_per_slice: int = 0  # multiprocessors of one MIG compute slice (what a MIG device reports)
    thermal: Thermal = GENERIC_THERMAL

    @property
    def mig_capable(self) -> bool:
        return bool(self.mig_profiles)

    def mig_profile(self, name: str) -> MigProfile | None:
        return next((p for p in self.mig_profiles if p.name == name), None)


MODELS: dict[str, GpuModel] = {m.key: m for m in (
    GpuModel("H100", "NVIDIA H100 80GB HBM3", 81559 * MIB, 700.0, 74.0, 1980, 2619, False, 64_000_000,
             gpm=True, nvlinks=18, nvlink_mib_per_second=450 * GB_IN_MIB,
             mig_profiles=MIG_PROFILES_80GB, hbm=True, row_remapping=True, nvdec_engines=7,
             nvjpg_engines=7, mig_sms_per_slice=16, thermal=H100_THERMAL),
    GpuModel("A100", "NVIDIA A100-SXM4-80GB", 81920 * MIB, 400.0, 55.0, 1410, 1593, False, 32_000_000,
             nvlinks=12, nvlink_mib_per_second=300 * GB_IN_MIB, mig_profiles=MIG_PROFILES_80GB, hbm=True,
             row_remapping=True, nvdec_engines=5, nvjpg_engines=1, mig_sms_per_slice=14),
    GpuModel("L4", "NVIDIA L4", 23034 * MIB, 72.0, 16.0, 2040, 6251, False, 32_000_000, row_remapping=True,
             nvdec_engines=4, nvjpg_engines=4),
    GpuModel("A10", "NVIDIA A10", 23028 * MIB, 150.0, 20.0, 1695, 6251, False, 32_000_000, row_remapping=True,
             nvdec_engines=2, nvjpg_engines=1),
    GpuModel("RTX-A6000", "NVIDIA RTX A6000", 49140 * MIB, 300.0, 25.0, 2100, 8001, True, 32_000_000,
             nvdec_engines=2, nvjpg_engines=0),
    GpuModel("V100", "Tesla V100-SXM2-32GB", 32768 * MIB, 300.0, 40.0, 1530, 877, False, 16_000_000,
             nvlinks=6, nvlink_mib_per_second=150 * GB_IN_MIB, hbm=True, page_retirement=True,
             nvdec_engines=1, nvjpg_engines=0, thermal=V100_THERMAL),
)}
