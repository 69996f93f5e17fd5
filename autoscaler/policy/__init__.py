"""The pure autoscaling engine: the Kubernetes HPA arithmetic as functions of their inputs and `now`.

No I/O, no clock, no logging, no kubernetes or prometheus imports, no rules-file loader: the controller,
`simulate` and the demo call `decide()` with what they observed and keep the returned history for the next
sync. The public surface is what those callers use:

- inputs (`spec`): `Rule` with its `TargetRef`, `MetricSpec`, `Behavior` (`ScalingRules`, `ScalingPolicy`),
  `Fallback`, and the HPA's `DEFAULT_BEHAVIOR`; `autoscaler.config.rules` builds them from YAML.
- per sync (`decision`): `MetricObservation` in; `Decision` (with its `Reason`) and the next `RuleHistory`
  (`Recommendation`s and scale events) out; `MAX_REPLICAS`, the int32 cap of every count.
- `decide()` (metrics to a count), `decide_desired()` (a given desired count through the same behavior, the
  fallback's path) and `first_sight()` (what the HPA records before a target at zero is held).

The stages (`proposal`, `stabilization`, `rate`, `bounds`, `history`) are importable from their modules for
tests that check one stage against the HPA's vectors.
"""

from autoscaler.policy.decision import (
    MAX_REPLICAS,
    Decision,
    MetricObservation,
    Reason,
    Recommendation,
    RuleHistory,
)
from autoscaler.policy.engine import decide, decide_desired
from autoscaler.policy.history import first_sight
from autoscaler.policy.spec import (
    DEFAULT_BEHAVIOR,
    Behavior,
    Fallback,
    MetricSpec,
    Rule,
    ScalingPolicy,
    ScalingRules,
    TargetRef,
)

__all__ = [
    "DEFAULT_BEHAVIOR",
    "MAX_REPLICAS",
    "Behavior",
    "Decision",
    "Fallback",
    "MetricObservation",
    "MetricSpec",
    "Reason",
    "Recommendation",
    "Rule",
    "RuleHistory",
    "ScalingPolicy",
    "ScalingRules",
    "TargetRef",
    "decide",
    "decide_desired",
    "first_sight",
]
