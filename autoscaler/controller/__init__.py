"""The running controller: one sync gathers every rule's metrics and scale, decides with the engine and the
plan, and acts (`loop`, `rule_sync`, `capacity_sync`, `kube_pool`), reports what it did (`outcome`, `events`,
`decision_log`, `logfmt`, `metrics`, `server`), and follows its inputs (`sources`, `observe`, `reload`);
`wiring` builds it from a rules file, a scale backend and Prometheus endpoints."""
