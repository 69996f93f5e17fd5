"""`gpu-autoscaler tune`: fetch a rule's metric history from Prometheus, replay candidate behaviors and
targets through the controller's planning as if each had run instead, print the Pareto table (GPU-hours
against overloaded minutes), and recommend the cheapest one within an overload budget (by default the current
rule's), checked on a held-out last day.

The history is each metric's query over `--since` every `--step` (`range_query.query_range`, through the
endpoint the rule names, with its auth and TLS), plus the replicas the controller recorded
(`gpu_autoscaler_current_replicas` of the rule), needed to rescale an Average metric. Without
`--startup-seconds`, the start-up time is measured from kube-state-metrics' spec and ready counts of the
target (`autoscaler.planning.startup`). The arithmetic lives in `autoscaler.planning` (pure); this module
fetches, prints and exits.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from autoscaler.cli.args import add_prometheus_arguments, prometheus_config
from autoscaler.cli.simulate import select_rule
from autoscaler.config.panic import with_panic_queries
from autoscaler.config.rules import load_rules
from autoscaler.controller.past import recorded_query
from autoscaler.controller.slo_learning import SloLearning, learn
from autoscaler.errors import UsageError
from autoscaler.planning.startup import StartupMeasure, measure_startup, startup_queries
from autoscaler.planning.tuning import (
    MIN_HISTORY_SECONDS,
    MIN_SAMPLED_FRACTION,
    PANIC,
    HistoryStep,
    Recommendation,
    ReplaySetup,
    Score,
    coverage,
    pareto,
    recommend,
    rules_diff,
)
from autoscaler.policy import MetricObservation, Rule
from plumbing.cli import number
from plumbing.output import JSON, TABLE, WIDE, add_output_arguments, document
from plumbing.prometheus.config import PrometheusConfig, PrometheusConfigError, endpoint_names
from plumbing.prometheus.range_query import RangeQueryError, RangeSeries, RangeSettings, query_range
from plumbing.prometheus.session import EndpointSession

HELP = "replay a rule's metric history with candidate behaviors and targets; recommend the cheapest"
MAX_SINCE_SECONDS = 90 * 86400
MIN_STEP_SECONDS = 1.0
MAX_STARTUP_SECONDS = 3600.0
_SPAN = re.compile(r"\s*([0-9]{1,7})\s*(s|m|h|d|w)\s*")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


class EmptyHistory(UsageError):
    """The range holds no sample of the rule's metrics: nothing to replay."""


class TooLittleHistory(UsageError):
    """The range holds too few samples to recommend from (`tuning.HistoryCoverage.enough`)."""


def span(low: float, high: float, zero: bool = False) -> Callable[[str], float]:
    """argparse type of a span such as 7d, 36h, 15s, 90m, 2w, within [low, high] seconds (`zero`: also 0)."""
    def convert(text: str) -> float:
        if zero and text.strip() == "0":
            return 0.0
        match = _SPAN.fullmatch(text)
        value = int(match.group(1)) * _UNIT[match.group(2)] if match else None
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(
                f"expected a duration such as 7d, 36h, 90m or 15s, between {low:g}s and {high / 86400:g}d "
                f"(got {text[:40]!r})")
        return float(value)
    return convert


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rules", required=True, metavar="FILE", help="rules file (YAML)")
    parser.add_argument("--rule", help="the rule to tune (required when the file has more than one)")
    parser.add_argument("--since", type=span(60, MAX_SINCE_SECONDS), default=7 * 86400.0, metavar="DURATION",
                        help="how far back to replay, e.g. 7d, 36h (default 7d, at most 90d)")
    parser.add_argument("--step", type=span(MIN_STEP_SECONDS, 3600), default=15.0, metavar="DURATION",
                        help="sync interval of the replay, e.g. 15s, 1m (default 15s)")
    parser.add_argument("--startup-seconds", type=span(0, MAX_STARTUP_SECONDS, zero=True), default=None,
                        metavar="DURATION",
                        help="how long a new replica takes to serve, e.g. 120s, 2m: replicas count as ready "
                             "only after it, in the replay and the score (default: measured from "
                             "kube-state-metrics' spec and ready replicas of the target over the range; 0 "
                             "when nothing can be measured)")
    parser.add_argument("--max-overloaded-minutes", type=number(0, MAX_SINCE_SECONDS / 60, what="minutes"),
                        default=None, metavar="MINUTES",
                        help="the overload budget the pick must meet over the whole range (default: the "
                             "current rule's own overloaded minutes)")
    add_output_arguments(parser, (TABLE, WIDE, JSON), headers=False, json_alias="deprecated",
                         what=": wide lists every candidate, not only the Pareto front; json is one document "
                              "(docs/rules.md)")
    add_prometheus_arguments(parser)


