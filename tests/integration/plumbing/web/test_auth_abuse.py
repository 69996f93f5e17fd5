"""Basic auth under abuse, over real sockets on 127.0.0.1: failed attempts per client address are limited
(429 with Retry-After, without hashing), a client whose credentials were verified keeps being served while
another guesses from the same address, bcrypt checks wait in a bounded queue of their own, and nothing of the
credentials reaches the log. The serving figures under 100 guessing clients are a benchmark
(benchmarks/auth_abuse.py), not a timed test."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pytest
import requests

from plumbing.web import load_web_config
from plumbing.web.auth import BasicAuth, bcrypt_check
from plumbing.web.guard import AuthLimits
from plumbing.web.server import Answer, HttpServer, Route, ServerSettings

pytestmark = pytest.mark.integration

PASSWORD = "right-horse-battery"


@contextlib.contextmanager
def serve(tmp_path: Path, limits: AuthLimits, cost: int = 4, auth: BasicAuth | None = None) -> Iterator[str]:
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(cost)).decode()
    web = tmp_path / "web.yml"
    web.write_text(f"basic_auth_users:\n  prometheus: '{hashed}'\n  other: '{hashed}'\n")
    server = HttpServer("127.0.0.1", 0, {"/metrics": Route(lambda _: Answer(200, b"up 1\n"))},
                        ServerSettings(auth=limits), web_config=load_web_config(web), auth=auth)
    server.start()
    try:
        yield f"http://127.0.0.1:{server.port}/metrics"
    finally:
        server.shutdown()


@pytest.fixture
def limited(tmp_path: Path) -> Iterator[str]:
    with serve(tmp_path, AuthLimits(failures=3, window_seconds=60.0)) as url:
        yield url


def get(url: str, user: str, password: str) -> requests.Response:
    return requests.get(url, auth=(user, password), timeout=30)


def test_failures_past_the_limit_are_429_and_a_verified_client_keeps_scraping(
        limited: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    assert get(limited, "prometheus", PASSWORD).status_code == 200  # verified once: cached
    guesses = [get(limited, "prometheus", f"guess-{n}") for n in range(3)]
    assert [answer.status_code for answer in guesses] == [401, 401, 401]
    assert all(answer.headers["WWW-Authenticate"].startswith("Basic ") for answer in guesses)
    for user, password in [("prometheus", "guess-4"), ("nobody", "x"), ("other", PASSWORD)]:
        blocked = get(limited, user, password)  # even right but not yet verified: no bcrypt for now
        assert blocked.status_code == 429, (user, blocked.status_code)
        assert 1 <= int(blocked.headers["Retry-After"]) <= 60
        assert "WWW-Authenticate" not in blocked.headers
    for _ in range(5):
        assert get(limited, "prometheus", PASSWORD).status_code == 200
    assert requests.get(limited, timeout=10).status_code == 401  # no credentials: no check, no count
    warnings = [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "127.0.0.1" in warnings[0], warnings
    assert "guess" not in caplog.text and PASSWORD not in caplog.text and "prometheus" not in caplog.text


def test_checks_beyond_the_pending_bound_are_429_at_once(tmp_path: Path) -> None:
    """One verifying thread, at most 2 checks running or queued, a bcrypt cost of 12 (~0.2 s a check): of
    12 simultaneous wrong passwords most are refused without waiting for a hash; the rest get their 401."""
    limits = AuthLimits(failures=1000, verify_threads=1, max_pending=2)
    start = threading.Barrier(12)
    codes: list[int] = []
    with serve(tmp_path, limits, cost=12) as url:

        def guess(n: int) -> None:
            start.wait(10)
            codes.append(get(url, "prometheus", f"wrong-{n}").status_code)

        threads = [threading.Thread(target=guess, args=(n,)) for n in range(12)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert sorted(set(codes)) == [401, 429] and len(codes) == 12, codes
        assert codes.count(429) >= 6, codes
        assert get(url, "prometheus", PASSWORD).status_code == 200  # the queue drains: served again


class HeldCheck:
    """bcrypt's own check behind a gate, through BasicAuth's seam: checks start (and are counted) at once
    but finish only when the test opens the gate, so every request arrives while the first checks run."""

    def __init__(self) -> None:
        self.started = 0
        self._lock = threading.Lock()
        self.gate = threading.Event()

    def __call__(self, password: bytes, hashed: bytes) -> bool:
        with self._lock:
            self.started += 1
        self.gate.wait(120)
        return bcrypt_check(password, hashed)


def test_concurrent_guesses_from_one_address_get_no_more_checks_than_the_limit(tmp_path: Path) -> None:
    """A check counts as failed when it starts: 20 guesses at once from 127.0.0.1 get 3 real checks and 17
    refusals, answered while those 3 are still hashing (counted only once failed, 12-15 checks of 5 ran)."""
    limits = AuthLimits(failures=3, window_seconds=60.0, max_pending=100, refusal_delay_seconds=0.0)
    check, clients = HeldCheck(), 20
    start, answered = threading.Barrier(clients), threading.Semaphore(0)
    codes: list[int] = []
    with serve(tmp_path, limits, auth=BasicAuth(check)) as url:

        def guess(n: int) -> None:
            start.wait(30)
            codes.append(get(url, "prometheus", f"wrong-{n}").status_code)
            answered.release()

        threads = [threading.Thread(target=guess, args=(n,)) for n in range(clients)]
        for thread in threads:
            thread.start()
        refused_while_hashing = all(answered.acquire(timeout=60) for _ in range(clients - limits.failures))
        check.gate.set()
        for thread in threads:
            thread.join(60)
    assert refused_while_hashing, codes
    assert check.started == limits.failures
    assert sorted(codes) == [401] * limits.failures + [429] * (clients - limits.failures)
