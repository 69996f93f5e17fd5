"""The demo's simulated world: GPU nodes with real exporters, and the inference service's request counter.

Each node is a `SimulatedNvml` (exporter/simulator/nvml.py) behind a real `ExporterApp` serving /metrics on
127.0.0.1; its GPUs are driven through the simulated NVML's load driver from the cluster model
(demo.cluster): a ready replica's GPU runs at the service's load share, a loading replica's GPU holds its
model's memory at ~0 % utilization, a GPU of the other tenant (a training job, demo.cluster.set_others) is
busy with its own pod, an unallocated GPU idles with no process. The exporters label each GPU with the pod
holding it (an `Attribution` answered from the cluster model, where a cluster has the kubelet's
pod-resources API), so a rule selects its GPUs with `pod=~"<name>-.*"` exactly as in a cluster.

The service itself exposes `service_requests_total{namespace,service}` (requests it received) on a third
endpoint, as an inference server or its gateway would; demand-based rules query its rate. It also answers
as an LLM server would (demo/llm_server.py's `BatchingServerCollector`, with the default serving profile):
the same requests, arriving at the load's rate, each go to the ready replica with the fewest in flight and
are served by that replica's emulated continuous batching; vLLM's series per ready (or draining) replica.
A replica that a scale-down removes (the Deployment's `on_removed`) drains: it takes no new request and serves
those in flight for up to `drain_seconds`, then what is left is cut (0: at once). Its GPU is freed at the
scale-down (the Deployment does not know of the drain). At each scale-down the server also counts what an
abort would have cut, with the deletion costs the controller set and without them.

The exporters' GPU utilization stays the load's share per ready GPU (1.0 = `requests_per_gpu_second`, about
what one replica of the profile serves flat out), not the emulated server's busy time: a batching server is
busy, and NVML reads ~100 %, at any load (docs/llm-signals.md), and the rate rules (demo/demo-rules.yaml,
demo/capacity-rules.yaml) are the recommended GPU configuration, written for a utilization that follows load.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, Metric

from demo.cluster import OTHER_NAMESPACE, OTHER_WORKLOAD, ClusterSnapshot, SimulatedDeployment
from demo.llm_server import DRAIN_SECONDS, BatchingServerCollector
from demo.llm_server import SERVED_NAMES as LLM_NAMES
from demo.serving_profile import ServingProfile, load_profile
from exporter.app import ExporterApp
from exporter.metric_table import ALL_METRICS
from exporter.scrape.holders import PodRef
from exporter.simulator.config import GIB, default_config
from exporter.simulator.nvml import SimulatedNvml
from exporter.simulator.physics import gpu_uuid
from exporter.source import SourceSettings

MODEL_MEMORY_BYTES = 38 * GIB
"""GPU memory one replica's model holds once loaded (loading replicas fill it up gradually)."""
TRAINER_MEMORY_BYTES = 60 * GIB
"""GPU memory a pod of the other tenant's training job holds."""
FIRST_PID = 40_000
CONTAINER = "server"
"""The container name of every replica's pod (the `container` label of its GPU's series)."""
REQUESTS_METRIC = "service_requests_total"
SERVED_METRICS: frozenset[str] = frozenset({*(spec.exposed_name for spec in ALL_METRICS), REQUESTS_METRIC,
                                           *LLM_NAMES})
"""Every series name the demo serves: the exporter's and the service's (Prometheus adds `up`, `scrape_*`)."""
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_NAMES = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def served_names_in(query: str) -> list[str]:
    """The series names the demo serves that a PromQL query mentions (string literals left out)."""
    return sorted({n for n in _NAMES.findall(_STRINGS.sub(" ", query)) if n in SERVED_METRICS})


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # every scrape is not news
        pass


@dataclass(frozen=True)
class Node:
    name: str
    nvml: SimulatedNvml
    exporter: ExporterApp


class _ClusterAttribution:
    """Answers the exporter's Attribution protocol from the last published cluster state (no blocking)."""

    def __init__(self) -> None:
        self.by_uuid: Mapping[str, Sequence[PodRef]] = {}
        self.by_pid: Mapping[int, PodRef] = {}

    def holders(self) -> Mapping[str, Sequence[PodRef]]:
        return self.by_uuid

    def pod_of_pid(self, pid: int) -> PodRef | None:
        return self.by_pid.get(pid)


