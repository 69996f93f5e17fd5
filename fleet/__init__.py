"""`gpu-fleet`: the whole cluster's GPUs over Prometheus (status, select, wait, estimate, report, export)."""
