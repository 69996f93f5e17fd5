"""The pure autoscaling engine: the Kubernetes HPA arithmetic as functions of their inputs and `now`.

No I/O, no clock, no logging, no kubernetes or prometheus imports: the controller, `simulate` and the demo
call `decide()` with what they observed and keep the returned history for the next sync.
"""

from autoscaler.policy.bounds import clamp_to_bounds, correct_out_of_bounds
from autoscaler.policy.engine import bound_and_limit, decide, decide_desired
from autoscaler.policy.history import first_sight, prune
from autoscaler.policy.proposal import combine, propose, propose_all
from autoscaler.policy.rate import limit_rate, period_start_replicas, scale_down_limit, scale_up_limit
from autoscaler.policy.stabilization import stabilize
from autoscaler.policy.types import (
    MAX_REPLICAS,
    Decision,
    MetricObservation,
    MetricProposal,
    Reason,
    Recommendation,
    RuleHistory,
    ScaleEvent,
    Stage,
)

__all__ = [
    "MAX_REPLICAS",
    "Decision",
    "MetricObservation",
    "MetricProposal",
    "Reason",
    "Recommendation",
    "RuleHistory",
    "ScaleEvent",
    "Stage",
    "bound_and_limit",
    "clamp_to_bounds",
    "combine",
    "correct_out_of_bounds",
    "decide",
    "decide_desired",
    "first_sight",
    "limit_rate",
    "period_start_replicas",
    "propose",
    "propose_all",
    "prune",
    "scale_down_limit",
    "scale_up_limit",
    "stabilize",
]
