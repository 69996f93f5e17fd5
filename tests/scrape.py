"""Samples of a Prometheus exposition, by metric name: from collectors registered here (`collect`), from text
(`samples`), or fetched from an HTTP endpoint (`fetch`). The one parser is prometheus_client's own."""

from __future__ import annotations

import urllib.request

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

Samples = dict[str, list[tuple[dict[str, str], float]]]
"""metric (sample) name -> [(labels, value)], in exposition order."""


def samples(text: str) -> Samples:
    found: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return found


def collect(*collectors: Collector) -> Samples:
    """One scrape of `collectors` in a registry of their own, as a Prometheus scrape would see it."""
    registry = CollectorRegistry()
    for collector in collectors:
        registry.register(collector)
    return samples(generate_latest(registry).decode())


def fetch(url: str, timeout: float = 10.0) -> str:
    """The body of GET `url` (an exposition endpoint on 127.0.0.1)."""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return str(response.read().decode())
