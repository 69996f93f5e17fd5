"""What stands between a client and bcrypt: a limit on failed attempts per client address, and a bound on
the checks waiting for the verifying threads.

A wrong password costs the server a bcrypt check (~50-100 ms of CPU at cost 10); a correct one costs it
once, then the cache answers (auth.py). So what an attacker can spend is failures: after `failures` failed
checks from one address within `window_seconds`, that address is answered 429 with Retry-After, without
hashing, until its oldest failure leaves the window. A check counts as failed from the moment it starts,
and its success forgets the address's failures: counted only once they had failed, checks sent at once
from one address all started before the first failure was known (12-15 real checks before the first 429,
not 5). The 429 comes after `refusal_delay_seconds`, so a
client that ignores Retry-After cannot make the server answer thousands of refusals a second. The checks
run in a pool of their own, never in the threads that serve /metrics, and at most `max_pending` wait for
it; more are answered 429. A client whose credentials are cached never reaches either limit, so a
Prometheus that scraped once keeps scraping while another client on the same address guesses passwords.

Pure bookkeeping with an injected clock; the server calls it from its event loop thread only.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class AuthLimits:
    failures: int = 5
    """Failed checks allowed per client address within the window."""
    window_seconds: float = 10.0
    max_clients: int = 4096
    """Addresses remembered (least recently failed forgotten first): bounded memory under a spoofed flood."""
    verify_threads: int = 2
    max_pending: int = 8
    """bcrypt checks running or queued in all; one more is answered 429 without hashing."""
    refusal_delay_seconds: float = 1.0
    """A 429 is sent after this long (a timer, no thread): a client that ignores Retry-After and asks again
    at once gets one answer a second per connection, not thousands."""


class FailureLimiter:
    """Failed attempts per client address in a sliding window."""

    def __init__(self, limits: AuthLimits = AuthLimits(),
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._limits = limits
        self._clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def retry_after(self, client: str) -> int | None:
        """Whole seconds until `client` may try again; None when it may now."""
        times = self._failures.get(client)
        if times is None or len(times) < self._limits.failures:
            return None
        wait = times[0] + self._limits.window_seconds - self._clock()
        if wait <= 0:
            return None
        return max(1, math.ceil(wait))

    def failed(self, client: str) -> bool:
        """Record a failed check (the server records each when it starts, and `forget`s on success); True
        when it is the one that blocks `client` (for one log line)."""
        was_free = self.retry_after(client) is None
        now = self._clock()
        times = self._failures.pop(client, None) or deque(maxlen=self._limits.failures)
        while times and times[0] <= now - self._limits.window_seconds:
            times.popleft()
        times.append(now)
        self._failures[client] = times
        while len(self._failures) > self._limits.max_clients:
            self._failures.popitem(last=False)
        return was_free and self.retry_after(client) is not None

    def forget(self, client: str) -> None:
        """A success from `client`: its earlier failures no longer count."""
        self._failures.pop(client, None)
