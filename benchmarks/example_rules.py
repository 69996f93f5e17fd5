"""The example rule the benchmarks and the CLI tests share: the embedding-service Deployment of medical-kg,
2..10 replicas, scaled on its GPU utilization (the set-up our users run today) and optionally more metrics.

`embedding_service_rules` writes a rules file of that one rule; `metrics` are YAML list items and `behavior`
a `behavior:` mapping, both at the rule's indentation (see GPU_UTILIZATION_METRIC).
"""

from __future__ import annotations

GPU_UTILIZATION_METRIC = """\
      - name: gpu_utilization
        query: 100 * avg(gpu_utilization_ratio{namespace="medical-kg", pod=~"embedding-service-.*"})
        type: Average
        target: 80
"""


def embedding_service_rules(metrics: str = GPU_UTILIZATION_METRIC, behavior: str = "",
                            name: str = "embedding-service") -> str:
    """A rules file (YAML text) of one rule named `name` over the embedding-service Deployment."""
    return f"""\
rules:
  - name: {name}
    target: {{kind: Deployment, namespace: medical-kg, name: embedding-service}}
    minReplicas: 2
    maxReplicas: 10
    metrics:
{metrics}{behavior}"""


USERS_HPA = embedding_service_rules(name="users-hpa", behavior="""\
    behavior:
      scaleUp:
        stabilizationWindowSeconds: 300
        policies: [{type: Percent, value: 100, periodSeconds: 60}]
      scaleDown:
        stabilizationWindowSeconds: 600
        policies: [{type: Percent, value: 50, periodSeconds: 60}]
""")
"""The users' HPA on GPU utilization, as they run it today: configuration (a) of the quality benchmarks."""
