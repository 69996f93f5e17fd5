"""`gpu-autoscaler simulate`: replay a metric trace (CSV) through the engine, as a what-if before deploying.

Each trace row is one sync at time `t`; its result is applied at once (and recorded as a scale event), so the
next row sees it as `current`. Each row goes through the controller's own plan (`autoscaler.planning.plan`),
not the bare engine, so a target at zero and the fallback behave as they will in the cluster. The whole trace
is read and validated (`trace_csv`) before the first output line, so bad input never leaves half a result on
stdout. A whole trace is replayed at once by `trace_replay` where it covers the rule.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import TextIO

from autoscaler.cli.args import add_rules_argument, rules_file
from autoscaler.config.rules import RuleSet, load_rules
from autoscaler.errors import UsageError
from autoscaler.planning.counterfactual import trace_overloaded_minutes
from autoscaler.planning.plan import Plan, count_all_failed, plan_replicas
from autoscaler.planning.trace_csv import Trace, TraceRow, read_trace
from autoscaler.planning.trace_replay import ReplayedTrace, covers, replay_columns
from autoscaler.policy import MAX_REPLICAS, Rule, RuleHistory
from plumbing.cli import number, whole_number
from plumbing.display import aligned
from plumbing.output import CSV, FORMATS, JSON, WIDE, add_output_arguments, document

HELP = "replay a metric trace (CSV) through a rule and print the replica count after each sync"
OUTPUT_HEADER = ("t", "desired", "proposed", "reason")
"""`desired` is what it means everywhere (the demo, timeline.csv, `status`, the decision lines): the count the
controller sets after that sync; `proposed` is the engine's raw count before stabilization and limits."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_rules_argument(parser, metavar="TRACE", positional_help=(
        "CSV with a header 't,<metric name>,...' and optionally 'capacity' (free GPUs, for a rule with a "
        "capacity guard); an empty cell is a failed query, or 0 for a metric with whenEmpty: zero (the older "
        "form `simulate RULES TRACE` also works)"))
    parser.add_argument("--rule", help="the rule to replay (required when the file has more than one)")
    parser.add_argument("--replicas", type=whole_number(0, MAX_REPLICAS, what="a replica count"), metavar="N",
                        help="replica count before the first sync (default: the rule's minReplicas)")
    parser.add_argument("--start", type=_instant, metavar="ISO8601",
                        help="wall-clock time of t=0 for the schedules, e.g. 2026-03-02T08:00:00+01:00 "
                        "(no offset: UTC; default: t is Unix time)")
    parser.add_argument("--startup-seconds", type=number(0, 3600, what="seconds"), metavar="SECONDS",
                        help="also print to stderr the replay's overloaded minutes, a new replica serving "
                             "this long after it was asked for (counted as tune and the benchmarks count "
                             "them: docs/rules.md#overloaded-minutes)")
    add_output_arguments(parser, FORMATS, default=CSV,
                         what=": wide adds the trace's metric columns, json is one document (docs/rules.md)")


def run(args: argparse.Namespace) -> int:
    args.rules, (args.trace,) = rules_file(args, "simulate", after=("TRACE",))
    ruleset = load_rules(args.rules)
    rule = select_rule(ruleset, args.rule)
    trace = read_trace(args.trace, rule)
    check_calendar(trace, args.trace, args.start)
    start = rule.min_replicas if args.replicas is None else args.replicas
    replayed = replay_trace(rule, trace, start, args.start or 0.0)
    if args.output == CSV:
        write_output(sys.stdout, trace, replayed, headers=not args.no_headers)
    elif args.output == JSON:
        print(json.dumps(as_json(rule, trace, replayed), indent=2))
    else:
        print(as_table(rule, trace, replayed, wide=args.output == WIDE, headers=not args.no_headers))
    if args.startup_seconds is not None:
        minutes = trace_overloaded_minutes(rule, trace.times, trace.values, replayed.replicas, start,
                                           args.startup_seconds)
        print(f"overloaded minutes: {minutes:.1f} (start-up {args.startup_seconds:g}s; "
              "docs/rules.md#overloaded-minutes)", file=sys.stderr)
    return 0


LATEST_UNIX_SECONDS = 253_402_300_799.0
"""9999-12-31T23:59:59Z: the last instant a schedule's calendar (datetime) can name."""


def check_calendar(trace: Trace, path: str, start: float | None) -> None:
    """Every row's wall-clock time (`--start` + t) is a date a schedule can be evaluated at: a trace of up to
    ±1e10 s after a --start in 9998 is past the year 9999 (a ValueError deep in the replay, before)."""
    if not trace.times or (start or 0.0) + trace.times[-1] <= LATEST_UNIX_SECONDS:
        return
    index = next(i for i, t in enumerate(trace.times) if (start or 0.0) + t > LATEST_UNIX_SECONDS)
    when = "--start" if start else "the Unix epoch (no --start)"
    raise UsageError(f"{path}: t: the row at t={trace.t_text[index]} is past 9999-12-31T23:59:59Z when t=0 "
                     f"is {when}: give an earlier --start or a shorter trace")


