"""Memory and link health reads of the adapter: row remapping and memory temperature (cheap, on every sweep),
NVLink state, error and traffic counters, retired pages, clock violation time and the vGPU license (many
calls on an NVLink board: sampled in the background).

Every call goes through the NVML module object (pynvml or SimulatedNvml); NotSupported / NoPermission leave
the value out (logged once per GPU and call), as everywhere in the adapter, and any other error of one call
(Unknown, NoData, ...) costs that call's value for this pass only (NvmlCalls.field_error), never the rest of
the pass.
"""

from __future__ import annotations

import threading
from typing import Any

from exporter.nvml.calls import NvmlCalls
from exporter.nvml.snapshots import NvLinkSnapshot, Reliability, RowRemap

# `type` label value -> NVML counter constant (NVML_NVLINK_ERROR_DL_*)
NVLINK_ERROR_COUNTERS: tuple[tuple[str, str], ...] = (
    ("crc_flit", "NVML_NVLINK_ERROR_DL_CRC_FLIT"),
    ("crc_data", "NVML_NVLINK_ERROR_DL_CRC_DATA"),
    ("replay", "NVML_NVLINK_ERROR_DL_REPLAY"),
    ("recovery", "NVML_NVLINK_ERROR_DL_RECOVERY"),
)
NS_PER_SECOND = 1e9  # nvmlViolationTime_t.violationTime is in nanoseconds


def row_remap(calls: NvmlCalls, index: int, handle: Any) -> RowRemap | None:
    answer = calls.field(index, "nvmlDeviceGetRemappedRows", handle)
    if answer is None:
        return None
    correctable, uncorrectable, pending, failed = (int(v) for v in answer)
    return RowRemap(correctable, uncorrectable, bool(pending), bool(failed))


def memory_temperature(calls: NvmlCalls, index: int, handle: Any) -> float | None:
    """NVML_FI_DEV_MEMORY_TEMP (HBM boards); the field's own nvmlReturn says whether it is supported."""
    nvml = calls.nvml
    field = getattr(nvml, "NVML_FI_DEV_MEMORY_TEMP", None)
    if field is None:
        return None
    values = calls.field(index, "nvmlDeviceGetFieldValues", handle, [field])
    if not values:
        return None
    value = values[0]
    if value.nvmlReturn != getattr(nvml, "NVML_SUCCESS", 0):
        calls.note_unsupported(index, "nvmlDeviceGetFieldValues(NVML_FI_DEV_MEMORY_TEMP)",
                               nvml.NVMLError_NotSupported())
        return None
    return field_value(nvml, value)


def vgpu_licensed(calls: NvmlCalls, index: int, handle: Any) -> bool | None:
    """Whether the vGPU's license is held (a licensable feature in the licensed state); None on a GPU that is
    not a vGPU (isGridLicenseSupported 0) or a driver without the call."""
    features = calls.field(index, "nvmlDeviceGetGridLicensableFeatures", handle)
    if features is None or not int(features.isGridLicenseSupported):
        return None
    count = min(int(features.licensableFeaturesCount), len(features.gridLicensableFeatures))
    return any(int(features.gridLicensableFeatures[i].featureState) == 1 for i in range(count))


def field_value(nvml: Any, value: Any) -> float:
    """A c_nvmlFieldValue_t's value as a float, read through the union member its valueType names."""
    member = {
        getattr(nvml, "NVML_VALUE_TYPE_DOUBLE", 0): "dVal",
        getattr(nvml, "NVML_VALUE_TYPE_UNSIGNED_INT", 1): "uiVal",
        getattr(nvml, "NVML_VALUE_TYPE_UNSIGNED_LONG", 2): "ulVal",
        getattr(nvml, "NVML_VALUE_TYPE_UNSIGNED_LONG_LONG", 3): "ullVal",
        getattr(nvml, "NVML_VALUE_TYPE_SIGNED_LONG_LONG", 4): "sllVal",
        getattr(nvml, "NVML_VALUE_TYPE_SIGNED_INT", 5): "siVal",
        getattr(nvml, "NVML_VALUE_TYPE_UNSIGNED_SHORT", 6): "usVal",
    }.get(int(value.valueType), "uiVal")
    return float(getattr(value.value, member))


