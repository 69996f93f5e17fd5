"""What `gpu-autoscaler tune` computes, as pure functions: the candidate settings, their scores (each one
replayed as if it had run instead, `counterfactual`), the Pareto table, the pick and its check on a held-out
day, and the rules-file diff.

Candidates vary both sides: the scale-down window and policy with the targets, and, on the current scale-down,
the scale-up window and tolerance, panic mode and an overload budget; a scale-up that reacts within one
sync with headroom and short scale-down windows; and a daily forecast on the rule as it is. The pick is the
fewest GPU-hours at no more overloaded minutes than the user's budget (by default the current rule's). With
more than two days of history it is chosen on all but the last day and checked on that day: if it is worse
there than the current rule (more overloaded minutes than both the current rule and the budget allow, or
more GPU-hours for no fewer overloaded minutes), the current rule is kept and the report says why.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Sequence
from dataclasses import dataclass

from autoscaler.config.panic import with_panic_queries
from autoscaler.planning.counterfactual import HistoryStep, ReplaySetup, Scored, score_ranges
from autoscaler.planning.rules_edit import edited_rule
from autoscaler.policy import Rule
from autoscaler.policy.spec import Forecast, OverloadBudget, Panic, ScalingPolicy

__all__ = ["Candidate", "HeldOut", "HistoryCoverage", "HistoryStep", "Recommendation", "ReplaySetup", "Score",
           "candidates", "coverage", "pareto", "recommend", "rules_diff", "tuned_fields"]

DOWN_WINDOWS = (0, 60, 300, 900, 1800)
"""scaleDown.stabilizationWindowSeconds tried (plus the rule's own)."""
TARGET_FACTORS = (0.9, 1.0, 1.1)
"""Each metric's target times these (targets above the current one trade headroom for GPU-hours)."""
UP_WINDOWS = (0, 60)
"""scaleUp.stabilizationWindowSeconds tried (plus the rule's own)."""
UP_TOLERANCES = (0.02,)
"""scaleUp.tolerance tried (plus the rule's own): a small one starts a replica before the others saturate."""
PANIC = Panic(window_seconds=30, threshold_percent=110.0)
"""The panic mode tried (the benchmark's configuration (d))."""
ONE_SYNC_UP = (ScalingPolicy("Percent", 900, 15),)
"""The scale-up policy of the candidates that react within one sync: every replica asked for, at once."""
ONE_SYNC_PANIC = Panic(window_seconds=15, threshold_percent=110.0)
"""Their panic mode: the rate over the last 15 s, read at the next sync after a step."""
ONE_SYNC_TARGET_FACTORS = (0.9, 1.0)
ONE_SYNC_DOWN_WINDOWS = (60, 120)
"""Headroom (targets x0.9) paired with short scale-down windows, on the scale-up that reacts within a sync
(docs/benchmarks.md, held-out traces)."""
BUDGET_PERCENTS = (10.0,)
"""overloadBudget.percentOfMinutes tried, with the start-up time as startupSeconds."""
DAY_SECONDS = 86_400.0
FORECAST_LEAD_SECONDS = 300
"""The forecast tried leads by this much at least (the benchmark's best lead on the daily curve)."""
DEFAULT_STARTUP_SECONDS = 120
"""The budget's startupSeconds when neither --startup-seconds nor the rule's own budget gives one."""
MIN_HISTORY_SECONDS = DAY_SECONDS
"""tune recommends from at least a day of history (its first sample a day before the range's end): a day
holds the daily curve every candidate is judged on; less is a guess from one part of it."""
MIN_SAMPLED_FRACTION = 0.5
"""... with a sample at half the steps since the first one or more: one sample in 121 steps replays 120
failed queries, which no candidate can be judged on."""


@dataclass(frozen=True, slots=True)
class HistoryCoverage:
    """What a history holds: the steps since its first sample, those with a sample of some metric, the
    seconds from the first sample to the end."""

    steps: int
    sampled: int
    seconds: float

    @property
    def enough(self) -> bool:
        return self.seconds >= MIN_HISTORY_SECONDS and self.sampled >= MIN_SAMPLED_FRACTION * self.steps

    def describe(self) -> str:
        share = 100 * self.sampled / self.steps
        return (f"samples at {self.sampled:,} of {self.steps:,} steps ({share:.0f} %), the first "
                f"{self.seconds / 3600:.1f} h before the end")


def coverage(history: Sequence[HistoryStep], step: float) -> HistoryCoverage:
    """How much of `history` (steps from the first sample to the range's end) has samples."""
    return HistoryCoverage(len(history), sum(1 for s in history if s.sampled), (len(history) - 1) * step)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A rule variant: `label` describes its changes from the current rule (empty for the current rule)."""

    label: str
    rule: Rule


@dataclass(frozen=True, slots=True)
class Score:
    candidate: Candidate
    gpu_hours: float
    overloaded_minutes: float
    scale_changes: int


@dataclass(frozen=True, slots=True)
class HeldOut:
    """The pick and the current rule on the last day, after a pick chosen on the days before."""

    pick: Scored
    current: Scored
    kept_current: bool


@dataclass(frozen=True, slots=True)
class Recommendation:
    """The scores (the current rule first), the best one (None: keep the current rule), the budget of
    overloaded minutes the pick had to meet, and the held-out check (None: under two days of history)."""

    scores: tuple[Score, ...]
    best: Score | None
    budget_minutes: float
    held_out: HeldOut | None = None

    @property
    def current(self) -> Score:
        return self.scores[0]


def candidates(rule: Rule, startup_seconds: float = 0.0) -> list[Candidate]:
    """The current rule first, then the scale-down grid (window x policy x target factor) and the scale-up
    grid (window x tolerance x panic x overload budget); duplicates dropped."""
    out = [Candidate("", rule)]
    seen = {rule}

    def add(label: str, variant: Rule) -> None:
        if variant not in seen:
            seen.add(variant)
            out.append(Candidate(label, variant))

    down = rule.behavior.scale_down
    fast = (ScalingPolicy("Percent", 100, 15),)
    policies = [("", down.policies)] + ([("scaleDown 100%/15s", fast)] if fast != down.policies else [])
    for window in sorted({*DOWN_WINDOWS, down.stabilization_window_seconds}):
        for policy_label, policy in policies:
            for factor in TARGET_FACTORS:
                scale_down = dataclasses.replace(down, stabilization_window_seconds=window, policies=policy)
                metrics = tuple(dataclasses.replace(m, target=_rounded(m.target * factor))
                                for m in rule.metrics)
                behavior = dataclasses.replace(rule.behavior, scale_down=scale_down)
                parts = [f"scaleDown window {window}s"] if window != down.stabilization_window_seconds else []
                parts += [policy_label] if policy_label else []
                parts += [f"targets x{factor:g}"] if factor != 1.0 else []
                add(", ".join(parts), dataclasses.replace(rule, metrics=metrics, behavior=behavior))
    for label, variant in _scale_up_side(rule, startup_seconds):
        add(label, variant)
    for label, variant in _one_sync_side(rule):
        add(label, variant)
    if rule.forecast is None:  # a daily forecast on the rule as it is: it needs a day of the history to learn
        lead = max(round(startup_seconds), FORECAST_LEAD_SECONDS)
        add(f"forecast 1d, lead {lead}s", dataclasses.replace(rule, forecast=Forecast(86_400, lead)))
    return out


def _scale_up_side(rule: Rule, startup_seconds: float) -> list[tuple[str, Rule]]:
    up = rule.behavior.scale_up
    own = rule.overload_budget
    startup = round(startup_seconds) or (own.startup_seconds if own is not None else DEFAULT_STARTUP_SECONDS)
    budgets: list[tuple[str, OverloadBudget | None]] = [("", rule.overload_budget)]
    budgets += [(f"overloadBudget {p:g}%", OverloadBudget(p, startup)) for p in BUDGET_PERCENTS
                if rule.overload_budget != OverloadBudget(p, startup)]
    panics: list[tuple[str, Panic | None]] = [("", rule.behavior.panic)]
    panics += [("panic 30s/110%", PANIC)] if rule.behavior.panic != PANIC else []
    variants = []
    for window in sorted({*UP_WINDOWS, up.stabilization_window_seconds}):
        for tolerance in sorted({*UP_TOLERANCES, up.tolerance}):
            for panic_label, panic in panics:
                for budget_label, budget in budgets:
                    scale_up = dataclasses.replace(up, stabilization_window_seconds=window,
                                                   tolerance=tolerance)
                    behavior = dataclasses.replace(rule.behavior, scale_up=scale_up, panic=panic)
                    parts = [f"scaleUp window {window}s"] if window != up.stabilization_window_seconds else []
                    parts += [f"scaleUp tolerance {tolerance:g}"] if tolerance != up.tolerance else []
                    parts += [label for label in (panic_label, budget_label) if label]
                    variant = dataclasses.replace(rule, behavior=behavior, overload_budget=budget,
                                                  metrics=with_panic_queries(rule.metrics, panic))
                    variants.append((", ".join(parts), variant))
    return variants


def _one_sync_side(rule: Rule) -> list[tuple[str, Rule]]:
    """A scale-up that asks for every replica within one sync of a step (no window, panic on 15 s, no cap),
    with each target factor and short scale-down window: what reacts at once and releases soon."""
    up = dataclasses.replace(rule.behavior.scale_up, stabilization_window_seconds=0, policies=ONE_SYNC_UP,
                             select_policy="Max")
    variants = []
    for factor in ONE_SYNC_TARGET_FACTORS:
        metrics = tuple(dataclasses.replace(m, target=_rounded(m.target * factor)) for m in rule.metrics)
        for window in ONE_SYNC_DOWN_WINDOWS:
            down = dataclasses.replace(rule.behavior.scale_down, stabilization_window_seconds=window)
            behavior = dataclasses.replace(rule.behavior, scale_up=up, scale_down=down, panic=ONE_SYNC_PANIC)
            label = f"scaleUp in one sync (900%/15s, panic 15s/110%), scaleDown window {window}s"
            label += f", targets x{factor:g}" if factor != 1.0 else ""
            variants.append((label, dataclasses.replace(rule, behavior=behavior,
                                                        metrics=with_panic_queries(metrics, ONE_SYNC_PANIC))))
    return variants


def _rounded(value: float) -> float:
    return float(f"{value:.4g}")


def pareto(scores: Sequence[Score]) -> list[Score]:
    """The scores no other beats on both GPU-hours and overloaded minutes, cheapest first."""
    front: list[Score] = []
    for s in sorted(scores, key=lambda s: (s.gpu_hours, s.overloaded_minutes, s.scale_changes)):
        if not front or s.overloaded_minutes < front[-1].overloaded_minutes:
            front.append(s)
    return front


def recommend(rule: Rule, history: Sequence[HistoryStep], setup: ReplaySetup,
              max_overloaded_minutes: float | None = None) -> Recommendation:
    """Every candidate scored on the whole history; the pick chosen on all but the last day when the history
    is longer than two days, and checked on that day (see the module docstring). Each candidate is replayed
    once: the days before the last are the start of the same replay."""
    found = candidates(rule, setup.startup_seconds)
    day = _last_day(history)
    ranges = [range(len(history))] + ([range(day.start), day] if day is not None else [])
    scored = [score_ranges(rule, c.rule, history, setup, ranges) for c in found]
    scores = tuple(Score(c, *_figures(s[0])) for c, s in zip(found, scored, strict=True))
    budget = scores[0].overloaded_minutes if max_overloaded_minutes is None else max_overloaded_minutes
    if day is None:
        return Recommendation(scores, _pick(scores, budget), budget)
    train = [Score(c, *_figures(s[1])) for c, s in zip(found, scored, strict=True)]
    train_budget = (train[0].overloaded_minutes if max_overloaded_minutes is None
                    else max_overloaded_minutes * day.start / len(history))
    pick = _pick(train, train_budget)
    if pick is None:
        return Recommendation(scores, None, budget)
    index = next(i for i, c in enumerate(found) if c == pick.candidate)
    on_day, current_day = scored[index][2], scored[0][2]
    allowed = max(current_day.overloaded_minutes, budget * len(day) / len(history))
    worse = (on_day.overloaded_minutes > allowed + 1e-9
             or (on_day.gpu_hours > current_day.gpu_hours
                 and on_day.overloaded_minutes >= current_day.overloaded_minutes))
    held_out = HeldOut(on_day, current_day, worse)
    return Recommendation(scores, None if worse else scores[index], budget, held_out)


def _figures(scored: Scored) -> tuple[float, float, int]:
    return scored.gpu_hours, scored.overloaded_minutes, scored.scale_changes


def _pick(scores: Sequence[Score], budget_minutes: float) -> Score | None:
    """The fewest GPU-hours within the budget; not the current rule's own (None: the current is best)."""
    current = scores[0]
    within = [s for s in scores if s.overloaded_minutes <= budget_minutes + 1e-9]
    if not within:
        return None
    best = min(within, key=lambda s: (s.gpu_hours, s.overloaded_minutes, s.candidate.label.count(",")))
    current_fits = current.overloaded_minutes <= budget_minutes + 1e-9
    if best is current or (current_fits and best.gpu_hours >= current.gpu_hours - 1e-9):
        return None
    return best


def _last_day(history: Sequence[HistoryStep]) -> range | None:
    """The steps of the last day, when the history holds more than two days."""
    if not history or history[-1].t - history[0].t <= 2 * DAY_SECONDS:
        return None
    cut = history[-1].t - DAY_SECONDS
    first = next(i for i, step in enumerate(history) if step.t > cut)
    return range(first, len(history))


def tuned_fields(rule: Rule) -> dict[str, object]:
    """The fields `tune` may change, as they are written in a rules file."""
    down, up = rule.behavior.scale_down, rule.behavior.scale_up
    behavior: dict[str, object] = {
        "scaleUp": {"stabilizationWindowSeconds": up.stabilization_window_seconds, "tolerance": up.tolerance,
                    "policies": [{"type": p.type, "value": p.value, "periodSeconds": p.period_seconds}
                                 for p in up.policies]},
        "scaleDown": {
            "stabilizationWindowSeconds": down.stabilization_window_seconds,
            "policies": [{"type": p.type, "value": p.value, "periodSeconds": p.period_seconds}
                         for p in down.policies],
        },
    }
    panic = rule.behavior.panic
    if panic is not None:
        behavior["panic"] = {"windowSeconds": panic.window_seconds,
                             "thresholdPercent": panic.threshold_percent}
    fields: dict[str, object] = {
        "metrics": [{"name": m.name, "target": int(m.target) if m.target.is_integer() else m.target}
                    for m in rule.metrics],
        "behavior": behavior,
    }
    if rule.overload_budget is not None:
        fields["overloadBudget"] = {"percentOfMinutes": rule.overload_budget.percent_of_minutes,
                                    "startupSeconds": rule.overload_budget.startup_seconds}
    if rule.forecast is not None:
        fields["forecast"] = {"seasonSeconds": rule.forecast.season_seconds,
                              "leadSeconds": rule.forecast.lead_seconds,
                              "lookbackSeasons": rule.forecast.lookback_seasons, "mode": rule.forecast.mode}
    return fields


def rules_diff(path: str, text: str, current: Rule, proposed: Rule) -> str:
    """A patch of the user's rules file `text` (read from `path`) from the current rule to the proposed one:
    a unified diff touching the changed fields' lines only, headed `a/PATH` and `b/PATH` so that `git apply`
    or `patch -p1` applies it from the directory tune ran in."""
    edited = edited_rule(text, current.name, tuned_fields(current), tuned_fields(proposed))
    lines = difflib.unified_diff(text.splitlines(keepends=True), edited.splitlines(keepends=True),
                                 f"a/{path}", f"b/{path}")
    return "".join(line if line.endswith("\n") else f"{line}\n\\ No newline at end of file\n"
                   for line in lines)
