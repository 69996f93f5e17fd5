"""The autoscaling-quality benchmark: its configurations, the claims docs/benchmarks.md makes about them, its
outputs."""

from __future__ import annotations

import dataclasses
import itertools
import struct
from pathlib import Path

import pytest

from autoscaler.config.rules import load_rules
from autoscaler.policy import DEFAULT_BEHAVIOR, ScalingPolicy
from autoscaler.policy.spec import Forecast
from benchmarks import autoscaling_quality as bench
from benchmarks import capacity_quality, held_out
from demo.replay import KNOWN_METRICS, ReplaySettings, replay
from demo.traces import (
    DEFAULT_BURSTS,
    HELD_OUT_BURSTS,
    benchmark_traces,
    bursty,
    daily,
    held_out_traces,
    sudden_burst,
)
from tests import REPO_ROOT

ROOT = REPO_ROOT

# The module's replays (every configuration on every trace, in module fixtures) are minutes of CPU on a
# shared 2-core machine: the timeout is a hang guard, and the fixtures' time counts in the first test's.
pytestmark = pytest.mark.timeout(900)


@pytest.mark.parametrize("path", ["examples/gpu-inference-rules.yaml",
                                  "examples/gpu-utilization-only-rules.yaml", "demo/demo-rules.yaml",
                                  "demo/llm-rules.yaml",
                                  "demo/capacity-rules.yaml"])
def test_shipped_rules_files_load_and_use_signals_the_replay_and_demo_provide(path: str) -> None:
    rules = load_rules(ROOT / path)
    assert len(rules.rules) == 1
    assert {m.name for m in rules.rules[0].metrics} <= set(KNOWN_METRICS)


def test_configuration_a_is_the_set_up_our_users_run() -> None:
    users = bench.configurations()[0].rule
    assert (users.min_replicas, users.max_replicas) == (2, 10)
    assert [(m.name, m.type, m.target) for m in users.metrics] == [("gpu_utilization", "Average", 80)]
    up, down = users.behavior.scale_up, users.behavior.scale_down
    assert (up.stabilization_window_seconds, up.policies) == (300, (ScalingPolicy("Percent", 100, 60),))
    assert (down.stabilization_window_seconds, down.policies) == (600, (ScalingPolicy("Percent", 50, 60),))


def test_configuration_b_is_the_hpa_default_behavior_on_the_same_metric() -> None:
    users, defaults, _, _ = (c.rule for c in bench.configurations())
    assert defaults.behavior == DEFAULT_BEHAVIOR
    assert (defaults.metrics, defaults.min_replicas, defaults.max_replicas) == (
        users.metrics, users.min_replicas, users.max_replicas)


FIRST_FIVE = ("steady", "daily", "burst", "ramp", "noisy")
"""The traces (a), (b) and (c) were compared on, with the bounds; `bursty` came with panic mode."""


@pytest.fixture(scope="module")
def outcomes() -> list[bench.TraceOutcome]:
    """(a), (b) and (c) on the first five traces, with the bounds of (a) only (the bound is the slow part;
    tests/unit/demo/test_clairvoyant.py checks it against replayed configurations)."""
    traces = [t for t in benchmark_traces() if t.name in FIRST_FIVE]
    return bench.run(bench.configurations()[:3], traces, ReplaySettings(), bounded=("a",))


@pytest.fixture(scope="module")
def panic_outcomes(outcomes: list[bench.TraceOutcome]) -> list[bench.TraceOutcome]:
    """(c) and (d) on every trace, without the bounds: (c) taken from `outcomes` where it was replayed."""
    c, d = (config for config in bench.configurations() if config.key in "cd")
    replayed = {outcome.trace.name: outcome.results["c"] for outcome in outcomes}
    panicky = []
    for trace in benchmark_traces():
        ours = replayed.get(trace.name) or replay(c.rule, trace, ReplaySettings())
        panicky.append(bench.TraceOutcome(trace, {"c": ours, "d": replay(d.rule, trace, ReplaySettings())}))
    return panicky


