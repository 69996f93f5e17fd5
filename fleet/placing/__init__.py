"""Which GPUs: the fleet's GPUs read from Prometheus (`inventory`), their ranking score (`scoring`), their
table (`table`), the choice for a request (`selection`, pure), that choice made once from the flags and
printed with where to put the job (`choosing`: `select`, `estimate --then-select`) or repeated until it
succeeds (`waiting`: `wait`, `estimate --then-wait`)."""
