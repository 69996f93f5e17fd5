"""The demo's scenarios: the capacity one's pool is short of GPUs, its clock opens the weekday window within
the run, and the flags pick each scenario's rules file."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from autoscaler.config.rules import load_rules
from autoscaler.config.schedules import open_bounds
from demo.__main__ import parse_args
from demo.scenarios import CAPACITY_RULES, DEMO_RULES, SCENARIOS, ShiftedClock

CAPACITY = SCENARIOS["capacity"]
RULE = load_rules(CAPACITY_RULES).rules[0]


def test_each_scenario_runs_its_own_rules_file_unless_told_otherwise() -> None:
    assert parse_args([]).rules == DEMO_RULES and parse_args([]).scenario == "day"
    assert parse_args(["--scenario", "capacity"]).rules == CAPACITY_RULES
    assert parse_args(["--scenario", "capacity", "--rules", "mine.yaml"]).rules.name == "mine.yaml"


def test_the_capacity_pool_holds_fewer_replicas_than_the_rule_may_ask_for() -> None:
    assert RULE.capacity is not None and RULE.schedules
    pool = CAPACITY.pool(RULE)
    assert pool.gpu_count == 8 < RULE.max_replicas * RULE.capacity.gpus_per_replica
    trace = CAPACITY.trace(100.0)
    assert max(trace(t) for t in range(101)) > pool.gpu_count  # the load asks for more than the pool serves
    assert trace.others_at(0.0) == 2 and trace.others_at(100.0) == 0  # a training job holds 2, then none
    assert SCENARIOS["day"].pool(RULE).gpu_count >= RULE.max_replicas


@pytest.mark.parametrize(("duration", "lead"), [(180.0, 30.0), (40.0, 8.0)])
def test_the_capacity_clock_starts_on_a_monday_just_before_the_window_opens(duration: float,
                                                                          lead: float) -> None:
    start = CAPACITY.start(duration)
    assert start is not None
    local = datetime.fromtimestamp(start, ZoneInfo("Europe/Berlin"))
    assert (local.strftime("%A"), local.hour, local.minute) == ("Monday", 8, 59)
    assert open_bounds(RULE.schedules, start) is None
    assert open_bounds(RULE.schedules, start + lead - 0.5) is None
    bounds = open_bounds(RULE.schedules, start + lead)
    assert bounds is not None and bounds.min_replicas == 4
    assert SCENARIOS["day"].start(duration) is None  # the default demo keeps the wall clock


def test_the_shifted_clock_reads_the_chosen_time_and_runs_at_the_base_clocks_speed() -> None:
    base = [100.0]
    clock = ShiftedClock(lambda: base[0], start=5_000.0)
    assert clock() == 5_000.0
    base[0] += 2.5
    assert clock() == 5_002.5
    clock.start_at(9_000.0)
    assert clock() == 9_000.0 and clock.from_base(base[0] - 1.0) == 8_999.0
