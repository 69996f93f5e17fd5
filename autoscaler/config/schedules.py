"""Cron schedules: their rules-file fields, the windows open at a Unix time and the bounds they put in effect.

Kept outside `autoscaler.policy`: evaluating cron needs calendars and time zones (`croniter`, `zoneinfo`,
`datetime`), which the engine's purity contract forbids. Still pure: no clock is read, `now` is an argument,
so the controller (wall clock), `simulate --start` and tests get the same answer for the same instant.

Daylight-saving changes: the most recent fire time is found on a timezone-aware datetime and every comparison
is made on Unix timestamps, so a window of 36,000 s lasts 36,000 real seconds even across a clock change.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from croniter import CroniterBadDateError, CroniterError, croniter
from yaml.nodes import Node

from autoscaler.policy.decision import MAX_REPLICAS
from autoscaler.policy.spec import Rule, Schedule
from plumbing.yamlnodes import NodeReader, line_of

__all__ = ["ScheduleBounds", "apply_schedules", "cron_problem", "open_bounds", "parse_schedules",
           "timezone_problem", "window_start"]

MAX_DURATION_SECONDS = 31 * 86_400
"""The longest month: a monthly window may cover its month; a longer one would never close."""
DEFAULT_TIMEZONE = "UTC"
_PROBE = datetime(2000, 1, 1, tzinfo=UTC)  # a fixed instant to prove an expression ever fires


@dataclass(frozen=True, slots=True)
class ScheduleBounds:
    """The bounds in effect while at least one window is open, and the windows that set them."""

    min_replicas: int
    max_replicas: int | None
    min_from: str
    """'schedules[0] ('0 9 * * 1-5' Europe/Berlin, open since 2026-03-02T09:00:00+01:00)'."""
    max_from: str | None


_RANDOM_TOKEN = re.compile(r"[RrHh]")
"""croniter's `R` (random) and `H` (hashed) fields; no month or day name starts with either letter."""
MAX_SCHEDULES_PER_RULE = 32
"""Windows of one rule: a week of hourly windows is 168 cron lines too many; every sync evaluates them all."""
MAX_SCHEDULES_PER_FILE = 256
"""Windows of all rules: one sync evaluates them all, ~0.3 ms each (croniter), so 256 cost ~80 ms a sync,
half of a 1,000-rule sync's queries; 992 cost 320 ms. `simulate` evaluates them on every row."""


def cron_problem(expression: str) -> str | None:
    """Why `expression` is not a usable 5-field cron expression, or None.

    6/7-field forms (seconds, years) and `@daily` aliases are refused: the five fields are what every cron
    user reads the same way, and a window's unit is its duration anyway.
    """
    fields = expression.split()
    if len(fields) != 5:
        return (f"expected a 5-field cron expression 'minute hour day-of-month month day-of-week', "
                f"e.g. '0 9 * * 1-5' (got {len(fields)} field(s) in {expression!r})")
    if any(_RANDOM_TOKEN.match(token) for field in fields for token in re.split(r"[,/\-]", field)):
        return (f"{expression!r} has a random or hashed field (R, H): it would open at another time on every "
                "run, so replays and the controller would disagree; write the minute and hour")
    try:
        croniter(expression, _PROBE).get_next(datetime)
    except CroniterBadDateError:
        return f"{expression!r} never fires (a date that does not exist, such as 30 February)"
    except CroniterError as exc:  # a bad field: 61, a word
        return f"not a valid cron expression {expression!r}: {exc}"
    return None


def timezone_problem(name: str) -> str | None:
    """Why `name` is not an IANA time zone this process knows (tzdata ships them), or None.

    Only a key of the time zone database is one: `Europe` (a directory of it), a path, 300 characters or an
    empty name is refused here with the same message, never handed to ZoneInfo, which raises
    IsADirectoryError or OSError on those."""
    if name not in _known_zones():
        shown = name if len(name) <= 64 else name[:61] + "..."
        return f"unknown IANA time zone {shown!r} (e.g. UTC, Europe/Berlin, America/New_York)"
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:  # listed but unreadable: a broken tzdata
        return f"time zone {name!r} cannot be loaded: {exc}"
    return None


@functools.cache
def _known_zones() -> frozenset[str]:
    """Every key of the time zone database this process reads (the tzdata package, else the system's)."""
    return frozenset(available_timezones())


def window_start(schedule: Schedule, now: float) -> float:
    """The Unix time of the most recent fire of `schedule` at or before `now` (in its time zone)."""
    zone = ZoneInfo(schedule.timezone)
    local = datetime.fromtimestamp(now, zone)
    before = croniter(schedule.cron, local).get_prev(datetime)
    following = croniter(schedule.cron, before).get_next(datetime)
    fired = following if following.timestamp() <= now else before  # get_prev is strict: a fire exactly
    # at `now` opens its window now.
    again = datetime.fromtimestamp(fired.timestamp(), zone)
    if again.fold == 1:  # the repeated hour of a fall-back: as cron, a time there fires once, the first time
        return again.replace(fold=0).timestamp()
    return fired.timestamp()


