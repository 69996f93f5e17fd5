"""Prometheus for every `gpu-fleet` command: the validated client (`prom`), the connection flags
(`connection`), and the loop of repeated attempts a signal stops (`polling`: `status --watch`, `wait`)."""