class ReliabilityReader:
    """The background health reads; remembers per GPU which NVLink links exist (asked once per session)."""

    def __init__(self, calls: NvmlCalls) -> None:
        self._calls = calls
        self._lock = threading.Lock()
        self._links: dict[int, tuple[int, ...]] = {}

    def reset(self) -> None:
        with self._lock:
            self._links.clear()

    def read(self, index: int, handle: Any) -> Reliability:
        calls, nvml = self._calls, self._calls.nvml
        single = calls.field(index, "nvmlDeviceGetRetiredPages", handle,
                                nvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS)
        double = calls.field(index, "nvmlDeviceGetRetiredPages", handle,
                                nvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)
        power = calls.field(index, "nvmlDeviceGetViolationStatus", handle, nvml.NVML_PERF_POLICY_POWER)
        thermal = calls.field(index, "nvmlDeviceGetViolationStatus", handle, nvml.NVML_PERF_POLICY_THERMAL)
        licensed = vgpu_licensed(calls, index, handle)
        links = self._known_links(index, handle)
        tx, rx, data_tx, data_rx = self._nvlink_bytes(index, handle, links)
        return Reliability(
            nvlinks=self._nvlinks(index, handle), nvlink_tx_bytes=tx, nvlink_rx_bytes=rx,
            nvlink_data_tx_bytes=data_tx, nvlink_data_rx_bytes=data_rx,
            vgpu_licensed=licensed,
            retired_pages_single_bit=None if single is None else len(single),
            retired_pages_double_bit=None if double is None else len(double),
            power_violation_seconds=None if power is None else int(power.violationTime) / NS_PER_SECOND,
            thermal_violation_seconds=None if thermal is None else int(thermal.violationTime) / NS_PER_SECOND)

    def _nvlinks(self, index: int, handle: Any) -> tuple[NvLinkSnapshot, ...] | None:
        links = self._known_links(index, handle)
        if not links:
            return None
        nvml = self._calls.nvml
        counters = [(label, getattr(nvml, name)) for label, name in NVLINK_ERROR_COUNTERS
                    if hasattr(nvml, name)]
        found = []
        for link in links:
            state = self._calls.field(index, "nvmlDeviceGetNvLinkState", handle, link)
            if state is None:
                continue
            errors = []
            for label, counter in counters:
                count = self._calls.field(index, "nvmlDeviceGetNvLinkErrorCounter", handle, link, counter)
                if count is not None:
                    errors.append((label, int(count)))
            found.append(NvLinkSnapshot(link, int(state) == int(getattr(nvml, "NVML_FEATURE_ENABLED", 1)),
                                        tuple(errors)))
        return tuple(found) or None

    def _nvlink_bytes(self, index: int, handle: Any,
                      links: tuple[int, ...]) -> tuple[int | None, int | None, int | None, int | None]:
        """NVLink traffic of all links since the driver loaded, in bytes: TX and RX with header and payload,
        then TX and RX payload alone, from NVML's NVML_FI_DEV_NVLINK_THROUGHPUT_{RAW,DATA}_{TX,RX} field
        values (KiB, one per link), in one call. None where no link answers the field (an older driver, no
        NVLink)."""
        nvml = self._calls.nvml
        names = ("RAW_TX", "RAW_RX", "DATA_TX", "DATA_RX")
        ids = [getattr(nvml, f"NVML_FI_DEV_NVLINK_THROUGHPUT_{name}", None) for name in names]
        if not links or any(field is None for field in ids):
            return None, None, None, None
        fields = tuple(int(field) for field in ids if field is not None)
        request = [(field, link) for field in fields for link in links]
        values = self._calls.field(index, "nvmlDeviceGetFieldValues", handle, request)
        success = getattr(nvml, "NVML_SUCCESS", 0)
        totals: dict[int, int] = {}
        for value in values or ():
            if value.nvmlReturn == success:
                kib = field_value(nvml, value)
                if kib >= 0:
                    totals[int(value.fieldId)] = totals.get(int(value.fieldId), 0) + int(kib) * 1024
        raw_tx, raw_rx, data_tx, data_rx = (totals.get(field) for field in fields)
        return raw_tx, raw_rx, data_tx, data_rx

    def _known_links(self, index: int, handle: Any) -> tuple[int, ...]:
        """The links this GPU answers for (a link NVML refuses, or one past the board's count, is not one)."""
        with self._lock:
            known = self._links.get(index)
        if known is not None:
            return known
        nvml = self._calls.nvml
        refused = (*self._calls.left_out, nvml.NVMLError_InvalidArgument)
        links, failed = [], False
        for link in range(int(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18))):
            try:
                nvml.nvmlDeviceGetNvLinkState(handle, link)
            except refused:
                continue
            except nvml.NVMLError as exc:  # this link is unknown this pass: ask again on the next
                if not self._calls.field_error(index, "nvmlDeviceGetNvLinkState", exc):
                    raise
                failed = True
                continue
            links.append(link)
        if failed:
            return tuple(links)
        if not links:
            self._calls.note_unsupported(index, "nvmlDeviceGetNvLinkState", nvml.NVMLError_NotSupported())
        with self._lock:
            self._links[index] = tuple(links)
        return tuple(links)
