"""Benchmarks, each runnable as `python -m benchmarks.<name>`; medians against a same-run baseline."""
