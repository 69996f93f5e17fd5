"""The controller's deletion costs, without a network: set before the scale patch of a scale-down only, never
in a dry run, and a backend that raises (a bug, not an API answer) still lets the scale-down and the other
rules go on."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from autoscaler.controller.loop import Controller, ControllerSettings
from autoscaler.kube.backend import PodMeta
from autoscaler.policy import TargetRef
from plumbing.prometheus.runner import QueryResult
from plumbing.prometheus.series import SeriesValues
from tests.clock import ManualClock
from tests.rules import rule, ruleset
from tests.unit.autoscaler.controller.fakes import FakeBackend

T0 = 1_700_000_000.0
PER_POD = "sum by (pod) (vllm:num_requests_running)"
DOWN = f"behavior: {{scaleDown: {{stabilizationWindowSeconds: 0}}}}\npodDeletionCost: {{query: '{PER_POD}'}}"


@dataclass
class PodsBackend(FakeBackend):
    """FakeBackend with pods: two per target, `broken` targets raise a RuntimeError when listed."""

    broken: set[str] = field(default_factory=set)
    calls: list[str] = field(default_factory=list)

    def list_pods(self, ref: TargetRef, selector: str) -> tuple[PodMeta, ...]:
        if ref.name in self.broken:
            raise RuntimeError("a bug in the backend")
        return PodMeta(f"{ref.name}-a"), PodMeta(f"{ref.name}-b")

    def annotate_pod(self, namespace: str, name: str, annotations: Mapping[str, str | None]) -> None:
        self.calls.append(f"annotate {name}")

    def patch_scale(self, ref: TargetRef, replicas: int) -> None:
        self.calls.append(f"scale {ref.name} {replicas}")
        super().patch_scale(ref, replicas)


@dataclass
class Source:
    load: float
    series_asked: list[str] = field(default_factory=list)

    def run_queries(self, queries: Collection[str]) -> Mapping[str, QueryResult]:
        return {q: QueryResult(self.load) for q in queries}

    def run_series(self, query: str, label: str) -> SeriesValues:
        self.series_asked.append(query)
        return SeriesValues({"ok-a": 2, "ok-b": 0, "bug-a": 1})


def controller(backend: PodsBackend, source: Source, dry_run: bool = False) -> Controller:
    rules = ruleset(rule("ok", "q", extra=DOWN), rule("bug", "q", extra=DOWN))
    return Controller(backend, source, rules, ManualClock(T0), settings=ControllerSettings(dry_run=dry_run))


def test_costs_before_the_scale_patch_and_a_raising_backend_harms_nothing() -> None:
    backend = PodsBackend(broken={"bug"})
    for name in ("ok", "bug"):
        backend.add(TargetRef("Deployment", "ml", name), 4)
    c = controller(backend, Source(40.0))  # 4 replicas at 40 against 80: 2
    try:
        outcomes = {o.rule.name: o for o in c.sync_once().outcomes}
    finally:
        c.close()
    assert outcomes["ok"].patched and outcomes["bug"].patched
    assert [call for call in backend.calls if "ok" in call] == ["annotate ok-a", "scale ok 2"]
    assert "scale bug 2" in backend.calls
    bug_events = [e[2] for e in backend.events if e[0].name == "bug"]
    assert bug_events == ["FailedSetDeletionCost", "ScaledDown"]
    assert [e[2] for e in backend.events if e[0].name == "ok"] == ["ScaledDown"]


def test_a_scale_up_or_a_dry_run_touches_no_pod() -> None:
    for load, dry_run in ((400.0, False), (40.0, True)):
        backend, source = PodsBackend(), Source(load)
        backend.add(TargetRef("Deployment", "ml", "ok"), 4)
        backend.add(TargetRef("Deployment", "ml", "bug"), 4)
        c = controller(backend, source, dry_run)
        try:
            c.sync_once()
        finally:
            c.close()
        assert not [call for call in backend.calls if call.startswith("annotate")]
        assert source.series_asked == []
