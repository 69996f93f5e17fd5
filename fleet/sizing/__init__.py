"""What serving a model takes, for `estimate`: memory per GPU and the GPU count of a split (`memory`, pure),
the parallel sizes from flags or a task configuration file (`taskconfig`)."""