def open_bounds(schedules: tuple[Schedule, ...], now: float) -> ScheduleBounds | None:
    """The bounds of the windows open at `now` (None if none is): the largest minimum wins, and the largest
    maximum among the open windows that give one."""
    best_min: tuple[int, str] | None = None
    best_max: tuple[int, str] | None = None
    for index, schedule in enumerate(schedules):
        start = window_start(schedule, now)
        if now >= start + schedule.duration_seconds:
            continue
        since = datetime.fromtimestamp(start, ZoneInfo(schedule.timezone)).isoformat()
        label = f"schedules[{index}] ({schedule}, open since {since})"
        if best_min is None or schedule.min_replicas > best_min[0]:
            best_min = (schedule.min_replicas, label)
        if schedule.max_replicas is not None and (best_max is None or schedule.max_replicas > best_max[0]):
            best_max = (schedule.max_replicas, label)
    if best_min is None:
        return None
    return ScheduleBounds(best_min[0], None if best_max is None else best_max[0], best_min[1],
                          None if best_max is None else best_max[1])


def apply_schedules(rule: Rule, now: float) -> tuple[Rule, ScheduleBounds | None]:
    """`rule` with the bounds of its open windows in place of its own; unchanged when none is open.

    The maximum is never below the minimum: an open window's minimum above every given maximum (or the
    rule's) raises the maximum to it, so the minimum a schedule asks for is what it gets.
    """
    if not rule.schedules:
        return rule, None
    bounds = open_bounds(rule.schedules, now)
    if bounds is None:
        return rule, None
    max_replicas = rule.max_replicas if bounds.max_replicas is None else bounds.max_replicas
    max_replicas = max(max_replicas, bounds.min_replicas)
    return dataclasses.replace(rule, min_replicas=bounds.min_replicas, max_replicas=max_replicas), bounds


_SCHEDULE_FIELDS = {"cron", "timezone", "durationSeconds", "minReplicas", "maxReplicas"}


def parse_schedules(reader: NodeReader, node: Node, where: str, rule_max: int | None,
                    ) -> tuple[Schedule, ...]:
    """Each window's fields checked on their own line: a cron that parses, a zone that exists, a bounded
    duration, and bounds that fit (a minimum above the rule's maxReplicas needs its own maxReplicas)."""
    items = reader.sequence(node, where)
    if items is None:
        return ()
    if len(items) > MAX_SCHEDULES_PER_RULE:
        reader.problem(line_of(node), where, f"expected at most {MAX_SCHEDULES_PER_RULE} schedules per rule "
                       f"(got {len(items)}); one cron line covers many windows ('0 9 * * 1-5')")
        return ()
    schedules: list[Schedule] = []
    for index, item in enumerate(items):
        at = f"{where}[{index}]"
        fields = reader.mapping(item, at, _SCHEDULE_FIELDS,
                                required=("cron", "durationSeconds", "minReplicas"))
        if fields is None:
            continue
        cron = _checked(reader, fields, "cron", at, cron_problem)
        zone = DEFAULT_TIMEZONE
        if "timezone" in fields:
            zone = _checked(reader, fields, "timezone", at, timezone_problem) or ""
        duration = low = high = None
        if "durationSeconds" in fields:
            duration = reader.integer(fields["durationSeconds"], f"{at}.durationSeconds", low=1,
                                      high=MAX_DURATION_SECONDS)
        if "minReplicas" in fields:
            low = reader.integer(fields["minReplicas"], f"{at}.minReplicas", low=0, high=MAX_REPLICAS)
        if "maxReplicas" in fields:
            high = reader.integer(fields["maxReplicas"], f"{at}.maxReplicas", low=1, high=MAX_REPLICAS)
            if high is not None and low is not None and high < low:
                reader.problem(line_of(fields["maxReplicas"]), f"{at}.maxReplicas",
                               f"expected maxReplicas >= minReplicas (got {high} < {low})")
                high = None
        elif low is not None and rule_max is not None and low > rule_max:
            reader.problem(line_of(fields["minReplicas"]), f"{at}.minReplicas",
                           f"expected minReplicas <= the rule's maxReplicas {rule_max} (got {low}); give the "
                           "schedule its own maxReplicas to go higher")
            low = None
        if cron is None or not zone or duration is None or low is None:
            continue
        if "maxReplicas" in fields and high is None:
            continue
        schedules.append(Schedule(cron, zone, duration, low, high, line_of(item)))
    return tuple(schedules)


def _checked(reader: NodeReader, fields: dict[str, Node], key: str, where: str,
             problem_of: Callable[[str], str | None]) -> str | None:
    """A string field that `problem_of` accepts, else None with its problem reported on its line."""
    value = reader.string(fields[key], f"{where}.{key}") if key in fields else None
    if value is None:
        return None
    problem = problem_of(value.strip())
    if problem is not None:
        reader.problem(line_of(fields[key]), f"{where}.{key}", problem)
        return None
    return value.strip()
