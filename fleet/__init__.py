"""`gpu-fleet`: the whole cluster's GPUs over Prometheus (status, select, wait, estimate, report, export).

In layers, each importing only those below it (an import-linter contract in pyproject.toml keeps it so):
`cli` (the dispatcher) > `commands` (one module per subcommand, none importing another) > `placing`,
`sizing`, `reporting` (what the commands share, independent of each other) > `querying` (Prometheus) >
`errors`, `output`, `units` (shared by every layer).
"""