def test_panic_mode_cuts_overload_on_every_swinging_trace_for_at_most_3_percent_more_gpu_hours(
        panic_outcomes: list[bench.TraceOutcome]) -> None:
    """docs/benchmarks.md: (d) is never overloaded longer than (c), a fifth less where load swings (daily,
    burst, bursty; on bursty nearly a third), at no more than 1.03x its GPU-hours."""
    for outcome in panic_outcomes:
        c, d = outcome.results["c"].figures, outcome.results["d"].figures
        assert d.overloaded_minutes <= c.overloaded_minutes, bench.panic_verdict([outcome])
        assert d.gpu_hours <= 1.03 * c.gpu_hours, bench.panic_verdict([outcome])
        if outcome.trace.name in ("daily", "burst", "bursty"):
            assert d.overloaded_minutes <= 0.81 * c.overloaded_minutes, bench.panic_verdict([outcome])
    [bursty] = [o for o in panic_outcomes if o.trace.name == "bursty"]
    c, d = bursty.results["c"].figures, bursty.results["d"].figures
    assert d.overloaded_minutes <= 0.7 * c.overloaded_minutes, bench.panic_verdict([bursty])
    reasons = {sync.reason for sync in bursty.results["d"].syncs}
    assert {"PanicScaleUp", "PanicHold"} <= reasons


def test_configuration_d_is_c_with_panic_mode() -> None:
    _, _, c, d = (config.rule for config in bench.configurations())
    assert c.behavior.panic is None and d.behavior.panic is not None
    assert (d.metrics[0].panic_query, d.behavior.panic.threshold_percent) == (
        c.metrics[0].query.replace("[1m]", "[30s]"), 110.0)
    assert dataclasses.replace(d, behavior=c.behavior, metrics=c.metrics) == c


def test_the_shipped_forecast_example_is_the_benchmarks_d_with_its_best_lead() -> None:
    """examples/gpu-inference-forecast-rules.yaml is what docs/benchmarks.md measured as "(d) + forecast,
    lead 300 s": a user copies the configuration the figures are about."""
    d = bench.configurations()[3].rule
    shipped = load_rules(ROOT / "examples" / "gpu-inference-forecast-rules.yaml").rules[0]
    assert shipped.forecast == Forecast(86_400, 300, 1, "scaleUp")
    assert dataclasses.replace(shipped, forecast=None, line=d.line) == d


def test_the_bursty_trace_swings_within_minutes_around_a_daily_curve() -> None:
    trace = bursty()
    assert trace.duration_seconds == 86_400 and trace(3_600.0) == bursty()(3_600.0)  # seeded
    minutes = [trace(60.0 * m) for m in range(1_440)]
    jumps = sum(1 for x, y in itertools.pairwise(minutes) if y > 1.3 * x)
    assert jumps >= 24  # at least one swing an hour, most rising within a minute
    assert min(minutes) > 0.8 and max(minutes) < 12


@pytest.mark.parametrize("trace", ["steady", "daily", "burst", "ramp"])
def test_recommended_spends_fewer_gpu_hours_with_no_more_overload(outcomes: list[bench.TraceOutcome],
                                                                 trace: str) -> None:
    [outcome] = [o for o in outcomes if o.trace.name == trace]
    assert outcome.target_met, bench.verdict([outcome])


def test_on_the_noisy_trace_recommended_halves_overload_for_a_few_more_gpu_hours(
        outcomes: list[bench.TraceOutcome]) -> None:
    """The one trace where the target is not met, as docs/benchmarks.md says (if a retuned (c) meets it,
    this fails so that the documented verdict and this test are updated together): (a) never moves there."""
    [outcome] = [o for o in outcomes if o.trace.name == "noisy"]
    assert not outcome.target_met, bench.verdict([outcome])
    a, c = outcome.results["a"].figures, outcome.results["c"].figures
    assert a.scale_changes == 0
    assert c.overloaded_minutes <= a.overloaded_minutes / 2
    assert c.gpu_hours <= a.gpu_hours * 1.13


