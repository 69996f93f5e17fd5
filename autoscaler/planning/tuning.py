"""What `gpu-autoscaler tune` computes, as pure functions: the candidate settings, their replay through the
controller's own planning, their score and the recommendation, and the rules-file diff.

A history is the rule's metrics sampled on a grid (a `HistoryStep` per step: one observation per metric, and
the replica count the real controller ran then, when recorded). Each candidate (`Candidate`: the rule with
some of its behavior and targets changed) is replayed as `simulate` replays a trace (`plan_replicas`, each
step's plan applied at once), and scored:

- **GPU-hours**: the sum over steps of replicas x step x GPUs per replica (`capacity.gpusPerReplica`, else 1).
- **Overloaded minutes**: the steps where, for some metric, the load per replica is above the **current**
  rule's target by more than its scale-up tolerance while the candidate runs fewer than `maxReplicas`
  (so a candidate cannot hide overload behind a higher target). The load per replica of a Total metric is
  `value / replicas`; of an Average metric `value * recorded / replicas` (the recorded mean rescaled to the
  candidate's count).

The metric is replayed as recorded: a Total metric (a demand) does not depend on the replica count, so its
replay is faithful; an Average metric was shaped by the replicas the real controller chose, and the rescaling
assumes the load spreads evenly over the replicas (a fair approximation for utilization, not for latency).
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Sequence
from dataclasses import dataclass

import yaml

from autoscaler.planning.plan import count_all_failed, plan_replicas
from autoscaler.planning.trace_replay import covers, replay_columns
from autoscaler.policy import MetricObservation, Rule, RuleHistory
from autoscaler.policy.spec import ScalingPolicy

DOWN_WINDOWS = (0, 60, 300, 900, 1800)
"""scaleDown.stabilizationWindowSeconds tried (plus the rule's own)."""
TARGET_FACTORS = (0.9, 1.0, 1.1)
"""Each metric's target times these (targets above the current one trade headroom for GPU-hours)."""


@dataclass(frozen=True, slots=True)
class HistoryStep:
    """One step of the history: the time, what each metric's query returned, and the recorded replicas."""

    t: float
    observations: tuple[MetricObservation, ...]
    recorded_replicas: int | None = None


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
class Recommendation:
    """The scores (the current rule first) and the best one, or None when the current rule is best."""

    scores: tuple[Score, ...]
    best: Score | None

    @property
    def current(self) -> Score:
        return self.scores[0]


def candidates(rule: Rule) -> list[Candidate]:
    """The current rule first, then every combination of a scale-down window, the default scale-down
    policy (100 % per 15 s) or the rule's own, and a target factor; duplicates of the current rule dropped."""
    down = rule.behavior.scale_down
    windows = sorted({*DOWN_WINDOWS, down.stabilization_window_seconds})
    fast = (ScalingPolicy("Percent", 100, 15),)
    policies = [("", down.policies)] + ([("scaleDown 100%/15s", fast)] if fast != down.policies else [])
    out = [Candidate("", rule)]
    seen = {rule}
    for window in windows:
        for policy_label, policy in policies:
            for factor in TARGET_FACTORS:
                scale_down = dataclasses.replace(down, stabilization_window_seconds=window, policies=policy)
                metrics = tuple(dataclasses.replace(m, target=_rounded(m.target * factor))
                                for m in rule.metrics)
                behavior = dataclasses.replace(rule.behavior, scale_down=scale_down)
                variant = dataclasses.replace(rule, metrics=metrics, behavior=behavior)
                if variant in seen:
                    continue
                seen.add(variant)
                parts = [f"scaleDown window {window}s"] if window != down.stabilization_window_seconds else []
                parts += [policy_label] if policy_label else []
                parts += [f"targets x{factor:g}"] if factor != 1.0 else []
                out.append(Candidate(", ".join(parts), variant))
    return out


def _rounded(value: float) -> float:
    return float(f"{value:.4g}")


def replay(rule: Rule, history: Sequence[HistoryStep], start_replicas: int) -> list[int]:
    """The replica count after each step's plan, applied at once (as `simulate`): by `trace_replay` where it
    covers the rule (a week of 15 s steps: about 0.1 s a candidate, 0.7 s step by step), else step by step."""
    if covers(rule):
        values = [{o.name: o.value for o in step.observations} for step in history]
        columns = [[step.get(m.name) for step in values] for m in rule.metrics]
        return replay_columns(rule, [step.t for step in history], columns, start_replicas).replicas
    state = RuleHistory()
    current = start_replicas
    all_failed = 0
    counts = []
    for step in history:
        all_failed = count_all_failed(all_failed, step.observations)
        plan = plan_replicas(
            rule=rule,
            current=current,
            observations=step.observations,
            history=state,
            all_failed_syncs=all_failed,
            now=step.t,
        )
        state = plan.history.with_scale(step.t, current, plan.replicas)
        current = plan.replicas
        counts.append(current)
    return counts


def overloaded(current_rule: Rule, step: HistoryStep, replicas: int) -> bool:
    """Some metric's load per replica above the current rule's target by more than the scale-up tolerance,
    while fewer than maxReplicas run (see the module docstring)."""
    if replicas >= current_rule.max_replicas:
        return False
    limit = 1 + current_rule.behavior.scale_up.tolerance
    for spec, seen in zip(current_rule.metrics, step.observations, strict=True):
        if seen.value is None:
            continue
        if spec.type == "Total":
            per_replica = seen.value / max(replicas, 1)
        elif step.recorded_replicas is not None:
            per_replica = seen.value * step.recorded_replicas / max(replicas, 1)
        else:
            per_replica = seen.value
        if per_replica > spec.target * limit:
            return True
    return False


def score(current_rule: Rule, candidate: Candidate, history: Sequence[HistoryStep], step_seconds: float,
          start_replicas: int) -> Score:
    counts = replay(candidate.rule, history, start_replicas)
    gpus = current_rule.capacity.gpus_per_replica if current_rule.capacity else 1
    gpu_hours = sum(counts) * step_seconds * gpus / 3600
    over = sum(overloaded(current_rule, step, n) for step, n in zip(history, counts, strict=True))
    changes = sum(1 for a, b in zip([start_replicas, *counts], counts, strict=False) if a != b)
    return Score(candidate, round(gpu_hours, 3), over * step_seconds / 60, changes)


def recommend(rule: Rule, history: Sequence[HistoryStep], step_seconds: float, start_replicas: int,
              ) -> Recommendation:
    """Every candidate scored; the best is the fewest GPU-hours at no more overloaded minutes than the current
    rule, and only if it saves GPU-hours (else None: the current rule is best)."""
    scores = tuple(score(rule, c, history, step_seconds, start_replicas) for c in candidates(rule))
    current = scores[0]
    allowed = [s for s in scores[1:] if s.overloaded_minutes <= current.overloaded_minutes
               and s.gpu_hours < current.gpu_hours - 1e-9]
    best = min(allowed, key=lambda s: (s.gpu_hours, s.overloaded_minutes, s.candidate.label.count(",")),
               default=None)
    return Recommendation(scores, best)


def tuned_fields(rule: Rule) -> dict[str, object]:
    """The fields `tune` may change, as they are written in a rules file."""
    down = rule.behavior.scale_down
    return {
        "metrics": [{"name": m.name, "target": int(m.target) if m.target.is_integer() else m.target}
                    for m in rule.metrics],
        "behavior": {"scaleDown": {
            "stabilizationWindowSeconds": down.stabilization_window_seconds,
            "policies": [{"type": p.type, "value": p.value, "periodSeconds": p.period_seconds}
                         for p in down.policies],
        }},
    }


def rules_diff(path: str, current: Rule, proposed: Rule) -> str:
    """A unified diff of the rule's tunable fields (YAML), from the current rule to the proposed one."""
    def text(rule: Rule) -> list[str]:
        body: str = yaml.safe_dump({"rules": [{"name": rule.name, **tuned_fields(rule)}]}, sort_keys=False,
                              default_flow_style=None)
        return body.splitlines(keepends=True)

    return "".join(difflib.unified_diff(text(current), text(proposed),
                                        f"{path} (rule {current.name}, current)",
                                        f"{path} (rule {current.name}, recommended)", n=2))
