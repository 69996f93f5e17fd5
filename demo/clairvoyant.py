"""The fewest GPU-hours any scaling policy could spend on a trace, even one that knows the whole trace ahead.

Why: a verdict such as "(c) spends more GPU-hours than (a)" means little without knowing how much room there
was. Where a fixed replica count happens to sit at the cheapest safe level, no autoscaler can beat it, and
this module says so with a number: a lower bound on the GPU-hours of EVERY policy that is overloaded for at
most a given number of minutes, in the replay's own model (demo.replay, demo.cluster).

The model. At scored sample i (every `step_seconds`, as demo.replay scores them) the load is x_i and r_i
replicas are ready; the sample is overloaded when x_i / r_i > overload_line. A replica that becomes ready at
sample j held its GPU while loading for min(j, d) scored samples before it (d = start-up delay in samples), so
any policy holds at least  sum_i r_i + sum_j min(j, d) * max(0, r_j - r_(j-1))  GPU-samples. The ready count
never drops below minReplicas: the Deployment starts with minReplicas ready, and a scale-down removes loading
replicas before ready ones and never goes below minReplicas. Here r may change at every sample (real policies
only at syncs) and starts anywhere in minReplicas..maxReplicas: a relaxation, so its minimum is below what any
replayed configuration spends.

The bound for a budget of B overloaded samples is the Lagrangian dual. For every price p of an overloaded
sample, min over ready profiles of (GPU-samples + p * overloaded samples) - p * B is at most the GPU-samples
of any profile with at most B overloaded samples (weak duality). A dynamic program over the ready count gives
the minimum for one price in one pass; cutting planes on p find the best such bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from demo.replay import ReplaySettings
from demo.traces import Trace, sample

MAX_CUTS = 64


@dataclass(frozen=True)
class PricedProfile:
    """The cheapest ready profile at one price of an overloaded sample: its cost and what it is made of."""

    price: float
    cost: float
    """GPU-samples + price * overloaded samples."""
    gpu_samples: float
    overloaded_samples: int


def cheapest_profile(loads: Sequence[float], price: float, min_replicas: int, max_replicas: int,
                     startup_samples: int, overload_line: float) -> PricedProfile:
    """The ready profile (one count per sample) minimising GPU-samples + price * overloaded samples.

    Dynamic program over the ready count r in min_replicas..max_replicas, O(samples * replicas): reaching r
    from a lower count costs the loading of the new replicas; reaching it from a higher count is free
    (scale-down removes replicas at once).
    """
    if not 0 <= min_replicas <= max_replicas or startup_samples < 0 or price < 0 or overload_line <= 0:
        raise ValueError(f"need 0 <= min_replicas <= max_replicas, startup_samples >= 0, price >= 0 and "
                         f"overload_line > 0 (got {min_replicas}, {max_replicas}, {startup_samples}, "
                         f"{price}, {overload_line})")
    if not loads:
        return PricedProfile(price, 0.0, 0.0, 0)
    counts = range(min_replicas, max_replicas + 1)
    top = len(counts) - 1
    # The cheapest profile ending ready at counts[k]: its cost, GPU-samples and overloaded samples, as three
    # lists updated in place (tuples per count and sample cost twice the time, and the bound runs this DP
    # a few dozen times per trace).
    cost = [0.0] * len(counts)
    gpus = [0.0] * len(counts)
    over = [0] * len(counts)
    for index, load in enumerate(loads):
        if index:
            charge = float(min(index, startup_samples))
            for k in range(1, top + 1):  # from below: the new replica loads first
                below = cost[k - 1] + charge
                if below < cost[k]:
                    cost[k], gpus[k], over[k] = below, gpus[k - 1] + charge, over[k - 1]
            for k in range(top - 1, -1, -1):  # from above: scale-down is free
                if cost[k + 1] < cost[k]:
                    cost[k], gpus[k], over[k] = cost[k + 1], gpus[k + 1], over[k + 1]
        for k, r in enumerate(counts):
            cost[k] += r
            gpus[k] += r
            if load > overload_line * r:
                cost[k] += price
                over[k] += 1
    k = min(range(len(counts)), key=lambda k: (cost[k], over[k]))
    return PricedProfile(price, cost[k], gpus[k], over[k])


@dataclass(frozen=True)
class Bound:
    """No policy overloaded for at most `overloaded_minutes` spends fewer than `gpu_hours` on the trace."""

    gpu_hours: float
    overloaded_minutes: float


def min_gpu_hours(trace: Trace, overloaded_minutes: float, min_replicas: int, max_replicas: int,
                  settings: ReplaySettings | None = None) -> Bound:
    """The lower bound on GPU-hours over `trace` for an overload budget, in the replay's model and scoring,
    for any policy between min_replicas and max_replicas (as the rule's bounds)."""
    settings = settings or ReplaySettings()
    if overloaded_minutes < 0:
        raise ValueError(f"overloaded_minutes must be >= 0 (got {overloaded_minutes})")
    # A pool smaller than the bounds caps the ready count (the rest stays Pending, holding no GPU).
    low_count = min(min_replicas, settings.cluster.gpu_count)
    high_count = min(max_replicas, settings.cluster.gpu_count)
    if not 0 <= low_count <= high_count or high_count < 1:
        raise ValueError(f"need 0 <= min_replicas <= max_replicas and max_replicas >= 1 (got {min_replicas}, "
                         f"{max_replicas})")
    step = settings.step_seconds
    loads = [load for _, load in sample(trace, step)]
    # Whole samples only: a replica created at a sample holds its GPU for at least this many before it serves.
    startup = int(settings.cluster.startup_delay_seconds // step)
    budget = int(overloaded_minutes * 60.0 / step + 1e-9)

    def cheapest(price: float) -> PricedProfile:
        return cheapest_profile(loads, price, low_count, high_count, startup, settings.overload_line)

    # Every price gives a valid bound; the best is the maximum of the concave, piecewise linear dual. Kelley's
    # cutting planes find it exactly: each profile is a line (GPU-samples + price * overloaded samples); the
    # next price is where the cheapest line over the budget meets the cheapest within it, and when the DP
    # finds nothing cheaper there, that price is the maximum. A few DP passes instead of a bisection's dozens.
    over_side = cheapest(0.0)
    lower = over_side.cost
    if over_side.overloaded_samples > budget:
        high = float(high_count * (startup + 1) + 1)
        within = cheapest(high)
        lower = max(lower, within.cost - high * budget)
        for _ in range(MAX_CUTS):
            if within.overloaded_samples >= over_side.overloaded_samples:
                break  # overload no price avoids: the highest price tried is the bound
            price = ((within.gpu_samples - over_side.gpu_samples)
                     / (over_side.overloaded_samples - within.overloaded_samples))
            profile = cheapest(price)
            lower = max(lower, profile.cost - price * budget)
            meet = over_side.gpu_samples + price * over_side.overloaded_samples
            if profile.cost >= meet - 1e-9 * max(1.0, abs(meet)):
                break
            if profile.overloaded_samples > budget:
                over_side = profile
            else:
                within = profile
    return Bound(max(lower, 0.0) * step / 3600.0, overloaded_minutes)
