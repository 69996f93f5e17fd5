"""GpuCollector: snapshot to families, labels, left-out fields, attribution and extensions."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric

from exporter import metric_table as m
from exporter.collector import GpuCollector
from exporter.nvml.snapshots import DeviceSnapshot, NodeSnapshot, ProcessSnapshot
from exporter.scrape.context import ScrapeContext
from exporter.scrape.holders import PodRef
from tests.scrape import Samples, collect

T0 = 1_700_000_000.0


def device(index: int, **fields: object) -> DeviceSnapshot:
    values: dict[str, object] = {
        "index": index, "uuid": f"GPU-{index}", "name": "NVIDIA H100 80GB HBM3", "pci_bus_id": f"0:{index}",
        "up": True, "utilization": 0.5, "memory_used_bytes": 10, "memory_free_bytes": 90,
        "memory_total_bytes": 100, "energy_joules": 1234.5, "ecc_corrected": 2, "ecc_uncorrected": 0,
        "clocks_event_reasons": (("gpu_idle", False), ("sw_power_cap", True)),
        "processes": (ProcessSnapshot(41, 7), ProcessSnapshot(42, None)),
    }
    values.update(fields)
    return DeviceSnapshot(**values)  # type: ignore[arg-type]


def node(*devices: DeviceSnapshot, nvml_up: bool = True, last_success: float | None = T0) -> NodeSnapshot:
    return NodeSnapshot(nvml_up=nvml_up, driver_version="550.54.15", cuda_version="12.4", devices=devices,
                        collected_at=T0, duration_seconds=0.004, last_success=last_success)


class FixedSource:
    def __init__(self, snapshot: NodeSnapshot) -> None:
        self.snapshot_value = snapshot
        self.calls = 0

    def snapshot(self) -> NodeSnapshot:
        self.calls += 1
        return self.snapshot_value


class FakeAttribution:
    def __init__(self, holders: Mapping[str, Sequence[PodRef]], pids: Mapping[int, PodRef]) -> None:
        self._holders, self._pids = holders, pids

    def holders(self) -> Mapping[str, Sequence[PodRef]]:
        return self._holders

    def pod_of_pid(self, pid: int) -> PodRef | None:
        return self._pids.get(pid)


def scrape(collector: GpuCollector) -> Samples:
    return collect(collector)


def test_every_per_gpu_series_carries_the_gpu_labels() -> None:
    samples = scrape(GpuCollector(FixedSource(node(device(0), device(1))), "node-a"))
    per_gpu = {spec.exposed_name for spec in m.DEVICE_METRICS}
    for name, series in samples.items():
        if name in per_gpu:
            for labels, _ in series:
                assert set(m.GPU_LABELS) <= set(labels), name
                assert labels["node"] == "node-a" and labels["pod"] == "" and labels["namespace"] == ""
    assert {labels["gpu"] for labels, _ in samples["gpu_up"]} == {"0", "1"}


def test_values_types_and_label_values() -> None:
    samples = scrape(GpuCollector(FixedSource(node(device(0))), "node-a"))
    assert samples["gpu_utilization_ratio"][0][1] == 0.5
    assert samples["gpu_energy_consumption_joules_total"][0][1] == 1234.5
    info_labels = samples["gpu_info"][0][0]
    assert (info_labels["driver_version"], info_labels["cuda_version"], info_labels["pci_bus_id"]) == (
        "550.54.15", "12.4", "0:0")
    reasons = {labels["reason"]: value for labels, value in samples["gpu_clocks_event_reason_active"]}
    assert reasons == {"gpu_idle": 0.0, "sw_power_cap": 1.0}
    ecc = {labels["type"]: value for labels, value in samples["gpu_ecc_errors_total"]}
    assert ecc == {"corrected": 2.0, "uncorrected": 0.0}
    processes = samples["gpu_process_memory_used_bytes"]
    assert [(labels["pid"], value) for labels, value in processes] == [("41", 7.0)]
    assert samples["gpu_exporter_nvml_up"] == [({}, 1.0)]
    assert samples["gpu_exporter_gpus"] == [({}, 1.0)]
    assert samples["gpu_exporter_last_collect_timestamp_seconds"] == [({}, T0)]
    assert samples["gpu_exporter_scrape_duration_seconds"] == [({}, 0.004)]


def test_a_pid_listed_twice_is_one_series_with_its_memory_summed() -> None:
    """Real NVML lists a process once per MIG instance it uses: one series per (GPU, pid), never two."""
    listed = (ProcessSnapshot(41, 7), ProcessSnapshot(43, 5), ProcessSnapshot(41, 3),
              ProcessSnapshot(43, None), ProcessSnapshot(44, None))
    samples = scrape(GpuCollector(FixedSource(node(device(0, processes=listed), device(1))), "n"))
    series = [(labels["gpu"], labels["pid"], value)
              for labels, value in samples["gpu_process_memory_used_bytes"]]
    assert series == [("0", "41", 10.0), ("0", "43", 5.0), ("1", "41", 7.0)]


def test_unsupported_fields_are_left_out_not_zero() -> None:
    samples = scrape(GpuCollector(FixedSource(node(device(0, temperature_celsius=None, fan_speed_ratio=None,
                                                             clocks_event_reasons=None, processes=None),
                                                      device(1, temperature_celsius=61.0))), "n"))
    assert [labels["gpu"] for labels, _ in samples["gpu_temperature_celsius"]] == ["1"]
    assert "gpu_fan_speed_ratio" not in samples
    assert {labels["gpu"] for labels, _ in samples["gpu_clocks_event_reason_active"]} == {"1"}


def test_down_gpu_keeps_info_and_up_zero_only() -> None:
    down = DeviceSnapshot(index=1, uuid="GPU-1", name="NVIDIA H100 80GB HBM3", pci_bus_id="0:1", up=False,
                          error="GPU is lost")
    samples = scrape(GpuCollector(FixedSource(node(device(0), down)), "n"))
    assert {labels["gpu"]: value for labels, value in samples["gpu_up"]} == {"0": 1.0, "1": 0.0}
    assert {labels["gpu"] for labels, _ in samples["gpu_info"]} == {"0", "1"}
    assert [labels["gpu"] for labels, _ in samples["gpu_utilization_ratio"]] == ["0"]


def test_nvml_down_still_serves_the_signal() -> None:
    samples = scrape(GpuCollector(FixedSource(node(nvml_up=False, last_success=None)), "n"))
    assert samples["gpu_exporter_nvml_up"] == [({}, 0.0)]
    assert "gpu_up" not in samples and "gpu_exporter_last_collect_timestamp_seconds" not in samples


def test_attribution_fills_pod_labels_only_for_a_single_holder() -> None:
    web = PodRef("prod", "web-0", "server")
    holders = {"GPU-0": [web], "GPU-1": [PodRef("a", "p1", "c"), PodRef("b", "p2", "c")]}
    attribution = FakeAttribution(holders, {41: PodRef("prod", "web-0", "server")})
    samples = scrape(GpuCollector(FixedSource(node(device(0), device(1), device(2))), "n", attribution))
    pods = {labels["gpu"]: (labels["namespace"], labels["pod"], labels["container"])
            for labels, _ in samples["gpu_utilization_ratio"]}
    assert pods == {"0": ("prod", "web-0", "server"), "1": ("", "", ""), "2": ("", "", "")}
    process_pods = {(labels["gpu"], labels["pod"]) for labels, _ in samples["gpu_process_memory_used_bytes"]}
    assert process_pods == {("0", "web-0"), ("1", "web-0"), ("2", "web-0")}


def test_extensions_get_the_same_snapshot_and_labels() -> None:
    seen: list[NodeSnapshot] = []

    class Extension:
        def collect(self, snapshot: NodeSnapshot, context: ScrapeContext) -> Iterable[Metric]:
            seen.append(snapshot)
            family = GaugeMetricFamily("gpu_test_extension", "Test.", labels=m.GPU_LABELS)
            for d in snapshot.devices:
                family.add_metric(context.device_labels(d), 1.0)
            yield family

    source = FixedSource(node(device(0)))
    samples = scrape(GpuCollector(source, "n", extensions=[Extension()]))
    assert samples["gpu_test_extension"][0][0]["uuid"] == "GPU-0"
    assert seen == [source.snapshot_value] and source.calls == 1


def test_registration_does_not_sweep() -> None:
    source = FixedSource(node(device(0)))
    CollectorRegistry().register(GpuCollector(source, "n"))
    assert source.calls == 0


def test_node_name_is_required() -> None:
    with pytest.raises(ValueError, match="node_name"):
        GpuCollector(FixedSource(node()), "")


def test_metric_names_are_unique_and_follow_conventions() -> None:
    names = [spec.exposed_name for spec in m.ALL_METRICS]
    assert len(names) == len(set(names))
    for spec in m.ALL_METRICS:
        assert spec.exposed_name.endswith("_total") == (spec.kind == "counter")
        assert spec.help.endswith(".") and spec.name.startswith("gpu_")
