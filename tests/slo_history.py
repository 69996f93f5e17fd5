"""Test support: a week of an LLM service's history, backfilled into a real Prometheus, for the tests of the
target learned from a latency objective (`slo`).

Every `STEP` seconds (deterministic, a pure function of the offset from the start, ending at `end`):
`vllm:request_success_total{model_name="m"}` (requests served, a counter whose rate per replica follows
`per_replica`: a daily wave from 2 to 40 requests/s per replica, at its top at the end),
`vllm:time_to_first_token_seconds_bucket{model_name="m",le}` (every request of a step takes the TTFT of a
saturating server: flat at 0.2 s up to `KNEE` requests/s per replica, then 0.05 s more per request/s, so the
p90 reaches the 0.5 s objective at `KNEE_AT_OBJECTIVE`), and the controller's own recorded replicas
(`gpu_autoscaler_current_replicas` of rule `chat`, `REPLICAS` throughout, and `gpu_autoscaler_leader`).
The TSDB blocks are made by `tests.history.backfill` (promtool) and served by its
`start_backfilled_prometheus`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

from tests.history import HistorySpec, backfill

STEP = 60
DAYS = 7.0
REPLICAS = 4
KNEE = 20.0
OBJECTIVE = 0.5
KNEE_AT_OBJECTIVE = KNEE + (OBJECTIVE - 0.2) / 0.05
"""26 requests/s per replica: where the TTFT reaches the objective."""
BUCKETS = (*(round(0.1 * k, 1) for k in range(1, 21)), 5.0)
LABELS = 'model_name="m"'
RULE_LABELS = 'rule="chat",namespace="ml",target="vllm-chat"'
RATE_QUERY = f"sum(rate(vllm:request_success_total{{{LABELS}}}[5m]))"
TTFT_QUERY = ("histogram_quantile(0.9, sum by (le) "
              f"(rate(vllm:time_to_first_token_seconds_bucket{{{LABELS}}}[2m])))")


def per_replica(offset: float, days: float = DAYS) -> float:
    """Requests per second per replica `offset` seconds after the start: 40 at the end of the history."""
    return 21.0 + 19.0 * math.cos(2 * math.pi * (offset - days * 86_400) / 86_400)


def ttft(load: float) -> float:
    return 0.2 if load <= KNEE else 0.2 + 0.05 * (load - KNEE)


def openmetrics_lines(spec: HistorySpec) -> Iterator[str]:
    times = range(spec.start, spec.end + 1, STEP)
    served = 0.0
    requests: list[str] = []
    buckets: dict[float, list[str]] = {le: [] for le in BUCKETS}
    counts = [0.0] * len(BUCKETS)
    inf = 0.0
    infs: list[str] = []
    for t in times:
        load = per_replica(t - spec.start, spec.days)
        n = load * REPLICAS * STEP
        served += n
        requests.append(f"vllm:request_success_total{{{LABELS}}} {served:.1f} {t}")
        latency = ttft(load)
        for index, le in enumerate(BUCKETS):
            if latency <= le:
                counts[index] += n
            buckets[le].append(f'vllm:time_to_first_token_seconds_bucket{{{LABELS},le="{le:g}"}} '
                               f"{counts[index]:.1f} {t}")
        inf += n
        infs.append(f'vllm:time_to_first_token_seconds_bucket{{{LABELS},le="+Inf"}} {inf:.1f} {t}')
    yield "# TYPE vllm:request_success_total unknown"
    yield from requests
    yield "# TYPE vllm:time_to_first_token_seconds_bucket unknown"
    for lines in buckets.values():
        yield from lines
    yield from infs
    yield "# TYPE gpu_autoscaler_current_replicas gauge"
    yield from (f'gpu_autoscaler_current_replicas{{{RULE_LABELS},instance="c0"}} {REPLICAS} {t}'
                for t in times)
    yield "# TYPE gpu_autoscaler_leader gauge"
    yield from (f'gpu_autoscaler_leader{{instance="c0"}} 1 {t}' for t in times)
    yield "# EOF"


def backfilled_blocks(spec: HistorySpec, workdir: Path) -> Path:
    """TSDB blocks of the week ending at `spec.end`, written under `workdir`."""
    workdir.mkdir(parents=True, exist_ok=True)
    source = workdir / "slo.om.txt"
    source.write_text("\n".join(openmetrics_lines(spec)) + "\n")
    blocks = workdir / "blocks"
    backfill(source, blocks)
    source.unlink()
    return blocks
