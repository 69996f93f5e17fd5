"""The annotations a user puts on a target to pause its autoscaling; read from the scale's owner by `scale`,
interpreted by the plan. Here, apart, so the plan and `simulate` use the names without loading the Kubernetes
client."""

from __future__ import annotations

PAUSED_ANNOTATION = "gpu-autoscaler.io/paused"
PAUSED_REPLICAS_ANNOTATION = "gpu-autoscaler.io/paused-replicas"