def run(args: argparse.Namespace, out: TextIO | None = None, now: float | None = None) -> int:
    out = out or sys.stdout
    ruleset = load_rules(args.rules)
    rule = select_rule(ruleset, args.rule)
    try:
        config = prometheus_config(args)
    except PrometheusConfigError as exc:
        raise UsageError(f"invalid Prometheus connections:\n{exc}") from exc
    if config is None:
        raise UsageError("gpu-autoscaler tune: --prometheus URL or --prometheus-config FILE is required")
    end = math.floor((time.time() if now is None else now) / args.step) * args.step
    start = end - args.since
    with _session(config, rule) as session:
        history = fetch_history(rule, session, start, end, args.step)
        require_enough(rule, history, args.step, args.since)
        startup = Startup(args.startup_seconds, "--startup-seconds") if args.startup_seconds is not None \
            else measured_startup(rule, session, start, end, args.step)
        slo = learned_slo(rule, session, time.time() if now is None else now)
    first = next((s.recorded_replicas for s in history if s.recorded_replicas is not None), None)
    setup = ReplaySetup(args.step, rule.min_replicas if first is None else first, startup.seconds)
    result = recommend(rule, history, setup, args.max_overloaded_minutes)
    diff = rules_diff(args.rules, Path(args.rules).read_text(encoding="utf-8"), rule,
                      result.best.candidate.rule) if result.best else ""
    if args.output == JSON:
        answer = as_json(rule, result, diff, start, end, args.step)
        answer["startup"] = {"seconds": startup.seconds, "source": startup.source}
        if slo is not None:
            answer["slo"] = slo
        json.dump(answer, out, indent=2)
        out.write("\n")
    else:
        print(f"start-up {startup.seconds:g}s ({startup.source})", file=out)
        if slo is not None:
            print(slo["note"], file=out)
        write_report(out, rule, result, diff, len(history), args.step, every=args.output == WIDE)
    return 0


class _SessionHistory:
    """The range reader behind the controller's `HistorySource`, on tune's session."""

    def __init__(self, session: EndpointSession) -> None:
        self.session = session

    def run_range(self, query: str, start: float, end: float, step: float) -> RangeSeries:
        return query_range(self.session, query, start, end, step, RangeSettings())


def learned_slo(rule: Rule, session: EndpointSession, now: float) -> dict[str, object] | None:
    """What the controller would learn for the rule's `slo` now (over its own lookback), as tune shows it;
    None without `slo`. A failed read is said, not raised: the replay does not need it."""
    if rule.slo is None:
        return None
    learning = SloLearning()
    try:
        learning.learned = learn(rule, rule.slo, _SessionHistory(session), now)
    except RangeQueryError as exc:
        learning.error = str(exc)
    learned = learning.learned
    return {"metric": rule.slo.learn, "learned_target": learning.target,
            "reason": None if learned is None else str(learned.reason),
            "samples": None if learned is None else learned.samples, "note": learning.note(rule)}


@dataclass(frozen=True, slots=True)
class Startup:
    """The start-up time the replay uses, and where it comes from (said in the report)."""

    seconds: float
    source: str


def measured_startup(rule: Rule, session: EndpointSession, start: float, end: float, step: float,
                     settings: RangeSettings | None = None) -> Startup:
    """The target's start-up measured from kube-state-metrics over the range; 0 with the reason when it
    cannot be (another kind, no such series, no scale-up, a failed query): tune still runs."""
    queries = startup_queries(rule.target)
    if queries is None:
        return Startup(0.0, "not measured: kube-state-metrics has no replica counts of a "
                            f"{rule.target.kind}; give --startup-seconds")
    settings = settings or RangeSettings()
    try:
        spec, ready = (query_range(session, query, start, end, step, settings) for query in queries)
    except RangeQueryError as exc:
        return Startup(0.0, f"not measured: {exc}; give --startup-seconds")
    return startup_of(measure_startup(spec.values, ready.values), rule)