def _instant(text: str) -> float:
    """An ISO 8601 date-time as a Unix time; without an offset it is UTC, never the machine's zone (a replay
    must not depend on where it runs)."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an ISO 8601 date-time such as 2026-03-02T08:00:00+01:00 (got {text!r})") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:  # a trace's t is added to it: room for a year; 9999-12-31T23:00-05:00 overflows in UTC
        year = moment.astimezone(UTC).year
    except OverflowError:
        year = 10_000
    if not 1970 <= year <= 9998:
        raise argparse.ArgumentTypeError(f"expected a date-time from 1970 to 9998 (got {text[:40]!r})")
    return moment.timestamp()


def select_rule(ruleset: RuleSet, name: str | None) -> Rule:
    """The rule to replay: `name`, or the only rule of the file."""
    if name is None:
        if len(ruleset.rules) == 1:
            return ruleset.rules[0]
        raise UsageError(f"{ruleset.path}: --rule: required, the file has {len(ruleset.rules)} rules "
                         f"({', '.join(ruleset.names)})")
    try:
        return ruleset.get(name)
    except KeyError:
        raise UsageError(f"{ruleset.path}: --rule: no rule named {name!r} "
                         f"(rules: {', '.join(ruleset.names)})") from None


def replay(rule: Rule, rows: Sequence[TraceRow], replicas: int, start: float = 0.0,
           ) -> Iterator[tuple[TraceRow, Plan]]:
    """Each row's plan, applied at once: the change is recorded as a scale event and becomes `current`.

    Row `t` happens at Unix time `start + t` (`--start`), which is where the rule's schedules are evaluated.
    A `capacity` column feeds the capacity guard the free GPUs of each row (no Pending replicas: a trace has
    no scheduler; an empty cell is a failed capacity query, which limits nothing).

    The plan is the controller's own (`plan_replicas`: a target at zero with minReplicas > 0 is held, the
    fallback counts consecutive all-failed rows), so the replay predicts what the controller does.
    """
    history = RuleHistory()
    current = replicas
    all_failed = 0
    for row in rows:
        now = start + row.t
        all_failed = count_all_failed(all_failed, row.observations)
        plan = plan_replicas(
            rule=rule,
            current=current,
            observations=row.observations,
            history=history,
            all_failed_syncs=all_failed,
            now=now,
            capacity=row.capacity,
        )
        history = plan.history.with_scale(now, current, plan.replicas)
        current = plan.replicas
        yield row, plan


def replay_trace(rule: Rule, trace: Trace, replicas: int, start: float = 0.0) -> ReplayedTrace:
    """Every row's count, raw desired count and reason, as `replay` gives them.

    `trace_replay` computes them for the whole trace at once (a few µs per row) wherever it covers the rule;
    a rule with schedules or scale to zero, or a trace with a capacity column, goes through `replay` row by
    row. Both give the same results (tests/unit/autoscaler/planning/test_trace_replay.py).
    """
    if trace.capacity is None and covers(rule):
        times = [start + t for t in trace.times] if start else trace.times
        return replay_columns(rule, times, trace.values, replicas)
    replayed = ReplayedTrace([], [], [])
    for _, plan in replay(rule, trace.rows(rule), replicas, start):
        replayed.replicas.append(plan.replicas)
        replayed.desired.append(plan.desired_raw)
        replayed.reasons.append(plan.reason)
    return replayed


def as_json(rule: Rule, trace: Trace, replayed: ReplayedTrace) -> dict[str, object]:
    """`simulate -o json` (docs/rules.md): the rule and one entry per trace row."""
    rows = [{"t": t, "desired": replicas, "proposed": desired, "reason": str(reason)}
            for t, replicas, desired, reason in zip(trace.times, replayed.replicas, replayed.desired,
                                                    replayed.reasons, strict=True)]
    return document(rule=rule.name, rows=rows)


def as_table(rule: Rule, trace: Trace, replayed: ReplayedTrace, wide: bool = False, headers: bool = True,
             ) -> str:
    """The rows aligned; `wide` adds the trace's metric (and capacity) columns after t."""
    header: list[str] = ["T"]
    inputs: list[list[float | None]] = []
    if wide:
        header += [m.name.upper() for m in rule.metrics]
        inputs += trace.values
        if trace.capacity is not None:
            header.append("CAPACITY")
            inputs.append(trace.capacity)
    header += [name.upper() for name in OUTPUT_HEADER[1:]]
    rows = [[t, *("-" if column[i] is None else f"{column[i]:g}" for column in inputs), replicas,
             "-" if desired is None else desired, reason]
            for i, (t, replicas, desired, reason) in enumerate(zip(trace.t_text, replayed.replicas,
                                                                   replayed.desired, replayed.reasons,
                                                                   strict=True))]
    return aligned(header, rows, headers)


def write_output(out: TextIO, trace: Trace, replayed: ReplayedTrace, headers: bool = True) -> None:
    """The output CSV, written to `out` at once: a row per write to a pipe costs more than the replay."""
    buffer = io.StringIO()
    _write_rows(buffer, trace, replayed, headers)
    out.write(buffer.getvalue())


def _write_rows(out: TextIO, trace: Trace, replayed: ReplayedTrace, headers: bool = True) -> None:
    writer = csv.writer(out, lineterminator="\n")
    if headers:
        writer.writerow(OUTPUT_HEADER)
    desired = ["" if count is None else count for count in replayed.desired]
    # a Reason is a StrEnum: written as its value
    writer.writerows(zip(trace.t_text, replayed.replicas, desired, replayed.reasons, strict=True))
