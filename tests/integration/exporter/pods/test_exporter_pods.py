"""The wired exporter (ExporterApp over the simulated NVML) with a REAL gRPC pod-resources server on a temp
unix socket and a fake /proc: labels, per-holder series, promtool, the socket vanishing, XIDs, JSON API."""

from __future__ import annotations

import json
import logging
import os
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from demo.processes import promtool
from exporter.app import ExporterApp
from exporter.config import ExporterConfig, PodResourcesConfig, XidConfig
from exporter.health.history import HistorySettings
from exporter.simulator.config_file import parse_sim_config
from exporter.simulator.nvml import SimulatedNvml
from exporter.source import SourceSettings
from tests.kubelet import GPU, MIG_RESOURCE, NODE_YAML, Claim, KubeletServer, node_pods, node_uuids
from tests.scrape import Samples, samples
from tests.support import wait_for

pytestmark = pytest.mark.integration

FAST = SourceSettings(min_interval=0.0, init_retry_interval=0.05, pcie_interval=0.05)


def http(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def by_gpu(samples: Samples, name: str) -> dict[str, list[dict[str, str]]]:
    found: dict[str, list[dict[str, str]]] = {}
    for labels, _ in samples.get(name, []):
        found.setdefault(labels["gpu"], []).append(labels)
    return found


def value(samples: Samples, name: str, **match: str) -> float:
    values = [v for labels, v in samples.get(name, []) if all(labels.get(k) == x for k, x in match.items())]
    assert len(values) == 1, (name, match, values)
    return values[0]


class Node:
    """One running ExporterApp; `scrape()` parses /metrics over real HTTP."""

    def __init__(self, app: ExporterApp, base: str, nvml: SimulatedNvml) -> None:
        self.app, self.base, self.nvml = app, base, nvml

    def text(self) -> str:
        status, body = http(self.base + "/metrics")
        assert status == 200
        return body.decode()

    def scrape(self) -> Samples:
        return samples(self.text())


@pytest.fixture
def start_node(proc_root: str) -> Iterator[Callable[..., Node]]:
    apps: list[ExporterApp] = []

    def start(socket_path: str, yaml_text: str = NODE_YAML, config: ExporterConfig | None = None) -> Node:
        nvml = SimulatedNvml(parse_sim_config(yaml_text, "node.yaml"), pcie_latency_seconds=0.0)
        config = config or ExporterConfig(pod_resources=PodResourcesConfig(refresh_interval_seconds=0.1))
        app = ExporterApp(nvml, "node-a", FAST, config=config, pod_resources_socket=socket_path,
                          proc_root=proc_root)
        apps.append(app)
        server = app.start("127.0.0.1", 0)
        return Node(app, f"http://127.0.0.1:{server.port}", nvml)

    yield start
    for app in apps:
        app.stop()


def attributed(node: Node) -> Callable[[], bool]:
    """Ready: kubelet read, processes attributed (memory for every holder), per-process utilization sampled
    for GPUs 0 and 1 (the MIG GPU 2 has none: NVML does not support utilization on a MIG-enabled GPU)."""
    def ready() -> bool:
        samples = node.scrape()
        return (value(samples, "gpu_exporter_pod_resources_up") == 1.0
                and set(by_gpu(samples, "gpu_pod_utilization_ratio")) == {"0", "1"}
                and len(samples.get("gpu_pod_memory_used_bytes", [])) == 4)
    return ready


def test_exclusive_shared_mig_and_free_gpus_are_labelled_without_double_counting(
        kubelet: KubeletServer, start_node: Callable[..., Node]) -> None:
    kubelet.set_pods(node_pods())
    node = start_node(kubelet.socket_path)
    wait_for(attributed(node), timeout=15)
    uuids = node_uuids()
    samples = node.scrape()

    # device series: the pod only on the exclusive GPU 0
    for name in ("gpu_utilization_ratio", "gpu_memory_used_bytes", "gpu_up", "gpu_health_state"):
        for gpu, series in by_gpu(samples, name).items():
            pods = {(s["namespace"], s["pod"], s["container"]) for s in series}
            assert pods == ({("ml", "trainer-0", "main")} if gpu == "0" else {("", "", "")}), (name, gpu)

    # one allocation series per holder; shared for time-slicing and MIG
    keys = ("gpu", "namespace", "pod", "container", "resource", "shared", "uuid")
    allocation = sorted(tuple(s[k] for k in keys) for s, v in samples["gpu_allocation_info"] if v == 1.0)
    assert allocation == [
        ("0", "ml", "trainer-0", "main", "nvidia.com/gpu", "false", uuids[0]),
        ("1", "serve", "llm-a", "server", "nvidia.com/gpu", "true", uuids[1]),
        ("1", "serve", "llm-b", "server", "nvidia.com/gpu", "true", uuids[1]),
        ("2", "batch", "mig-job", "worker", MIG_RESOURCE, "true", uuids[2]),
    ]

    # per holder: exclusive = the device value; shared = the processes' shares, never more than the device
    checks = [(gpu, "gpu_pod_memory_used_bytes", "gpu_memory_used_bytes") for gpu in ("0", "1", "2")]
    checks += [(gpu, "gpu_pod_utilization_ratio", "gpu_utilization_ratio") for gpu in ("0", "1")]
    for gpu, name, device_name in checks:
        holders = [v for labels, v in samples[name] if labels["gpu"] == gpu]
        device = value(samples, device_name, gpu=gpu)
        assert holders and sum(holders) <= device + 1e-9, (name, gpu, holders, device)
    assert value(samples, "gpu_pod_utilization_ratio", gpu="0", pod="trainer-0") == \
        value(samples, "gpu_utilization_ratio", gpu="0") == 0.5
    a = value(samples, "gpu_pod_utilization_ratio", gpu="1", pod="llm-a")
    b = value(samples, "gpu_pod_utilization_ratio", gpu="1", pod="llm-b")
    assert (a, b) == pytest.approx((0.2, 0.4))  # sm_share 1:2 of 60 %, not 60 % copied to each pod
    gib = 1024**3
    assert value(samples, "gpu_pod_memory_used_bytes", gpu="1", pod="llm-a") == \
        value(samples, "gpu_process_memory_used_bytes", pid="201") == \
        pytest.approx(8 * gib * (0.85 + 0.15 * 0.6))
    assert "3" not in by_gpu(samples, "gpu_pod_utilization_ratio")  # the free GPU has no holder
    # the MIG GPU 2: NVML answers neither device nor per-process utilization in MIG mode, so there is no
    # utilization to report or to split (left out, never 0); its holder gets its own process's memory
    for name in ("gpu_utilization_ratio", "gpu_memory_utilization_ratio", "gpu_pod_utilization_ratio"):
        assert "2" not in by_gpu(samples, name), name
    mig_job = value(samples, "gpu_pod_memory_used_bytes", gpu="2", pod="mig-job")
    assert mig_job == value(samples, "gpu_process_memory_used_bytes", pid="301")
    assert mig_job < value(samples, "gpu_memory_used_bytes", gpu="2")

    # processes carry their own pod
    assert {(s["pid"], s["namespace"], s["pod"], s["container"]) for s, _ in
            samples["gpu_process_memory_used_bytes"]} == {
        ("101", "ml", "trainer-0", "main"), ("201", "serve", "llm-a", "server"),
        ("202", "serve", "llm-b", "server"), ("301", "batch", "mig-job", "worker")}

    # health and score: one state at 1 per GPU (the MIG GPU too: temperature and memory), score in 0..1 but
    # none for the MIG GPU (the score needs utilization)
    assert set(by_gpu(samples, "gpu_health_state")) == {"0", "1", "2", "3"}
    for gpu, series in by_gpu(samples, "gpu_health_state").items():
        assert sorted(s["state"] for s in series) == ["critical", "normal", "optimal", "throttled"]
        assert sum(v for s, v in samples["gpu_health_state"] if s["gpu"] == gpu) == 1.0
    assert all(0.0 <= v <= 1.0 for _, v in samples["gpu_availability_score"])
    score = {s["gpu"]: v for s, v in samples["gpu_availability_score"]}
    assert set(score) == {"0", "1", "3"} and score["3"] > score["0"]  # idle and empty beats busy

    result = promtool("check", "metrics", stdin=node.text())
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_socket_vanishing_mid_run_empties_labels_with_one_log_line(
        kubelet: KubeletServer, start_node: Callable[..., Node], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="exporter.pods.podresources.cache")
    kubelet.set_pods(node_pods())
    node = start_node(kubelet.socket_path)
    wait_for(attributed(node), timeout=15)
    kubelet.stop()  # the kubelet goes away and its socket file with it
    wait_for(lambda: value(node.scrape(), "gpu_exporter_pod_resources_up") == 0.0, timeout=15)
    calls = kubelet.lister.calls
    wait_for(lambda: len([r for r in caplog.records if r.levelno == logging.WARNING]) >= 1, timeout=15)
    attempts = node.app.pod_resources.attempts
    # 0.1 s refreshes with a 3-interval grace: the kept labels are gone well before 6 more attempts,
    # and none of those failed attempts may log again
    wait_for(lambda: node.app.pod_resources.attempts >= attempts + 6, timeout=15)
    samples = node.scrape()
    assert all(s["pod"] == "" and s["namespace"] == "" for s, _ in samples["gpu_utilization_ratio"])
    assert "gpu_allocation_info" not in samples and "gpu_pod_utilization_ratio" not in samples
    assert all(s["pod"] == "" for s, _ in samples["gpu_process_memory_used_bytes"])
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "unavailable" in warnings[0]
    # it names the socket; the why after it is gRPC's own text, which differs by release and by whether a
    # List was in flight when the server stopped (a refresh every 0.1 s), so it is not asserted
    assert kubelet.socket_path in warnings[0]
    assert "keeping the last pod labels" in warnings[0]
    expired = [r.getMessage() for r in caplog.records if "still unavailable" in r.getMessage()]
    assert len(expired) == 1
    assert kubelet.lister.calls == calls

    kubelet.start()  # back again: labels return, one INFO line
    wait_for(lambda: value(node.scrape(), "gpu_exporter_pod_resources_up") == 1.0, timeout=15)
    wait_for(lambda: value(node.scrape(), "gpu_up", gpu="0", pod="trainer-0") == 1.0, timeout=15)


XID_YAML = NODE_YAML + """
faults:
  - {type: xid, gpu: 1, at: 0.5, code: 79}
  - {type: xid, gpu: [0, 1], at: 0.5, code: 13}
"""


def test_xid_from_the_simulated_yaml_and_driver_counts_and_sets_gpu_up_zero_until_recovered(
        kubelet: KubeletServer, start_node: Callable[..., Node]) -> None:
    kubelet.set_pods(node_pods())
    config = ExporterConfig(pod_resources=PodResourcesConfig(refresh_interval_seconds=0.1),
                            xid=XidConfig(recovery_grace_seconds=1.5))
    node = start_node(kubelet.socket_path, XID_YAML, config)
    wait_for(lambda: "gpu_xid_errors_total" in node.scrape(), timeout=15)
    wait_for(lambda: len(node.scrape()["gpu_xid_errors_total"]) == 3, timeout=15)
    samples = node.scrape()
    assert value(samples, "gpu_xid_errors_total", gpu="1", xid="79") == 1.0
    assert value(samples, "gpu_xid_errors_total", gpu="1", xid="13") == 1.0
    assert value(samples, "gpu_xid_errors_total", gpu="0", xid="13") == 1.0
    # the exclusive GPU's XID series carries its pod, like every device series
    assert {s["pod"] for s, _ in samples["gpu_xid_errors_total"] if s["gpu"] == "0"} == {"trainer-0"}
    ups = {s["gpu"]: v for s, v in samples["gpu_up"]}
    assert ups["1"] == 0.0 and ups["0"] == 1.0  # 79 marks GPU 1 down, 13 does not mark GPU 0
    status, _ = http(node.base + "/readyz")
    assert status == 200  # one GPU down is not the exporter being unready
    # answers again after the grace
    wait_for(lambda: value(node.scrape(), "gpu_up", gpu="1") == 1.0, timeout=15)

    node.nvml.inject_xid(3, 48)  # the load driver: double-bit ECC on the free GPU
    wait_for(lambda: value(node.scrape(), "gpu_up", gpu="3") == 0.0, timeout=15)
    assert value(node.scrape(), "gpu_xid_errors_total", gpu="3", xid="48") == 1.0
    wait_for(lambda: value(node.scrape(), "gpu_up", gpu="3") == 1.0, timeout=15)
    result = promtool("check", "metrics", stdin=node.text())
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def get_json(url: str) -> tuple[int, Any]:
    status, body = http(url)
    return status, json.loads(body)


def test_json_status_api_over_real_http(kubelet: KubeletServer, start_node: Callable[..., Node]) -> None:
    kubelet.set_pods(node_pods())
    config = ExporterConfig(pod_resources=PodResourcesConfig(refresh_interval_seconds=0.1),
                            history=HistorySettings(max_samples=50, retention_seconds=600,
                                                    sample_interval_seconds=0.05))
    node = start_node(kubelet.socket_path, config=config)
    wait_for(attributed(node), timeout=15)
    api = node.base + "/api/v1/gpus"
    status, document = get_json(api)
    assert status == 200 and [g["index"] for g in document["gpus"]] == [0, 1, 2, 3]
    shared = document["gpus"][1]
    assert shared["shared"] is True and shared["state"] in ("optimal", "normal", "throttled", "critical")
    assert {(h["namespace"], h["pod"]) for h in shared["holders"]} == {("serve", "llm-a"), ("serve", "llm-b")}
    assert document["gpus"][3]["holders"] == [] and document["gpus"][3]["shared"] is False
    assert 0 <= shared["availability_score"] <= 1 and shared["utilization_percent"] == pytest.approx(60.0)

    status, one = get_json(api + "/2")
    assert status == 200 and one["holders"][0]["device_id"].startswith("MIG-")
    assert one["utilization_percent"] is None and one["availability_score"] is None  # MIG: NVML has none
    assert one["state"] in ("optimal", "normal", "throttled", "critical") and one["memory"]["used_bytes"] > 0
    assert one["shared"] is True  # one MIG holder: its slice is not the device (gpu_allocation_info agrees)
    assert one["holders"][0]["resource"] == MIG_RESOURCE

    status, error = get_json(api + "/9")
    assert status == 404 and error["parameter"] == "index"

    # the history sampler records every 50 ms without any scrape; the trend sees those samples
    wait_for(lambda: get_json(api + "/0/trend?minutes=1")[1]["samples"] >= 5, timeout=15)
    status, trend = get_json(api + "/0/trend?minutes=1")
    assert status == 200 and trend["utilization_percent"]["avg"] == pytest.approx(50.0)
    # seconds of samples are far less than half the minute asked for: no trend word from so little
    assert trend["utilization_percent"]["trend"] == "unknown" and trend["trend"] == "unknown"
    samples_now = len(node.app.history.samples(node_uuids()[0]))
    assert samples_now <= node.app.source.sweeps  # one history sample per sweep at most, never per scrape

    for query, fragment in (("minutes=abc", "expected a positive number"), ("minutes=-1", "positive"),
                            ("minutes=11", "at most 10")):
        status, error = get_json(api + f"/0/trend?{query}")
        assert status == 400 and error["parameter"] == "minutes" and fragment in error["error"], error
    status, body = http(node.base + "/api/v1/nothing")
    assert status == 404 and "error" in json.loads(body)


def write_driver_minors(proc_root: str, minors: dict[int, int]) -> None:
    """The driver's /proc/driver/nvidia/gpus/<bus>/information for the simulated GPUs: index -> minor."""
    for index, minor in minors.items():
        bus = f"0000:{0x18 + 0x10 * index:02x}:00.0"  # the simulated GPU's bus id, as the driver writes it
        directory = os.path.join(proc_root, "driver", "nvidia", "gpus", bus)
        os.makedirs(directory)
        with open(os.path.join(directory, "information"), "w") as f:
            f.write(f"Model: \t\t NVIDIA H100\nGPU UUID: \t ??\nBus Location: \t {bus}\n"
                    f"Device Minor: \t {minor}\nGPU Excluded:\t No\n")


def test_gke_device_ids_map_by_device_minor_and_an_unknown_id_is_logged_once(
        kubelet: KubeletServer, start_node: Callable[..., Node], proc_root: str,
        caplog: pytest.LogCaptureFixture) -> None:
    """GKE's device plugin names GPUs `nvidia<minor>` (`/vgpu<n>` for time-sharing, `/gi<id>` for a MIG GPU
    instance, all under nvidia.com/gpu): minors here run opposite to the NVML index, so `nvidia3` is GPU 0,
    `nvidia2/vgpu*` GPU 1 and `nvidia1/gi1` a slice of the MIG GPU 2, whose one holder does not own GPU 2."""
    caplog.set_level(logging.WARNING, logger="exporter.pods.attribution")
    write_driver_minors(proc_root, {0: 3, 1: 2, 2: 1, 3: 0})
    kubelet.set_pods([
        ("ml", "trainer-0", [("main", [(GPU, ["nvidia3"])])]),
        ("serve", "llm-a", [("server", [(GPU, ["nvidia2/vgpu0"])])]),
        ("serve", "llm-b", [("server", [(GPU, ["nvidia2/vgpu1", "nvidia2/vgpu2"])])]),
        ("batch", "mig-job", [("worker", [(GPU, ["nvidia1/gi1"])])]),
        ("infra", "ghost", [("main", [(GPU, ["nvidia9"])])]),  # no GPU has minor 9
    ])
    node = start_node(kubelet.socket_path)
    wait_for(lambda: len(node.scrape().get("gpu_pod_utilization_ratio", [])) == 3, timeout=15)
    wait_for(lambda: len(node.scrape().get("gpu_pod_memory_used_bytes", [])) == 4, timeout=15)
    sweeps = node.app.source.sweeps
    # more sweeps: the id is still logged once
    wait_for(lambda: node.scrape() and node.app.source.sweeps >= sweeps + 3, timeout=15)  # a scrape sweeps
    samples = node.scrape()
    allocation = sorted((s["gpu"], s["pod"], s["shared"]) for s, _ in samples["gpu_allocation_info"])
    assert allocation == [("0", "trainer-0", "false"), ("1", "llm-a", "true"), ("1", "llm-b", "true"),
                          ("2", "mig-job", "true")]
    assert value(samples, "gpu_up", gpu="0", pod="trainer-0") == 1.0
    assert value(samples, "gpu_up", gpu="2", pod="") == 1.0  # a MIG slice's holder is not on the device
    assert value(samples, "gpu_pod_memory_used_bytes", gpu="2", pod="mig-job") == \
        value(samples, "gpu_process_memory_used_bytes", pid="301")  # its process, not the whole device
    assert "2" not in by_gpu(samples, "gpu_pod_utilization_ratio")
    assert (value(samples, "gpu_pod_utilization_ratio", gpu="1", pod="llm-a"),
            value(samples, "gpu_pod_utilization_ratio", gpu="1", pod="llm-b")) == pytest.approx((0.2, 0.4))
    status, one = get_json(node.base + "/api/v1/gpus/0")
    assert status == 200
    assert [(h["pod"], h["device_id"]) for h in one["holders"]] == [("trainer-0", "nvidia3")]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "'nvidia9'" in warnings[0] and "infra/ghost" in warnings[0], warnings


def test_dra_claims_next_to_device_plugin_gpus_on_one_node(
        kubelet: KubeletServer, start_node: Callable[..., Node], proc_root: str,
        caplog: pytest.LogCaptureFixture) -> None:
    """GPU 0 from the device plugin; GPUs 1-3 from NVIDIA's DRA driver, named by device minor (here opposite
    to the NVML index): one claim shared by two pods (GPU 1, `gpu-2`), one MIG device of GPU 2 (`gpu-1-mig-
    1g10gb-19-0`: profile 19 at placement 0, the first instance; the exporter holds the privilege that tells
    placements, as two instances of that profile share the GPU), a whole GPU 3 (`gpu-0`). Another driver's
    claim is not a GPU's, and nothing is logged."""
    caplog.set_level(logging.WARNING, logger="exporter.pods.attribution")
    write_driver_minors(proc_root, {0: 3, 1: 2, 2: 1, 3: 0})
    uuids = node_uuids()
    kubelet.set_pods([
        ("ml", "trainer-0", [("main", [(GPU, [uuids[0]])])]),
        ("serve", "llm-a", [("server", [Claim("llm-gpu", ["gpu-2"])])]),
        ("serve", "llm-b", [("server", [Claim("llm-gpu", ["gpu-2"])])]),
        ("batch", "mig-job", [("worker", [Claim("mig-slice", ["gpu-1-mig-1g10gb-19-0"])])]),
        ("infra", "agent", [("main", [Claim("whole", ["gpu-0"]),
                                      Claim("domain", ["channel-0"], driver="compute-domain.nvidia.com")])]),
    ])
    node = start_node(kubelet.socket_path, "privileged: true\n" + NODE_YAML)
    wait_for(lambda: {s["gpu"] for s, _ in node.scrape().get("gpu_pod_utilization_ratio", [])} == {
        "0", "1", "3"} and len(node.scrape().get("gpu_pod_memory_used_bytes", [])) == 5, timeout=15)
    samples = node.scrape()
    keys = ("gpu", "namespace", "pod", "resource", "shared", "claim")
    assert sorted(tuple(s[k] for k in keys) for s, _ in samples["gpu_allocation_info"]) == [
        ("0", "ml", "trainer-0", GPU, "false", ""),
        ("1", "serve", "llm-a", "gpu.nvidia.com", "true", "llm-gpu"),
        ("1", "serve", "llm-b", "gpu.nvidia.com", "true", "llm-gpu"),
        ("2", "batch", "mig-job", "gpu.nvidia.com", "true", "mig-slice"),
        ("3", "infra", "agent", "gpu.nvidia.com", "false", "whole"),
    ]
    # the device series carry the pod of an exclusive holder, whichever way it was allocated
    assert {s["gpu"]: s["pod"] for s, _ in samples["gpu_up"]} == {"0": "trainer-0", "1": "", "2": "",
                                                                  "3": "agent"}
    assert (value(samples, "gpu_pod_utilization_ratio", gpu="1", pod="llm-a"),
            value(samples, "gpu_pod_utilization_ratio", gpu="1", pod="llm-b")) == pytest.approx((0.2, 0.4))
    assert value(samples, "gpu_pod_memory_used_bytes", gpu="2", pod="mig-job") == \
        value(samples, "gpu_process_memory_used_bytes", pid="301")
    # the MIG device the claim names, and only that one, carries its pod
    assert {s["gpu_instance_id"]: s["pod"] for s, _ in samples["gpu_mig_memory_used_bytes"]} == {
        "7": "mig-job", "8": ""}
    # the JSON API's holders name the claim too ("" for the device plugin's GPU 0), whatever GPU they hold
    status, document = get_json(node.base + "/api/v1/gpus")
    assert status == 200
    assert [[(h["pod"], h["device_id"], h["claim"]) for h in gpu["holders"]] for gpu in document["gpus"]] == [
        [("trainer-0", uuids[0], "")], [("llm-a", "gpu-2", "llm-gpu"), ("llm-b", "gpu-2", "llm-gpu")],
        [("mig-job", "gpu-1-mig-1g10gb-19-0", "mig-slice")], [("agent", "gpu-0", "whole")]]
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == []


def test_shared_gpu_with_unreadable_environ_has_no_pod_series(
        kubelet: KubeletServer, start_node: Callable[..., Node], proc_root: str,
        caplog: pytest.LogCaptureFixture) -> None:
    """Workloads running as another uid: the exporter (uid 0, no capabilities) cannot read their environ.
    The time-sliced GPU 1 then has no gpu_pod_* series (never 0 for holders whose processes run), one
    WARNING; the exclusive GPU 0 and the MIG holder of GPU 2 are still attributed."""
    caplog.set_level(logging.WARNING, logger="exporter.pods.attribution")
    for pid in (201, 202):
        os.unlink(os.path.join(proc_root, str(pid), "environ"))
    kubelet.set_pods(node_pods())
    node = start_node(kubelet.socket_path)
    wait_for(lambda: {s["gpu"] for s, _ in node.scrape().get("gpu_pod_memory_used_bytes", [])} == {"0", "2"},
             timeout=15)
    sweeps = node.app.source.sweeps
    wait_for(lambda: node.scrape() and node.app.source.sweeps >= sweeps + 3, timeout=15)  # a scrape sweeps
    samples = node.scrape()
    assert {s["gpu"] for s, _ in samples["gpu_pod_memory_used_bytes"]} == {"0", "2"}
    for name in ("gpu_pod_sm_utilization_ratio", "gpu_pod_memory_bandwidth_utilization_ratio"):
        assert {s["gpu"] for s, _ in samples[name]} == {"0"}, name  # not 0 for GPU 1's holders: left out
    held = sorted(s["pod"] for s, _ in samples["gpu_allocation_info"] if s["gpu"] == "1")
    assert held == ["llm-a", "llm-b"]
    assert {s["pid"]: s["pod"] for s, _ in samples["gpu_process_memory_used_bytes"]}["201"] == ""
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "GPU 1" in warnings[0] and "201, 202" in warnings[0], warnings


def test_per_pod_utilization_of_a_time_sliced_gpu_adds_up_to_the_gpu(
        kubelet: KubeletServer, start_node: Callable[..., Node]) -> None:
    """GPU 1 time-sliced between serve/llm-a and serve/llm-b (60 % load; SM shares 1:2, memory-bandwidth
    shares 3:2, llm-b's defaulting to its SM share): each pod gets its own processes' NVML per-process
    utilization, not the whole GPU's as with dcgm-exporter, and the two add up to the GPU's (constant load:
    the background pass and the sweep see the same instant). The exclusive GPU 0's holder reads the device's;
    the MIG GPU 2 and the free GPU 3 none."""
    yaml_text = NODE_YAML.replace("{pid: 201, memory_gib: 8, sm_share: 1}",
                                  "{pid: 201, memory_gib: 8, sm_share: 1, memory_share: 3}")
    assert yaml_text != NODE_YAML
    kubelet.set_pods(node_pods())
    node = start_node(kubelet.socket_path, yaml_text)

    def both_pods_of_gpu_1() -> bool:
        found = node.scrape()
        return all(len(by_gpu(found, name).get("1", [])) == 2 for name in
                   ("gpu_pod_sm_utilization_ratio", "gpu_pod_memory_bandwidth_utilization_ratio"))

    wait_for(both_pods_of_gpu_1, timeout=15)
    samples = node.scrape()
    def of_gpu_1(name: str) -> dict[str, float]:
        return {s["pod"]: v for s, v in samples[name] if s["gpu"] == "1"}

    sm = of_gpu_1("gpu_pod_sm_utilization_ratio")
    bandwidth = of_gpu_1("gpu_pod_memory_bandwidth_utilization_ratio")
    assert sm == pytest.approx({"llm-a": 0.2, "llm-b": 0.4})  # 60 % split 1:2
    assert bandwidth == pytest.approx({"llm-a": 0.2, "llm-b": 0.13})  # 33 % split 3:2 in whole percents
    assert sum(sm.values()) == pytest.approx(value(samples, "gpu_utilization_ratio", gpu="1"))
    assert sum(bandwidth.values()) == pytest.approx(value(samples, "gpu_memory_utilization_ratio", gpu="1"))
    assert all(s["namespace"] == "serve" and s["container"] == "server"
               for s, _ in samples["gpu_pod_sm_utilization_ratio"] if s["gpu"] == "1")
    # the existing per-holder series still reads the same shares
    assert of_gpu_1("gpu_pod_utilization_ratio") == pytest.approx(sm)

    # exclusive GPU 0: its one process is the whole GPU's utilization
    assert value(samples, "gpu_pod_sm_utilization_ratio", gpu="0", pod="trainer-0") == \
        pytest.approx(value(samples, "gpu_utilization_ratio", gpu="0"))
    # MIG GPU 2: NVML has no per-process utilization in MIG mode (left out, never 0); free GPU 3: no holder
    for name in ("gpu_pod_sm_utilization_ratio", "gpu_pod_memory_bandwidth_utilization_ratio"):
        assert set(by_gpu(samples, name)) == {"0", "1"}, name

    result = promtool("check", "metrics", stdin=node.text())
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
