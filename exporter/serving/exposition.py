"""The /metrics body, rendered once per state of what it shows and served as ready bytes.

A scrape enters `state()` first: a context whose value is a key naming everything the exposition is made of
(the NVML sweep, the kubelet refresh, the XID events; see exporter/app.py), and inside which the collectors
read the very sweep the key names. While the key is the one the last body was
rendered for, that body is served as it is, and its gzip copy (compressed on the first scrape that asks for
gzip) too: scrapes between two sweeps cost a key and a lookup, no collect, no serialization. Without a
`state` every scrape renders, as prometheus_client's own server does.

A body is stored under the key read *before* it was rendered: whatever changes while it renders changes the
next key too, so a body is served only while the state is the one it shows.
"""

from __future__ import annotations

import gzip
import threading
from collections.abc import Callable, Hashable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

StateKey = Callable[[], AbstractContextManager[Hashable]]
# A scraper's Accept header picks one of a handful of formats; more distinct ones than this start afresh.
_MAX_FORMATS = 4


@dataclass
class _Rendered:
    key: Hashable
    body: bytes
    gzipped: bytes | None = field(default=None)


class Exposition:
    """Renders `registry` in the format a scraper accepts; with `state`, once per key and format."""

    def __init__(self, registry: CollectorRegistry, state: StateKey | None = None) -> None:
        self._registry = registry
        self._state = state
        self._lock = threading.Lock()  # one render per key, however many scrapers arrive at once
        self._rendered: dict[str, _Rendered] = {}  # content type -> the last body of that format
        self.renders = 0  # bodies rendered so far: tests and the benchmark see what a scrape cost

    def body(self, accept: str, want_gzip: bool) -> tuple[bytes, str]:
        """(body, content type) for a scraper sending `accept`; gzip-compressed when `want_gzip`.
        Raises whatever a collector raises (the server answers 500)."""
        encoder, content_type = choose_encoder(accept)
        if self._state is None:
            body = encoder(self._registry)
            with self._lock:
                self.renders += 1
            return (gzip.compress(body, compresslevel=1) if want_gzip else body), content_type
        with self._lock, self._state() as key:
            rendered = self._rendered.get(content_type)
            if rendered is None or rendered.key != key:
                rendered = _Rendered(key, encoder(self._registry))
                self.renders += 1
                if len(self._rendered) >= _MAX_FORMATS:
                    self._rendered.clear()
                self._rendered[content_type] = rendered
            if not want_gzip:
                return rendered.body, content_type
            if rendered.gzipped is None:
                rendered.gzipped = gzip.compress(rendered.body, compresslevel=1)
            return rendered.gzipped, content_type