def startup_of(measure: StartupMeasure | None, rule: Rule) -> Startup:
    """What tune replays with and says, given what was measured (capped at the flag's largest value)."""
    if measure is None:
        target = f"{rule.target.kind} {rule.target.namespace}/{rule.target.name}"
        return Startup(0.0, f"not measured: no scale-up of {target} reached its ready count in "
                            "kube-state-metrics' series over the range; give --startup-seconds")
    source = (f"measured: the median of {measure.scale_ups} scale-up(s) in kube-state-metrics, from the spec "
              "count's rise to its ready replicas")
    if measure.seconds > MAX_STARTUP_SECONDS:  # as --startup-seconds allows: an hour is not a start-up
        return Startup(MAX_STARTUP_SECONDS, f"{source}: {measure.seconds:g}s, capped at "
                                            f"{MAX_STARTUP_SECONDS:g}s")
    return Startup(measure.seconds, source)


def _session(config: PrometheusConfig, rule: Rule) -> EndpointSession:
    endpoint = config.endpoints.get(rule.prometheus)
    if endpoint is None:
        raise UsageError(f"rule {rule.name!r} names Prometheus endpoint {rule.prometheus!r}, which is not "
                         f"configured (endpoints: {endpoint_names(config)})")
    return EndpointSession(endpoint)


def fetch_history(rule: Rule, session: EndpointSession, start: float, end: float, step: float,
                  settings: RangeSettings | None = None) -> list[HistoryStep]:
    """Each metric's samples and the recorded replicas over [start, end], as steps; EmptyHistory if none."""
    settings = settings or RangeSettings()
    series = [query_range(session, m.query, start, end, step, settings) for m in rule.metrics]
    needs_recorded = any(m.type == "Average" for m in rule.metrics)
    recorded = query_range(session, recorded_query(rule), start, end, step, settings) if needs_recorded \
        else RangeSeries("", {})
    # What panic reads: each query over the rule's own panic window, else over the panic candidate's.
    shortened = with_panic_queries(rule.metrics, rule.behavior.panic or PANIC)
    short = [_short_series(session, m.panic_query, start, end, step, settings) for m in shortened]
    return to_steps(rule, series, recorded, start, end, step, short)


def _short_series(session: EndpointSession, query: str, start: float, end: float, step: float,
                  settings: RangeSettings) -> RangeSeries | None:
    """A query over the panic window, or None (no query, or a failed one: panic then reads the value, as the
    controller's does when its short query fails; the metric's own query already proved the range works)."""
    if not query:
        return None
    try:
        return query_range(session, query, start, end, step, settings)
    except RangeQueryError:
        return None


def require_enough(rule: Rule, history: Sequence[HistoryStep], step: float, since: float) -> None:
    """TooLittleHistory, saying what there is and what tune needs, unless `history` has enough samples
    (`tuning.MIN_HISTORY_SECONDS`, `tuning.MIN_SAMPLED_FRACTION`) to recommend from."""
    held = coverage(history, step)
    if held.enough:
        return
    hint = (f"--since {since / 3600:g}h is shorter than that: give --since 1d or more"
            if since < MIN_HISTORY_SECONDS else
            "wait until the rule's metrics have a day of samples, or check their queries in Prometheus "
            "(gpu-autoscaler check --rules FILE --prometheus URL)")
    raise TooLittleHistory(
        f"rule {rule.name!r}: too little history to recommend from: {held.describe()}; tune needs a day of "
        f"history or more with samples at {100 * MIN_SAMPLED_FRACTION:.0f} % of its steps or more: {hint}")