def test_on_the_noisy_trace_no_policy_could_save_more_than_a_few_percent_over_a(
        outcomes: list[bench.TraceOutcome]) -> None:
    """docs/benchmarks.md: even a policy that knows the whole trace in advance needs at least 97 % of (a)'s
    GPU-hours to be overloaded no longer than (a), whereas on burst and daily (a) wastes over a tenth."""
    by_name = {o.trace.name: o for o in outcomes}
    noisy_a = by_name["noisy"].results["a"].figures
    assert by_name["noisy"].bounds["a"].gpu_hours >= 0.97 * noisy_a.gpu_hours
    for name in ("burst", "daily"):
        assert by_name[name].bounds["a"].gpu_hours < 0.9 * by_name[name].results["a"].figures.gpu_hours
    for outcome in outcomes:
        assert outcome.bounds.keys() == {"a"}
        for key, bound in outcome.bounds.items():
            assert bound.gpu_hours <= outcome.results[key].figures.gpu_hours + 1e-9


def test_markdown_table_has_a_row_per_trace_and_configuration(outcomes: list[bench.TraceOutcome]) -> None:
    table = bench.markdown_table(bench.configurations()[:3], outcomes).splitlines()
    assert table[0].startswith("| trace | configuration | GPU-hours | vs (a) | vs fewest possible |")
    assert len(table) == 2 + 5 * 3
    assert all(row.count("|") == 10 for row in table)
    assert "| burst | (a) users' HPA |" in "\n".join(table) and " 1.00x | 1.05x |" in table[2]


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()[:24]
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_main_prints_the_table_and_writes_one_small_png_per_trace(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The whole command on one trace (the other tests check every trace's figures through its functions):
    the table, the noisy levels' table, the capacity table and the plots."""
    assert bench.main(["--images", str(tmp_path), "--traces", "burst", "--noisy-levels", "4.4"]) == 0
    out = capsys.readouterr().out
    assert "| burst | (c) previous recommended |" in out and "Target," in out and "| noisy |" not in out
    assert "| noisy (level 4.4) |" in out
    pngs = sorted(tmp_path.glob("*.png"))
    assert [p.name for p in pngs] == ["quality-burst.png", "quality-capacity.png"]
    assert "| (c) previous recommended | on | " in out and "Pending replicas without the guard" in out
    for png in pngs:
        assert _png_size(png) == (900, 450)
        assert png.stat().st_size < 150_000


def test_main_reports_a_bad_rules_file_with_its_line(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("rules:\n  - name: x\n    maxReplicas: 0\n")
    assert bench.main(["--rules", str(bad), "--no-plots"]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:" in err and "maxReplicas" in err


def test_noisy_levels_back_the_readme_on_where_a_fixed_count_fits() -> None:
    """docs/benchmarks.md: at 3.6 (c) is the cheaper one; at 4.4, where (a)'s fixed count does not fit the
    load, (a) is overloaded for over three times as long as (c) and further from the fewest possible."""
    fits, misfits = bench.run(bench.configurations()[:3], bench.noisy_levels([3.6, 4.4]), ReplaySettings())
    assert "| noisy (level 3.6) | 0.98x |" in bench.robustness_table([fits, misfits])
    assert fits.results["c"].figures.gpu_hours < fits.results["a"].figures.gpu_hours
    a, c = misfits.results["a"].figures, misfits.results["c"].figures
    assert a.overloaded_minutes > 3 * c.overloaded_minutes
    assert a.gpu_hours / misfits.bounds["a"].gpu_hours > 1.05


def test_an_unknown_trace_name_is_one_usage_message(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        bench.main(["--no-plots", "--traces", "burst,bursted"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "--traces" in err and "bursted" in err and "Traceback" not in err


@pytest.mark.parametrize("value", ["3,x", "0,4", ""])
def test_noisy_levels_must_be_positive_loads(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        bench.main(["--no-plots", "--noisy-levels", value])
    assert exit_info.value.code == 2
    assert "--noisy-levels" in capsys.readouterr().err


@pytest.fixture(scope="module")
def capacity() -> list[capacity_quality.CapacityOutcome]:
    configs = bench.configurations()[:3]
    return [capacity_quality.run_capacity(c.label, c.rule, ReplaySettings()) for c in configs]


def test_on_a_pool_short_of_gpus_the_guard_ends_pending_replicas_at_no_more_overload(
        capacity: list[capacity_quality.CapacityOutcome]) -> None:
    """docs/benchmarks.md: every configuration leaves up to 4 replicas Pending without the guard, none with
    it, overloaded exactly as long (the pool, not the policy, limits what is served)."""
    for outcome in capacity:
        off, on = outcome.off.figures, outcome.on.figures
        assert outcome.guard_helps, capacity_quality.capacity_verdict([outcome])
        assert off.peak_pending == 4 and off.pending_replica_minutes > 150
        assert on.overloaded_minutes == off.overloaded_minutes
        assert on.gpu_hours <= off.gpu_hours
        assert on.capacity_limited_syncs > 100 and off.capacity_limited_syncs == 0
        assert max(s.gpus_held + s.pending for s in outcome.on.samples) <= outcome.pool.gpu_count


def test_the_capacity_table_has_a_guard_off_and_on_row_per_configuration(
        capacity: list[capacity_quality.CapacityOutcome]) -> None:
    table = capacity_quality.capacity_table(capacity).splitlines()
    assert len(table) == 2 + 2 * 3
    assert all(row.count("|") == 10 for row in table)
    assert table[2].startswith("| (a) users' HPA | off |")
    assert table[7].startswith("| (c) previous recommended | on |")


def test_the_overload_budget_is_a_dial_from_fewer_gpu_hours_to_fewer_overloaded_minutes() -> None:
    """docs/benchmarks.md: a tight budget buys overloaded minutes with GPU-hours; a loose one costs none."""
    table = bench.budget_dial(bench.configurations()[3].rule, [sudden_burst()], [1.0, 20.0], 120,
                              ReplaySettings()).splitlines()
    none, tight, loose = (row.split("|") for row in table[2:])
    assert float(tight[5]) < float(none[5]) and float(tight[3]) > float(none[3])
    assert (loose[3], loose[5]) == (none[3], none[5])


@pytest.mark.parametrize("value", ["0", "51", "1,x"])
def test_budgets_must_be_shares_of_minutes(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        bench.main(["--no-plots", "--budgets", value])
    assert "--budgets" in capsys.readouterr().err


def test_a_daily_forecast_scales_ahead_of_the_days_rises_for_a_few_percent_more_gpu_hours() -> None:
    """docs/benchmarks.md, on the daily curve compressed into 8 hours (the season the rule is told) and played
    after another draw of it: with a 300 s lead (d) plus the forecast is never overloaded, where (c) is for
    over ten minutes, at under 5 % more GPU-hours."""
    day = 8 * 3_600.0
    _, c, _, _, forecast, _ = bench.forecast_table(
        bench.configurations()[2].rule, bench.configurations()[3].rule,
        [(daily(period_seconds=day), daily(period_seconds=day, seed=12))], ReplaySettings()).splitlines()[1:]
    c_cells, f_cells = c.split("|"), forecast.split("|")
    assert "lead 300 s" in f_cells[2] and float(c_cells[5]) > 10
    assert float(f_cells[5]) == 0.0 and float(f_cells[3]) <= 1.05 * float(c_cells[3])


def test_the_held_out_traces_are_other_draws_and_timings_than_the_training_ones() -> None:
    """docs/benchmarks.md, held-out traces: none is a training trace, and the held-out day's bursts come at
    other hours than the training day's (which repeat at the same hours every draw)."""
    training, held = benchmark_traces(), held_out_traces()
    assert not {t.name for t in training} & {t.name for t in held}
    assert {t.name for t in held} == {"steady-2", "daily-2", "step-2", "ramp-2", "noisy-2", "bursty-2"}
    day = next(t for t in held if t.name == "daily-2")
    assert {round(b.start * 24, 1) for b in HELD_OUT_BURSTS}.isdisjoint(
        {round(b.start * 24, 1) for b in DEFAULT_BURSTS})
    training_burst, held_out_burst = 10.6 * 3_600.0, 8.1 * 3_600.0
    assert daily()(training_burst) > day(training_burst) + 1.5
    assert day(held_out_burst) > daily()(held_out_burst) + 1.5


def test_the_recommended_example_is_the_held_out_benchmarks_pick() -> None:
    """examples/gpu-inference-rules.yaml is the candidate benchmarks.held_out picks on the training traces
    (the pick itself is benchmark-sized work: docs/benchmarks.md gives its figures)."""
    shipped = load_rules(ROOT / "examples" / "gpu-inference-rules.yaml").rules[0]
    [pick] = [c for c in held_out.candidates()
              if c.label == "target 9, up in one sync, panic 15s/110%, down 120s"]
    assert held_out.same_settings(shipped, pick.rule)
    assert not held_out.same_settings(shipped, bench.configurations()[2].rule)


def test_after_a_step_the_recommended_example_has_enough_replicas_ready_within_150_seconds() -> None:
    """docs/benchmarks.md: after 2.5 -> 7 GPUs' worth with a 120 s start-up, enough replicas are ready after
    135 s with the recommended example, 225 s with the previous one, 180 s with (d)."""
    settings = ReplaySettings()
    shipped = load_rules(ROOT / "examples" / "gpu-inference-rules.yaml").rules[0]
    _, _, c, d = (config.rule for config in bench.configurations())
    assert held_out.step_ready(shipped, settings) == 135.0 <= held_out.STEP_READY_BAR_SECONDS
    assert (held_out.step_ready(c, settings), held_out.step_ready(d, settings)) == (225.0, 180.0)


def test_on_the_short_held_out_traces_the_recommended_example_is_as_docs_say() -> None:
    """docs/benchmarks.md, held-out traces: against (c), the recommended example halves the overload on ramp-2
    for at most 1.01x the GPU-hours, and on step-2 (a single step) stays above the floor of any reactive
    policy, 2.0 of (c)'s 3.5 minutes, for fewer GPU-hours. (The day-long traces are benchmark-sized work.)"""
    settings = ReplaySettings()
    shipped = load_rules(ROOT / "examples" / "gpu-inference-rules.yaml").rules[0]
    c = bench.configurations()[2].rule
    by_name = {t.name: t for t in held_out_traces()}
    ramp_c, ramp = (replay(rule, by_name["ramp-2"], settings).figures for rule in (c, shipped))
    assert ramp.overloaded_minutes <= ramp_c.overloaded_minutes / 2
    assert ramp.gpu_hours <= 1.01 * ramp_c.gpu_hours
    step_c, step = (replay(rule, by_name["step-2"], settings).figures for rule in (c, shipped))
    assert step_c.overloaded_minutes == 3.5 and 2.0 < step.overloaded_minutes < step_c.overloaded_minutes
    assert step.gpu_hours < step_c.gpu_hours


def test_held_out_and_traces_are_one_usage_message(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        bench.main(["--no-plots", "--held-out", "--traces", "burst"])
    assert exit_info.value.code == 2
    assert "--held-out" in capsys.readouterr().err