class _RequestCounter:
    """service_requests_total for the simulated service: integrated from the load at every driver tick."""

    def __init__(self, namespace: str, service: str) -> None:
        self._labels = [namespace, service]
        self._lock = threading.Lock()
        self._total = 0.0

    def add(self, requests: float) -> None:
        with self._lock:
            self._total += requests

    def collect(self) -> Iterable[Metric]:
        family = CounterMetricFamily("service_requests", "Requests the inference service received.",
                                     labels=["namespace", "service"])
        with self._lock:
            family.add_metric(self._labels, self._total)
        yield family


class SimulatedWorld:
    """Starts the exporters and the service endpoint; `drive()` pushes the cluster state into them."""

    def __init__(self, deployment: SimulatedDeployment, requests_per_gpu_second: float,
                 sweep_interval: float = 0.5, profile: ServingProfile | None = None,
                 drain_seconds: float = DRAIN_SECONDS) -> None:
        """`profile`: the emulated server's (the default profile when not given); `drain_seconds`: a removed
        replica's grace period. The world takes the Deployment's `on_removed` hook: its scale-downs drain
        the removed replicas."""
        settings = deployment.settings
        self.deployment = deployment
        self.requests_per_gpu_second = requests_per_gpu_second
        self.attributions: list[_ClusterAttribution] = []
        self.nodes: list[Node] = []
        for n in range(settings.nodes):
            config = default_config(settings.gpus_per_node, seed=n + 1)
            nvml = SimulatedNvml(config)
            for index in range(settings.gpus_per_node):
                nvml.set_utilization(index, 0.0)
                nvml.set_processes(index, [])
            attribution = _ClusterAttribution()
            exporter = ExporterApp(nvml, settings.node_of(n * settings.gpus_per_node),
                                   SourceSettings(min_interval=sweep_interval), attribution=attribution)
            self.attributions.append(attribution)
            self.nodes.append(Node(settings.node_of(n * settings.gpus_per_node), nvml, exporter))
        self._uuids = [gpu_uuid(n + 1, i)
                       for n in range(settings.nodes) for i in range(settings.gpus_per_node)]
        self._counter = _RequestCounter(deployment.namespace, deployment.name)  # service = Deployment
        self.llm = BatchingServerCollector(profile or load_profile(), deployment.namespace,
                                           drain_seconds=drain_seconds)
        deployment.on_removed = self.llm.scale_down
        self._registry = CollectorRegistry()
        self._registry.register(self._counter)
        self._registry.register(self.llm)
        self._service_server: WSGIServer | None = None
        self.exporter_ports: list[int] = []
        self.service_port = 0
        self._pids: dict[str, int] = {}

    def start(self) -> None:
        for node in self.nodes:
            self.exporter_ports.append(node.exporter.start("127.0.0.1", 0).port)
        app = make_wsgi_app(self._registry)

        def text_format(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
            # Prometheus asks for OpenMetrics first, in which prometheus_client writes vllm:* as vllm_*:
            # the classic text format keeps vLLM's names as vLLM serves them.
            return app({k: v for k, v in environ.items() if k != "HTTP_ACCEPT"}, start_response)

        server = make_server("127.0.0.1", 0, text_format, _ThreadingServer, handler_class=_QuietHandler)
        threading.Thread(target=server.serve_forever, name="demo-service", daemon=True).start()
        self._service_server = server
        self.service_port = int(server.server_address[1])

    def stop(self) -> None:
        for node in self.nodes:
            node.exporter.stop()
        server = self._service_server
        if server is not None:
            server.shutdown()
            server.server_close()
            self._service_server = None

    def drive(self, load: float, elapsed_seconds: float, backlog: bool = True) -> ClusterSnapshot:
        """Set every GPU from the cluster state under `load`; count the requests of `elapsed_seconds` and
        serve them (`backlog` False: the LLM server queues none of them, as before the day starts)."""
        snapshot = self.deployment.snapshot(load)
        settings = self.deployment.settings
        replicas = {r.name: r for r in self.deployment.replicas()}
        by_uuid: list[dict[str, list[PodRef]]] = [{} for _ in self.nodes]
        by_pid: list[dict[int, PodRef]] = [{} for _ in self.nodes]
        for gpu in snapshot.gpus:
            node_index, local = divmod(gpu.index, settings.gpus_per_node)
            nvml = self.nodes[node_index].nvml
            nvml.set_utilization(local, round(gpu.utilization, 4))
            if gpu.other is not None:
                pid = self._pids.setdefault(f"{OTHER_NAMESPACE}/{gpu.other}", FIRST_PID + len(self._pids))
                nvml.set_processes(local, [(pid, TRAINER_MEMORY_BYTES)])
                pod = PodRef(OTHER_NAMESPACE, gpu.other, OTHER_WORKLOAD)
                by_uuid[node_index][self._uuids[gpu.index]] = [pod]
                by_pid[node_index][pid] = pod
                continue
            if gpu.replica is None:
                nvml.set_processes(local, [])
                continue
            pid = self._pids.setdefault(gpu.replica, FIRST_PID + len(self._pids))
            replica = replicas.get(gpu.replica)
            progress = 1.0
            if replica is not None and replica.ready_at is not None and not gpu.serving:
                delay = settings.startup_delay_seconds
                progress = 1.0 - (replica.ready_at - snapshot.time) / delay if delay > 0 else 1.0
            nvml.set_processes(local, [(pid, int(MODEL_MEMORY_BYTES * min(max(progress, 0.02), 1.0)))])
            pod = PodRef(self.deployment.namespace, gpu.replica, CONTAINER)
            by_uuid[node_index][self._uuids[gpu.index]] = [pod]
            by_pid[node_index][pid] = pod
        for attribution, uuids, pids in zip(self.attributions, by_uuid, by_pid, strict=True):
            attribution.by_uuid, attribution.by_pid = uuids, pids  # swapped whole: scrapes see one state
        self._counter.add(load * self.requests_per_gpu_second * elapsed_seconds)  # received, served or not
        serving = sorted({gpu.replica for gpu in snapshot.gpus if gpu.replica is not None and gpu.serving})
        self.llm.update(load * self.requests_per_gpu_second, serving, elapsed_seconds, backlog)
        return snapshot

    def scrape_targets(self) -> dict[str, list[str]]:
        """Prometheus jobs -> host:port targets."""
        return {"gpu-exporter": [f"127.0.0.1:{p}" for p in self.exporter_ports],
                "inference-service": [f"127.0.0.1:{self.service_port}"]}

    def describe_series(self) -> str:
        """What the demo serves and with which label values, for a user whose queries find nothing: every
        label value comes from the rule's target (namespace, Deployment name)."""
        namespace, name = self.deployment.namespace, self.deployment.name
        nodes = " or ".join(f'"{node.name}"' for node in self.nodes)
        per_gpu = sorted(spec.exposed_name for spec in ALL_METRICS if spec.per_gpu)
        shown = ("gpu_utilization_ratio", "gpu_memory_used_bytes", "gpu_power_usage_watts")
        return "\n".join([
            f"The demo simulates the rule's target, Deployment {namespace}/{name}, and serves only:",
            f"  - the exporter's per-GPU series ({', '.join(shown)} and {len(per_gpu) - len(shown)} more "
            f'gpu_*), with namespace="{namespace}", pod="{name}-0001", "{name}-0002", ... (select them with '
            f'pod=~"{name}-.*"), container="{CONTAINER}", node={nodes};',
            f'  - {REQUESTS_METRIC}{{namespace="{namespace}", service="{name}"}}, the requests the service '
            "receives (a counter: query its rate());",
            "  - vLLM's vllm:num_requests_waiting, vllm:num_requests_running, vllm:kv_cache_usage_perc, "
            "vllm:request_success_total and the vllm:time_to_first_token_seconds and "
            "vllm:time_per_output_token_seconds histograms, per ready or draining replica "
            f'(namespace="{namespace}", pod=~"{name}-.*").',
        ])
