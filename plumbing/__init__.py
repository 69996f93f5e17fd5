"""Plumbing shared by the exporter and the autoscaler: hardened YAML reading, HTTP serving, TLS and auth.

`exporter` and `autoscaler` never import each other; what both need lives here, once.
"""
