"""Before the demo's first sync: bounded waits, each announced, until the rule's queries read what the
scenario's first load really is, and what to say when a query finds nothing the demo serves.

Every target scraped once; every query (the metrics' and the capacity guard's) returning a series, within a
few scrape intervals; the largest range window filled with samples (a rate() Prometheus extrapolates over a
window not yet filled reads a fraction of the real rate). `between` runs before every poll: the demo keeps its
load flowing while it waits.
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence

from autoscaler.policy import MetricSpec, Rule
from demo.replay import query_range_seconds
from demo.world import SimulatedWorld, served_names_in

TICK_SECONDS = 0.25
"""How often the load driver updates the GPUs and the request counter."""
PROGRESS_SECONDS = 3.0
"""The longest the warm-up stays silent while it waits for the first scrapes."""
READY_TIMEOUT_SECONDS = 30.0
"""Bound on Prometheus scraping every target once."""
SERIES_WAIT_SCRAPES = 5
SERIES_WAIT_SLACK_SECONDS = 2.0
"""Once every target was scraped, a query's series appears within two scrapes (rate() needs two samples):
one that returns nothing after this many scrape intervals (plus the slack) selects series the demo lacks."""
WINDOW_WAIT_CAP_SECONDS = 60.0
"""Longest wait for the rule's largest range window to fill with samples before the scenario starts."""
MAX_SCRAPE_FRACTION = 0.4
"""The scrape interval may be at most 2/5 of the smallest range window: 2.5 scrapes per window leave the two
samples rate() needs in every window, whatever its phase and the scrapes' jitter."""
_BRACKETS = re.compile(r"\[[^\[\]]*\]")


class NothingToDemo(Exception):
    """No query of the rule returns a series: the controller could read nothing, there is nothing to show."""


def range_windows(query: str) -> list[tuple[str, float]]:
    """Each range selector of a PromQL query as written and in seconds (`rate(x[5s])` -> [("[5s]", 5.0)]),
    a subquery by its range; `[0-9]` in a regex matcher is none."""
    found = [(text, query_range_seconds(text)) for text in _BRACKETS.findall(query)]
    return [(text, seconds) for text, seconds in found if seconds > 0]


def scrape_interval_problem(rule: Rule, path: str, scrape_interval: float) -> str | None:
    """Why `--scrape-interval` is too long for the rule's range windows (rate() needs two samples in its
    window, so with one the metric fails now and then), or None."""
    windows = [(seconds, text, metric)
               for metric in rule.metrics for text, seconds in range_windows(metric.query)]
    if not windows:
        return None
    seconds, text, metric = min(windows, key=lambda found: found[0])
    limit = seconds * MAX_SCRAPE_FRACTION
    if scrape_interval <= limit * (1 + 1e-9):
        return None
    where = f"{path}:{metric.line}" if metric.line else path
    return (f"--scrape-interval: {scrape_interval:g} s is too long for the {text} range window of metric "
            f"{metric.name!r} ({where}): rate() needs two samples in its window; use --scrape-interval "
            f"{limit:g} or less (2/5 of the rule's smallest window)")


def _query(url: str, promql: str) -> list[dict[str, object]]:
    query = urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(f"{url}/api/v1/query?{query}", timeout=2) as response:
        return list(json.load(response)["data"]["result"])


def wait_for_scrapes(url: str, targets: int, stop: threading.Event, timeout: float,
                     between: Callable[[], object] = lambda: None,
                     say: Callable[[str], object] = lambda line: None) -> bool:
    """Until every target was scraped once (bounded), so the first syncs see data; `between` runs before
    every poll (the demo keeps its load flowing). `say` gets a line whenever the count of scraped targets
    changes and at least every PROGRESS_SECONDS: Prometheus applies its targets about 5 s after it starts,
    and a new user must not watch a silent terminal."""
    deadline = time.monotonic() + timeout
    scraped, said_at = -1, time.monotonic()
    while not stop.is_set() and time.monotonic() < deadline:
        between()
        now_scraped = 0
        try:
            result = _query(url, "count(up == 1)")
            now_scraped = int(float(result[0]["value"][1])) if result else 0  # type: ignore[index]
        except (urllib.error.URLError, OSError, ValueError, KeyError):
            pass
        if now_scraped >= targets:
            return True
        if now_scraped != scraped or time.monotonic() - said_at >= PROGRESS_SECONDS:
            say(f"demo: {now_scraped} of {targets} targets scraped so far")
            scraped, said_at = now_scraped, time.monotonic()
        stop.wait(0.2)
    return False