def to_steps(rule: Rule, series: list[RangeSeries], recorded: RangeSeries, start: float, end: float,
             step: float, short: Sequence[RangeSeries | None] | None = None) -> list[HistoryStep]:
    """Steps from the first one where any metric has a sample (a number: NaN is none); a step without a
    sample is a failed query (or 0 for `whenEmpty: zero`), as the controller sees it. `short`: per metric,
    its query over the panic window (None: not shortened), the observation's `panic_value` where it has a
    sample."""
    short = short or [None] * len(rule.metrics)
    times = sorted(t for s in series for t, value in s.values.items() if value is not None)
    if not times:
        raise EmptyHistory(f"no sample of rule {rule.name!r}'s metrics between {_iso(start)} and {_iso(end)} "
                           f"({', '.join(m.name for m in rule.metrics)}): nothing to replay")
    steps = []
    t = times[0]
    while t <= end + 1e-6:
        observations = []
        for spec, got, shorter in zip(rule.metrics, series, short, strict=True):
            value = got.values.get(t)
            if value is None and spec.when_empty == "zero" and t not in got.values:
                observations.append(MetricObservation(spec.name, 0.0))
            elif value is None:
                observations.append(MetricObservation(spec.name, None, "no sample in the history"))
            else:
                panic_value = shorter.values.get(t) if shorter is not None else None
                observations.append(MetricObservation(spec.name, value, panic_value=panic_value))
        count = recorded.values.get(t)
        sampled = any(got.values.get(t) is not None for got in series)
        steps.append(HistoryStep(t, tuple(observations), None if count is None else max(0, round(count)),
                                 sampled))
        t += step
    return steps


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def write_report(out: TextIO, rule: Rule, result: Recommendation, diff: str, steps: int, step: float,
                 every: bool = False) -> None:
    """The table (`every`: of every candidate, else of the Pareto front), the held-out check, the pick."""
    which = ("every candidate" if every else
             "the Pareto table (no candidate has both fewer GPU-hours and fewer overloaded minutes)")
    print(f"rule {rule.name}: {steps:,} syncs of {step:g}s replayed, {len(result.scores)} candidates; "
          f"{which}, * the pick:", file=out)
    print(f"{'GPU-hours':>10} {'overloaded min':>15} {'changes':>8}  candidate", file=out)
    front = list(result.scores) if every else pareto(result.scores)
    shown = front + [s for s in (result.current, result.best) if s is not None and s not in front]
    for s in sorted(shown, key=lambda s: (s.gpu_hours, s.overloaded_minutes)):
        mark = "*" if s is result.best else " "
        print(f"{s.gpu_hours:>10.1f} {s.overloaded_minutes:>15.1f} {s.scale_changes:>8} {mark}"
              f"{s.candidate.label or 'current'}", file=out)
    held = result.held_out
    if held is not None:
        verdict = "worse than the current rule there: kept the current rule" if held.kept_current else "ok"
        print(f"held out: chosen on all but the last day; on the last day the pick has "
              f"{held.pick.gpu_hours:.1f} GPU-hours and {held.pick.overloaded_minutes:.1f} overloaded min, "
              f"the current rule {held.current.gpu_hours:.1f} and {held.current.overloaded_minutes:.1f}: "
              f"{verdict}", file=out)
    if result.best is None:
        print(f"the current configuration is kept: no candidate uses fewer GPU-hours within the budget of "
              f"{result.budget_minutes:.1f} overloaded min ({result.current.gpu_hours:.1f} GPU-hours, "
              f"{result.current.overloaded_minutes:.1f} overloaded min)", file=out)
        return
    saved = result.current.gpu_hours - result.best.gpu_hours
    change = f"{saved:.1f} GPU-hours fewer" if saved >= 0 else f"{-saved:.1f} GPU-hours more"
    print(f"recommended: {result.best.candidate.label}: {change} "
          f"({100 * abs(saved) / max(result.current.gpu_hours, 1e-9):.0f} %), "
          f"{result.best.overloaded_minutes:.1f} overloaded min "
          f"(current {result.current.overloaded_minutes:.1f})", file=out)
    out.write(diff)


def _score_json(s: Score) -> dict[str, object]:
    return {"candidate": s.candidate.label or "current", "gpu_hours": s.gpu_hours,
            "overloaded_minutes": s.overloaded_minutes, "scale_changes": s.scale_changes}


def as_json(rule: Rule, result: Recommendation, diff: str, start: float, end: float, step: float,
            ) -> dict[str, object]:
    """`tune -o json` (docs/rules.md)."""
    return document(**{
        "rule": rule.name, "start": _iso(start), "end": _iso(end), "step_seconds": step,
        "current": _score_json(result.current),
        "candidates": [_score_json(s) for s in result.scores],
        "pareto": [_score_json(s) for s in pareto(result.scores)],
        "recommended": _score_json(result.best) if result.best else None,
        "current_is_best": result.best is None,
        "budget_minutes": result.budget_minutes,
        "held_out": None if result.held_out is None else {
            "pick": {"gpu_hours": result.held_out.pick.gpu_hours,
                     "overloaded_minutes": result.held_out.pick.overloaded_minutes},
            "current": {"gpu_hours": result.held_out.current.gpu_hours,
                        "overloaded_minutes": result.held_out.current.overloaded_minutes},
            "kept_current": result.held_out.kept_current,
        },
        "diff": diff,
    })
