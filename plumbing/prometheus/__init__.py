"""The Prometheus client both the autoscaler and gpu-fleet use: connections as Prometheus' own `http_config`
(`config`), one HTTP session per endpoint with auth, TLS and watched secret files (`session`), every answer
validated before a number is read (`answer`), instant queries with retries, deadlines and batching (`runner`,
`batching`), range queries (`range_query`), and PromQL bounded and parsed offline (`syntax`), with the
command-line flags that name a connection (`flags`). It knows nothing of rules, replicas or GPUs."""
