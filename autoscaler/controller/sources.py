"""Query routing: each rule's queries go to the Prometheus endpoint it names, the endpoints side by side.

The controller asks once per sync; every endpoint's runner dedupes its own queries and bounds its own time, so
a slow endpoint costs its rules their metrics, never another endpoint's rules theirs.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor

from autoscaler.policy import Rule
from plumbing.prometheus.config import DEFAULT_ENDPOINT
from plumbing.prometheus.runner import (
    HistorySource,
    MetricsSource,
    QueryErrorReason,
    QueryResult,
    SeriesSource,
)

log = logging.getLogger(__name__)

QueryKey = tuple[str, str]
"""(endpoint name, PromQL query)."""


class EndpointSources:
    """The metrics source of each endpoint name; a single source is the `default` endpoint."""

    def __init__(self, sources: MetricsSource | Mapping[str, MetricsSource]) -> None:
        self._sources = dict(sources) if isinstance(sources, Mapping) else {DEFAULT_ENDPOINT: sources}
        many = len(self._sources) > 1
        self._pool = ThreadPoolExecutor(len(self._sources), thread_name_prefix="endpoints") if many else None

    def __contains__(self, name: object) -> bool:
        return name in self._sources

    def history_source(self, name: str) -> HistorySource | None:
        """The endpoint's source if it can read a query's past (a PromQLRunner does), else None."""
        source = self._sources.get(name)
        return source if isinstance(source, HistorySource) else None

    def series_source(self, name: str) -> SeriesSource | None:
        """The endpoint's source if it can read a query series by series (a PromQLRunner does), else None."""
        source = self._sources.get(name)
        return source if isinstance(source, SeriesSource) else None

    @property
    def names(self) -> str:
        return ", ".join(sorted(self._sources))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def run(self, rules: Iterable[Rule]) -> dict[QueryKey, QueryResult]:
        """Every distinct query of `rules` (metrics, their panic windows, capacity) whose endpoint exists,
        once per endpoint."""
        wanted: dict[str, set[str]] = {}
        alone: dict[str, set[str]] = {}
        """Queries of rules that opted out of batching (`batch: false`), per endpoint."""
        for rule in rules:
            if rule.prometheus in self._sources:
                queries = wanted.setdefault(rule.prometheus, set())
                mine = {m.query for m in rule.metrics}
                mine.update(m.panic_query for m in rule.metrics if m.panic_query)
                if rule.capacity is not None:
                    mine.add(rule.capacity.query)
                queries.update(mine)
                if not rule.batch:
                    alone.setdefault(rule.prometheus, set()).update(mine)
        if self._pool is None or len(wanted) < 2:
            answers = {name: self._run(name, queries, alone.get(name, set()))
                       for name, queries in wanted.items()}
        else:
            futures = {name: self._pool.submit(self._run, name, queries, alone.get(name, set()))
                       for name, queries in wanted.items()}
            answers = {name: future.result() for name, future in futures.items()}
        return {(name, q): result for name, results in answers.items() for q, result in results.items()}

    def _run(self, name: str, queries: set[str], alone: set[str]) -> Mapping[str, QueryResult]:
        try:
            if alone:
                return self._sources[name].run_queries(queries, alone)
            return self._sources[name].run_queries(queries)  # a source that never batches may lack `alone`
        except Exception as e:  # a metrics source must not raise; if one does, every metric failed
            log.exception("metrics source %s failed", name)
            failed = QueryResult(None, QueryErrorReason.UNREACHABLE, f"metrics source failed: {e}")
            return {q: failed for q in queries}
