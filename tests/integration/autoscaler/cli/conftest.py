"""A real Prometheus (Debian package) on 127.0.0.1 scraping itself under two job names, for `check`."""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator

import pytest

from demo.processes import ManagedProcess, running, start_prometheus
from tests.prom import reload_scrape_configs

JOBS = ("prometheus", "prometheus-again")


def instant(url: str, query: str) -> list[object]:
    """The result vector of `query` now."""
    with urllib.request.urlopen(
        f"{url}/api/v1/query?{urllib.parse.urlencode({'query': query})}", timeout=5
    ) as r:
        return list(json.load(r)["data"]["result"])


@pytest.fixture(scope="module")
def prometheus() -> Iterator[ManagedProcess]:
    """Prometheus whose `up` has exactly two series (itself, scraped as two jobs), ready to query."""
    config: dict[str, object] = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"}}
    with running(start_prometheus(config)) as prom:
        target = prom.url.removeprefix("http://")
        reload_scrape_configs(prom, [{"job_name": job, "static_configs": [{"targets": [target]}]}
                                     for job in JOBS])
        deadline = time.monotonic() + 30
        while len(instant(prom.url, "up == 1")) < len(JOBS):
            if time.monotonic() > deadline:
                pytest.fail(f"Prometheus did not scrape itself in 30 s:\n{prom.log_tail()}")
            time.sleep(0.2)
        yield prom
