"""The `gpu-autoscaler` command: `main` dispatches to one module per subcommand (`check`, `run`, `status`,
`simulate`, `tune`), `args` holds the flags they share, `assumed` the replica counts `--assume-replicas`
stands in for a cluster with. The top layer: it may import every other package of the autoscaler."""
