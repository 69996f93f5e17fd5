"""The running controller: one sync gathers every rule's metrics and scale, decides with the engine and the
plan, and acts (`loop`, `rule_sync`, `capacity_sync`, `capacity_ledger`, `api_workers`), reports what it did
(`outcome`, `events`, `decision_log`, `logfmt`, `self_metrics`, `http_endpoint`), and follows its inputs
(`sources`, `observe`, `reload`); `wiring` builds it from a rules file, a scale backend and Prometheus
endpoints."""
