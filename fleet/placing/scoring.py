"""The availability score, as the exporter serves it (`gpu_availability_score`): 0.6 * free memory share +
0.4 * idle share, clamped to 0..1, the weighting our users' GPU tracking tool ranks GPUs by.

The exporter's own series is used when Prometheus has it; this computes the same number from the memory
and utilization series when it does not (an older exporter). A unit test holds it equal to the exporter's.
"""

from __future__ import annotations

import math

MEMORY_WEIGHT = 0.6
IDLE_WEIGHT = 0.4


def availability_score(free: float | None, total: float | None, utilization: float | None) -> float | None:
    """None when an input is unknown or not finite, or total memory is not positive."""
    if free is None or total is None or utilization is None or total <= 0:
        return None
    if not all(math.isfinite(v) for v in (free, total, utilization)):
        return None
    free_share = min(max(free / total, 0.0), 1.0)
    idle = min(max(1.0 - utilization, 0.0), 1.0)
    return min(max(MEMORY_WEIGHT * free_share + IDLE_WEIGHT * idle, 0.0), 1.0)
