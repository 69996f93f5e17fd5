"""What tune says and uses as the start-up time, given what kube-state-metrics' series measured."""

from __future__ import annotations

from autoscaler.cli.tune import MAX_STARTUP_SECONDS, Startup, startup_of
from autoscaler.planning.startup import StartupMeasure
from tests.rules import rule, ruleset


def test_a_measured_start_up_is_used_and_named() -> None:
    startup = startup_of(StartupMeasure(150.0, 7), ruleset(rule()).rules[0])
    assert startup.seconds == 150.0
    assert startup.source.startswith("measured: the median of 7 scale-up(s)")


def test_a_start_up_longer_than_the_flag_allows_is_capped_and_says_so() -> None:
    startup = startup_of(StartupMeasure(5_400.0, 2), ruleset(rule()).rules[0])
    assert startup.seconds == MAX_STARTUP_SECONDS
    assert "5400s, capped at 3600s" in startup.source


def test_nothing_measured_runs_at_once_and_says_which_target() -> None:
    svc = ruleset(rule()).rules[0]
    startup = startup_of(None, svc)
    assert startup == Startup(0.0, startup.source)
    assert f"{svc.target.namespace}/{svc.target.name}" in startup.source
    assert startup.source.endswith("give --startup-seconds")
