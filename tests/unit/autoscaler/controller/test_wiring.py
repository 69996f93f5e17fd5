"""The one place `run`, `status` and the demo build and close their runners and controller."""

from __future__ import annotations

import pytest

from autoscaler.config.rules import RuleSet
from autoscaler.controller.loop import ControllerSettings
from autoscaler.controller.wiring import wire
from plumbing.prometheus.config import PrometheusConfig, endpoint_from_url
from plumbing.prometheus.runner import PromQLRunner, PromQLSettings
from tests.unit.autoscaler.controller.fakes import FakeBackend

TWO_ENDPOINTS = PrometheusConfig("test", {
    "default": endpoint_from_url("http://127.0.0.1:1"),
    "other": endpoint_from_url("http://127.0.0.1:2", name="other"),
})


def test_one_runner_per_endpoint_with_its_url_and_the_settings_given() -> None:
    with wire(
        rules=RuleSet("r.yaml", ()),
        backend=FakeBackend(),
        prometheus=TWO_ENDPOINTS,
        queries=PromQLSettings("", budget=3.0),
        settings=ControllerSettings(dry_run=True),
    ) as wiring:
        assert {n: r.settings.url for n, r in wiring.sources.items()} == {
            "default": "http://127.0.0.1:1", "other": "http://127.0.0.1:2"}
        assert all(r.settings.budget == 3.0 for r in wiring.sources.values())
        assert wiring.controller.settings.dry_run


def test_leaving_closes_the_controller_and_every_runner() -> None:
    with wire(
        rules=RuleSet("r.yaml", ()),
        backend=FakeBackend(),
        prometheus=TWO_ENDPOINTS,
        queries=PromQLSettings(""),
    ) as wiring:
        pass
    assert wiring.controller._pool._shutdown  # type: ignore[attr-defined]
    assert all(r._pool._shutdown for r in wiring.sources.values())  # type: ignore[attr-defined]


def test_a_controller_that_cannot_be_built_closes_the_runners(monkeypatch: pytest.MonkeyPatch) -> None:
    import autoscaler.controller.wiring as wiring_module

    built: list[PromQLRunner] = []
    real_runners = wiring_module.runners

    def recording(config: PrometheusConfig, settings: PromQLSettings) -> dict[str, PromQLRunner]:
        made = real_runners(config, settings)
        built.extend(made.values())
        return made

    def refusing(*args: object, **kwargs: object) -> None:
        raise RuntimeError("no controller")

    monkeypatch.setattr(wiring_module, "runners", recording)
    monkeypatch.setattr(wiring_module, "Controller", refusing)
    with pytest.raises(RuntimeError, match="no controller"):
        wire(
            rules=RuleSet("r.yaml", ()),
            backend=FakeBackend(),
            prometheus=TWO_ENDPOINTS,
            queries=PromQLSettings(""),
        )
    assert len(built) == 2 and all(r._pool._shutdown for r in built)  # type: ignore[attr-defined]