def wait_for_series(url: str, queries: Sequence[str], stop: threading.Event, timeout: float,
                    between: Callable[[], object] = lambda: None) -> list[str]:
    """Until each query returns a series (bounded); the queries that still return none. `between` runs
    before every poll, as for wait_for_scrapes.

    One scrape is not enough: rate() needs two samples in its window, so the first sync would report the
    request metric failed (and post a FailedGetMetrics event) although nothing is wrong.
    """
    deadline = time.monotonic() + timeout
    pending = list(dict.fromkeys(queries))
    while pending and not stop.is_set() and time.monotonic() < deadline:
        between()
        still = []
        for promql in pending:
            try:
                if not _query(url, promql):
                    still.append(promql)
            except (urllib.error.URLError, OSError, ValueError, KeyError):
                still.append(promql)
        pending = still
        if pending:
            stop.wait(0.2)
    return pending


def warm_up(url: str, targets: int, rule: Rule, path: str, scrape_interval: float, world: SimulatedWorld,
            stop: threading.Event, between: Callable[[], object]) -> bool:
    """Bounded waits, each announced, until the first sync reads what the scenario's first load really is:
    every target scraped, every query returning a series, the largest range window filled with samples (a
    rate() Prometheus extrapolates over a window not yet filled reads a fraction of the real rate). False when
    `stop` was set; raises NothingToDemo when no query of the rule returns a series."""
    print(f"demo: waiting for Prometheus to scrape its {targets} targets "
          f"(at most {READY_TIMEOUT_SECONDS:g} s)", flush=True)
    scraped = wait_for_scrapes(url, targets, stop, READY_TIMEOUT_SECONDS, between,
                               lambda line: print(line, flush=True))
    if stop.is_set():
        return False
    if not scraped:
        print(f"demo: warning: Prometheus has not scraped every target after {READY_TIMEOUT_SECONDS:g} s; "
              "the first syncs may fail", flush=True)
    scraped_at = time.monotonic()
    timeout = SERIES_WAIT_SLACK_SECONDS + SERIES_WAIT_SCRAPES * scrape_interval
    print(f"demo: waiting for each query of rule {rule.name} to return a series (at most {timeout:g} s)",
          flush=True)
    capacity = [rule.capacity.query] if rule.capacity is not None else []
    empty = set(wait_for_series(url, [m.query for m in rule.metrics] + capacity, stop, timeout, between))
    if stop.is_set():
        return False
    if empty & set(capacity) and rule.capacity is not None:
        print(f"demo: warning: the capacity query of rule {rule.name} ({path}:{rule.capacity.line}) returned "
              f"no series after {timeout:g} s: {rule.capacity.query}\n  every sync will report "
              "FailedGetCapacity and the guard limits nothing", flush=True)
    if empty - set(capacity):
        explain_empty(rule, path, [m for m in rule.metrics if m.query in empty], world, timeout)
    found = [(t, s) for m in rule.metrics if m.query not in empty for t, s in range_windows(m.query)]
    text, window = max(found, key=lambda pair: pair[1], default=("", 0.0))
    wait = min(window, WINDOW_WAIT_CAP_SECONDS) - (time.monotonic() - scraped_at)
    if wait > 0:
        capped = (f" (at most {WINDOW_WAIT_CAP_SECONDS:g} s: the first syncs' rate() reads below the real "
                  "one)" if window > WINDOW_WAIT_CAP_SECONDS else "")
        print(f"demo: waiting {wait:.0f} s until the rule's largest range window {text} holds scraped "
              f"samples, so the first rate() is the real one{capped}", flush=True)
        deadline = time.monotonic() + wait
        while not stop.is_set() and (left := deadline - time.monotonic()) > 0:
            between()
            stop.wait(min(TICK_SECONDS, left))
    return not stop.is_set()


def explain_empty(rule: Rule, path: str, empty: Sequence[MetricSpec], world: SimulatedWorld,
                  waited: float) -> None:
    """Say which metrics find nothing, why (names the demo does not serve, or label values that do not match)
    and what the demo serves; raises NothingToDemo when none of the rule's metrics finds a series."""
    count = ("none" if len(empty) == len(rule.metrics) else f"{len(rule.metrics) - len(empty)}")
    lines = [f"{count} of the {len(rule.metrics)} metrics of rule {rule.name} ({path}:{rule.line}) returned "
             f"a series after {waited:g} s of scrapes; no series for:"]
    for metric in empty:
        served = served_names_in(metric.query)
        why = (f"it selects {', '.join(served)}, which the demo serves: check its label values against these"
               if served else "it names no series the demo serves")
        lines.append(f"  - {metric.name} ({path}:{metric.line}): {metric.query}\n    {why}")
    lines.append(world.describe_series())
    if len(empty) == len(rule.metrics):
        raise NothingToDemo("\n".join([*lines, "Nothing to demo: the controller could read none of the "
                                       "rule's metrics; point their queries at these series."]))
    print("demo: warning: " + "\n".join([*lines, "The syncs will report these metrics failed (NoSeries); "
                                       "the others still scale the Deployment."]), flush=True)
